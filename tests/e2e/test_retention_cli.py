"""``wayline retention set|list|run`` as an operator at a terminal sees it: a policy per
team, a run that exports and removes what is past it, and one line for bad input."""

from __future__ import annotations

import asyncio
import json
import re
import resource
import signal
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg

from engine.decide.operator_actions import Action
from engine.model.limits import MIN_RETENTION_KEEP
from tests.e2e.conftest import WAIT_SECONDS, WAYLINE, CliResult
from tests.e2e.test_cli_e2e import ok, one_line
from tests.integration.factories import DEFINITION

if TYPE_CHECKING:
    from tests.e2e.conftest import Harness


async def test_a_run_exports_and_removes_what_is_past_the_keep(e2e: Harness) -> None:
    await e2e.publish(DEFINITION)
    await e2e.start(DEFINITION, "gone")
    await e2e.client.command("gone", Action.TERMINATE, "alice", "no longer needed")
    await e2e.start(DEFINITION, "still-running")
    assert (
        await ok(e2e, "retention", "list") == "no retention policy: every ended instance is kept\n"
    )
    assert await ok(e2e, "retention", "set", "--keep", "1h", "--as", "alice") == (
        "team (no team) keeps ended instances 1h\n"
    )
    listed = await ok(e2e, "retention", "list")
    assert listed.startswith("(no team)\tkeep 1h\tset by alice at ")
    await ended_an_hour_ago(e2e)

    exports = e2e.tmp / "exports"
    exports.mkdir()
    out = await ok(e2e, "retention", "run", "--export-dir", str(exports))
    (path,) = exports.iterdir()
    assert (
        out == f"team (no team): exported 1 to {path}, removed 1, left 0 in use for a later run\n"
    )
    (line,) = path.read_text().splitlines()
    assert [e["instance_id"] for e in json.loads(line)][-1] == "gone"
    assert await e2e.query("SELECT instance_id FROM instances ORDER BY 1") == [("still-running",)]
    again = await ok(e2e, "retention", "run", "--export-dir", str(exports))
    assert again == "team (no team): nothing past its keep, no export written\n"
    assert list(exports.iterdir()) == [path], "no empty export file"


async def test_a_team_called_engine_exports_apart_from_the_engines_own_team(
    e2e: Harness,
) -> None:
    """The engine's own team '' and a team named ``engine`` each get their own file: the
    engine's file was ``engine-<time>.jsonl``, which is also team engine's name, so a run
    wrote both teams' instances into one export."""
    await e2e.publish(DEFINITION)
    for team, instance in (("", "own"), ("engine", "engine:theirs")):
        await e2e.client.start_or_join(DEFINITION.name, instance, None, None, team)
        await e2e.client.command(instance, Action.TERMINATE, "alice", "no longer needed")
        await ok(e2e, "retention", "set", "--team", team, "--keep", "1h", "--as", "alice")
    await ended_an_hour_ago(e2e)
    exports = e2e.tmp / "exports"
    exports.mkdir()
    await ok(e2e, "retention", "run", "--export-dir", str(exports))
    exported = {
        path.name.split("-")[0]: [json.loads(line)[0]["instance_id"] for line in path.open()]
        for path in exports.iterdir()
    }
    assert exported == {"_engine": ["own"], "engine": ["engine:theirs"]}


async def test_unset_takes_a_teams_policy_back_and_a_team_without_one_is_refused(
    e2e: Harness,
) -> None:
    """A policy could be set and replaced but never taken back: a team that wanted to
    keep everything again had to pick the longest keep instead."""
    await ok(e2e, "retention", "set", "--team", "red", "--keep", "90d", "--as", "alice")
    await ok(e2e, "retention", "set", "--keep", "7d", "--as", "bob")
    out = await ok(e2e, "retention", "unset", "--team", "red")
    assert re.fullmatch(
        r"team 'red' keeps every ended instance again \(its policy kept them 90d, set by alice "
        r"at \S+Z\)\n",
        out,
    ), out
    listed = await ok(e2e, "retention", "list")
    assert listed.startswith("(no team)\tkeep 7d\tset by bob at "), "the other team's stays"
    assert len(listed.splitlines()) == 1

    again = await e2e.cli("retention", "unset", "--team", "red")
    assert again.code == 1
    assert one_line(again) == (
        "wayline retention unset: team 'red' has no retention policy, so there is none to "
        "unset (`wayline retention list` shows every policy)"
    )
    assert (await ok(e2e, "retention", "unset")).startswith("team (no team) keeps every")
    bad = await e2e.cli("retention", "unset", "--team", "Not A Team")
    assert bad.code == 2
    assert one_line(bad).startswith("wayline retention unset: error: argument --team: a team id")


