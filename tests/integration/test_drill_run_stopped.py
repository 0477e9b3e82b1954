"""``wayline drill run`` stopped by Ctrl-C or SIGTERM while several drills run at once:
every drill under way unwinds (its worker processes stopped, its schema dropped), the
run is recorded as stopped and the command says so in one line. The interrupted event
loop used to cancel every task at once, and the campaign's gather ended with the first
cancelled drill, so the others' cleanup was cut short: their schemas stayed behind."""

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


@pytest.mark.timeout(300)
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stopped_run_cleans_up_every_drill_under_way(
    pg_dsn: str, schema: str, tmp_path: Path, signum: signal.Signals
) -> None:
    command = [sys.executable, "-m", "engine.cli.main", "drill", "run", "--dsn", pg_dsn,
               "--schema", schema, "--drill", "D1", "--artifacts", str(tmp_path)]  # fmt: skip
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ,
        # Ctrl-C reaches a process whose SIGINT is not ignored (a background job's is)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
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
        status, error = conn.execute("SELECT status, error FROM drill_runs").fetchone()
        assert (status, error) == ("stopped", "stopped before it finished")
        assert _drill_schemas(conn, run_id) == [], "every drill's schema is dropped"
