"""``wayline retention set|list|run`` as an operator at a terminal sees it: a policy per
team, a run that exports and removes what is past it, and one line for bad input."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from engine.decide.operator_actions import Action
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
    assert await ok(e2e, "retention", "set", "--keep", "1ms", "--as", "alice") == (
        "team (no team) keeps ended instances 1ms\n"
    )
    listed = await ok(e2e, "retention", "list")
    assert listed.startswith("(no team)\tkeep 1ms\tset by alice at ")

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
        await ok(e2e, "retention", "set", "--team", team, "--keep", "1ms", "--as", "alice")
    exports = e2e.tmp / "exports"
    exports.mkdir()
    await ok(e2e, "retention", "run", "--export-dir", str(exports))
    exported = {
        path.name.split("-")[0]: [json.loads(line)[0]["instance_id"] for line in path.open()]
        for path in exports.iterdir()
    }
    assert exported == {"_engine": ["own"], "engine": ["engine:theirs"]}


async def test_bad_input_gets_one_line(e2e: Harness) -> None:
    soon = await e2e.cli("retention", "set", "--keep", "soon", "--as", "alice")
    assert soon.code == 2 and "expected a duration" in soon.stderr
    missing = await e2e.cli("retention", "run", "--export-dir", str(e2e.tmp / "nowhere"))
    assert missing.code == 2
    assert (
        one_line(missing)
        == f"wayline retention: --export-dir {e2e.tmp / 'nowhere'} is not a directory"
    )
    empty = await e2e.cli("retention", "run", "--export-dir", "")
    assert empty.code == 2, "an empty --export-dir is not the working directory"
    assert one_line(empty) == (
        "wayline retention run: error: argument --export-dir: an empty name is no directory: "
        "name the directory the exports go to"
    )
    unset = await e2e.cli("retention", "run", "--export-dir", str(e2e.tmp), "--team", "red")
    assert (
        one_line(unset) == "wayline retention: team 'red' has no retention policy (set one first)"
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
        "wayline retention set: error: argument --keep: keep must be a positive duration of "
        "at most 36500 days (MAX_RETENTION_KEEP), e.g. 90d"
    )


async def test_a_team_that_is_no_team_id_never_names_an_export_outside_the_dir(
    e2e: Harness,
) -> None:
    refused = await e2e.cli(
        "retention", "set", "--team", "../escaped", "--keep", "1ms", "--as", "a"
    )
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
    assert one_line(run).startswith("wayline retention: a team id has 1 to 63 characters")
    assert list((e2e.tmp / "exports").rglob("*.jsonl")) == []