KEEPS_ALLOWED = (
    "(MIN_RETENTION_KEEP, so an ended instance is not removed before anyone can read it) "
    "to 36500d (MAX_RETENTION_KEEP), e.g. 90d"
)


async def test_bad_input_gets_one_line(e2e: Harness) -> None:
    soon = await e2e.cli("retention", "set", "--keep", "soon", "--as", "alice")
    assert soon.code == 2 and "expected a duration" in soon.stderr
    missing = await e2e.cli("retention", "run", "--export-dir", str(e2e.tmp / "nowhere"))
    assert missing.code == 2
    assert (
        one_line(missing)
        == f"wayline retention run: --export-dir {e2e.tmp / 'nowhere'} is not a directory"
    )
    empty = await e2e.cli("retention", "run", "--export-dir", "")
    assert empty.code == 2, "an empty --export-dir is not the working directory"
    assert one_line(empty) == (
        "wayline retention run: error: argument --export-dir: an empty name is no directory: "
        "name the directory the exports go to"
    )
    unset = await e2e.cli("retention", "run", "--export-dir", str(e2e.tmp), "--team", "red")
    assert (
        one_line(unset)
        == "wayline retention run: team 'red' has no retention policy (set one first)"
    )
    for given in ("0", "x"):
        batch = await e2e.cli("retention", "run", "--export-dir", str(e2e.tmp), "--batch", given)
        assert batch.code == 2
        assert one_line(batch) == (
            "wayline retention run: error: argument --batch: must be a whole number from 1 to 500"
        )
    never = await e2e.cli("retention", "set", "--keep", "0d", "--as", "alice")
    assert never.code == 2
    assert one_line(never) == (
        "wayline retention set: error: argument --keep: keep must be positive: it must be "
        f"from 1h {KEEPS_ALLOWED}"
    )
    for short in ("1ms", "59m"):
        brief = await e2e.cli("retention", "set", "--keep", short, "--as", "alice")
        assert brief.code == 2
        assert one_line(brief) == (
            f"wayline retention set: error: argument --keep: keep {short} is too short: it "
            f"must be from 1h {KEEPS_ALLOWED}"
        )
    assert await e2e.query("SELECT * FROM retention_policies") == [], "nothing written"


async def test_a_team_that_is_no_team_id_never_names_an_export_outside_the_dir(
    e2e: Harness,
) -> None:
    refused = await e2e.cli("retention", "set", "--team", "../escaped", "--keep", "1h", "--as", "a")
    assert refused.code == 2
    assert one_line(refused).startswith(
        "wayline retention set: error: argument --team: a team id has 1 to 63 characters"
    )

    # A policy stored before team ids were checked: its run is refused, and exports nothing.
    async with e2e.store.connection() as conn:
        await conn.execute(
            "INSERT INTO retention_policies (tenant_id, keep, set_by, set_at)"
            " VALUES ('../escaped', '1 ms', 'a', now())"
        )
    inner = e2e.tmp / "exports" / "inner"
    inner.mkdir(parents=True)
    run = await e2e.cli("retention", "run", "--export-dir", str(inner))
    assert run.code == 1
    assert one_line(run).startswith("wayline retention run: a team id has 1 to 63 characters")
    assert list((e2e.tmp / "exports").rglob("*.jsonl")) == []


async def terminated(e2e: Harness, count: int) -> list[str]:
    """``count`` ended instances (terminated at once) of DEFINITION, by id."""
    await e2e.publish(DEFINITION)
    ids = [f"old-{n}" for n in range(count)]
    for instance_id in ids:
        await e2e.start(DEFINITION, instance_id)
        await e2e.client.command(instance_id, Action.TERMINATE, "alice", "no longer needed")
    await ok(e2e, "retention", "set", "--keep", "1h", "--as", "alice")
    await ended_an_hour_ago(e2e)
    return ids


async def ended_an_hour_ago(e2e: Harness) -> None:
    """Every ended instance's end moved an hour back: past a keep of 1h, the shortest a
    policy allows (MIN_RETENTION_KEEP)."""
    async with e2e.store.connection() as conn:
        await conn.execute(
            "UPDATE instances SET archived_at = archived_at - %(keep)s"
            " WHERE archived_at IS NOT NULL",
            {"keep": MIN_RETENTION_KEEP},
        )


