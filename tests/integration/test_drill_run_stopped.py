"""``wayline drill run`` stopped by Ctrl-C or SIGTERM while several drills run at once:
every drill under way unwinds (its worker processes stopped, its schema dropped), the
run is recorded as stopped and the command says so in one line. The interrupted event
loop used to cancel every task at once, and the campaign's gather ended with the first
cancelled drill, so the others' cleanup was cut short: their schemas stayed behind.
A run that could not be recorded (its schema unusable, the record's write failing, a
private cluster removed with it) said "recorded as stopped" all the same; it says why
it is not, naming an error by its type only (the driver's text can quote the server)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

ROOT = Path(__file__).resolve().parents[2]
UNDER_WAY_SECONDS = 120.0
"""A bound on the wait for drills to be under way (calibration takes a few seconds)."""
STOP_SECONDS = 60.0
"""A bound on the wait for the stopped command to end."""


def _drill_schemas(conn: psycopg.Connection, run_id: str) -> list[str]:
    rows = conn.execute(
        "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s AND nspname NOT LIKE %s",
        [f"drill_{run_id}%", "%\\_cal"],
    ).fetchall()
    return [r[0] for r in rows]


def _until(check: object, what: str) -> object:
    """Poll the database (the command has no event to await) until ``check`` answers."""
    deadline = time.monotonic() + UNDER_WAY_SECONDS
    while not (found := check()) and time.monotonic() < deadline:  # type: ignore[operator]
        time.sleep(0.2)
    assert found, f"never saw {what}"
    return found


def _drill_run(tmp_path: Path, *options: str) -> subprocess.Popen[str]:
    """``wayline drill run --drill D1`` with ``options``, its output piped."""
    command = [sys.executable, "-m", "engine.cli.main", "drill", "run", "--drill", "D1",
               "--artifacts", str(tmp_path), *options]  # fmt: skip
    return subprocess.Popen(
        command,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ,
        # Ctrl-C reaches a process whose SIGINT is not ignored (a background job's is)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def _interrupted_after(process: subprocess.Popen[str], line_start: str) -> str:
    """Read stderr up to the first line starting with ``line_start``, send SIGINT, and
    return all of stderr once the command ended as a stopped one."""
    assert process.stderr is not None
    seen: list[str] = []
    try:
        while not (seen and seen[-1].startswith(line_start)):
            line = process.stderr.readline()
            assert line, f"the command ended before {line_start!r}: {''.join(seen)[-3000:]}"
            seen.append(line)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=STOP_SECONDS)
    finally:
        process.kill()
    err = "".join(seen) + err
    assert process.returncode == 128 + signal.SIGINT, err[-3000:]
    assert "stopped by SIGINT" in err and "Traceback" not in err, err[-3000:]
    assert "is recorded as stopped" not in err, err[-3000:]
    return err


@pytest.mark.timeout(300)
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stopped_run_cleans_up_every_drill_under_way(
    pg_dsn: str, schema: str, tmp_path: Path, signum: signal.Signals
) -> None:
    process = _drill_run(tmp_path, "--dsn", pg_dsn, "--schema", schema)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        try:
            run_id = _until(
                lambda: conn.execute("SELECT run_id FROM drill_runs").fetchone(), "the run"
            )[0]
            _until(lambda: len(_drill_schemas(conn, run_id)) > 1, "drills under way at once")
            process.send_signal(signum)
            _, err = process.communicate(timeout=STOP_SECONDS)
        finally:
            process.kill()
        assert process.returncode == 128 + signum, err[-3000:]
        assert f"stopped by {signum.name}" in err and "Traceback" not in err, err[-3000:]
        assert err.rstrip().endswith("; the run is recorded as stopped"), err[-3000:]
        status, error = conn.execute("SELECT status, error FROM drill_runs").fetchone()
        assert (status, error) == ("stopped", "stopped before it finished")
        assert _drill_schemas(conn, run_id) == [], "every drill's schema is dropped"


@pytest.mark.timeout(300)
def test_a_stop_says_a_run_its_schema_could_not_hold_is_not_recorded(
    pg_dsn: str, schema_name: str, tmp_path: Path
) -> None:
    process = _drill_run(tmp_path, "--dsn", pg_dsn, "--schema", schema_name)
    err = _interrupted_after(process, "[1/")
    warning = f"the run is not recorded: schema {schema_name} is not usable (SchemaBehindError)"
    assert warning in err and "holds no Wayline tables" not in err, err[-3000:]
    said = f"; the run is not recorded (schema {schema_name} is not usable)\n"
    assert err.endswith(said), err[-3000:]


@pytest.mark.timeout(300)
def test_a_stop_whose_record_fails_says_the_run_is_not_recorded(
    pg_dsn: str, schema: str, tmp_path: Path
) -> None:
    process = _drill_run(tmp_path, "--dsn", pg_dsn, "--schema", schema)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        _until(lambda: conn.execute("SELECT run_id FROM drill_runs").fetchone(), "the run")
        conn.execute("ALTER TABLE drill_runs RENAME TO drill_runs_elsewhere")
    err = _interrupted_after(process, "[1/")
    assert "the run is not recorded as stopped (UndefinedTable)" in err, err[-3000:]
    assert "does not exist" not in err, "no driver text"
    said = "; the run is not recorded (recording it as stopped failed (UndefinedTable))\n"
    assert err.endswith(said), err[-3000:]


@pytest.mark.timeout(300)
def test_a_stop_says_a_run_on_a_private_cluster_is_not_kept(tmp_path: Path) -> None:
    err = _interrupted_after(_drill_run(tmp_path), "[1/")
    said = "; the run is not recorded (it ran on a private cluster, removed as the run ended)\n"
    assert err.endswith(said), err[-3000:]