async def run_in_background(e2e: Harness, exports: Path) -> asyncio.subprocess.Process:
    exports.mkdir()
    return await asyncio.create_subprocess_exec(
        WAYLINE,
        *("retention", "run", "--export-dir", str(exports), "--batch", "2"),
        *("--dsn", e2e.dsn, "--schema", e2e.schema),
        env=e2e.env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def blocked_removing(e2e: Harness) -> list[tuple]:
    """The server process of a run that waits for the lock on snapshots its removal's
    DELETE needs (none: no run waits)."""
    return await e2e.query(
        "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
        " AND query LIKE 'DELETE FROM snapshots%%'"
    )


def exported_ids(exports: Path) -> list[str]:
    """The instance of every line of every export in ``exports`` (each line must be a
    whole JSON array of events)."""
    return [
        json.loads(line)[0]["instance_id"]
        for path in sorted(exports.iterdir())
        for line in path.read_text().splitlines()
    ]


async def test_a_run_started_while_another_works_on_the_team_skips_it(e2e: Harness) -> None:
    """Two overlapping runs (a cron job that outlasts its interval) both exported the same
    instances; the second then found them locked and said they were "in use", or found
    them removed half way and failed with "instance old-3 does not exist"."""
    ids = await terminated(e2e, 4)
    async with await psycopg.AsyncConnection.connect(e2e.dsn) as blocker:
        # The first run exports its first batch, then waits to remove it.
        await blocker.execute(f"LOCK TABLE {e2e.schema}.snapshots IN SHARE MODE")
        first = await run_in_background(e2e, e2e.tmp / "first")
        await e2e.until(lambda: blocked_removing(e2e), what="the first run removing")

        second = await e2e.cli("retention", "run", "--export-dir", str(e2e.tmp))
        assert (second.code, second.stderr) == (0, "")
        assert second.stdout == (
            "team (no team): skipped, another retention run is under way "
            "(it exports and removes what this one would)\n"
        )
        assert list(e2e.tmp.glob("*.jsonl")) == []
        await blocker.rollback()
    out, err = await asyncio.wait_for(first.communicate(), WAIT_SECONDS)
    assert (first.returncode, err) == (0, b"")
    assert b"exported 4 to" in out and b"removed 4, left 0" in out
    assert sorted(exported_ids(e2e.tmp / "first")) == ids


async def test_a_run_killed_half_way_loses_nothing_and_the_next_one_finishes(
    e2e: Harness,
) -> None:
    ids = await terminated(e2e, 4)
    async with await psycopg.AsyncConnection.connect(e2e.dsn) as blocker:
        await blocker.execute(f"LOCK TABLE {e2e.schema}.snapshots IN SHARE MODE")
        killed = await run_in_background(e2e, e2e.tmp / "killed")
        ((backend,),) = await e2e.until(lambda: blocked_removing(e2e), what="the run removing")
        killed.send_signal(signal.SIGKILL)
        await killed.wait()
        await blocker.rollback()
    # Its removal's transaction ends (uncommitted) once its server process sees it gone.

    async def gone() -> bool:
        alive = "SELECT pid FROM pg_stat_activity WHERE pid = %(pid)s"
        return await e2e.query(alive, {"pid": backend}) == []

    await e2e.until(gone, what="the killed run's server process gone")
    assert len(exported_ids(e2e.tmp / "killed")) == 2, "the first batch, on disk"

    # The next run is not shut out by the dead one, and exports that batch again.
    again = await ok(e2e, "retention", "run", "--export-dir", str(e2e.tmp / "killed"))
    assert "exported 4 to" in again and "removed 4, left 0" in again
    assert sorted(set(exported_ids(e2e.tmp / "killed"))) == ids
    assert await e2e.query("SELECT count(*) FROM instances") == [(0,)]


async def test_an_export_that_cannot_be_written_leaves_no_torn_file(e2e: Harness) -> None:
    """A full disk (here: a file size limit) stopped the run before anything was removed,
    but left the export with the part of a batch that fit, ending in half a line."""
    await terminated(e2e, 30)
    exports = e2e.tmp / "exports"
    exports.mkdir()

    def small_files() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past it fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    process = await asyncio.create_subprocess_exec(
        WAYLINE,
        *("retention", "run", "--export-dir", str(exports)),
        *("--dsn", e2e.dsn, "--schema", e2e.schema),
        env=e2e.env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        preexec_fn=small_files,
    )
    out, err = await asyncio.wait_for(process.communicate(), WAIT_SECONDS)
    failed = CliResult(process.returncode or 0, out.decode(), err.decode())
    assert failed.code == 1
    assert one_line(failed) == (
        f"wayline retention run: the export directory {exports} cannot be written (File too large)"
    )
    assert await e2e.query("SELECT count(*) FROM instances") == [(30,)]
    assert list(exports.iterdir()) == [], "no file holding part of a batch"
