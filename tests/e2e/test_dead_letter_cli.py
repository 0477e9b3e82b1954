"""Dead letters from the command line, end to end: a worker process dead-letters the
decisions of code-first runs that spawn a workflow nobody published, and ``wayline
dead-letter`` lists them, refuses bad input, retries one (which then runs to the end
once the missing workflow is published), replays a repeat, refuses a stale token and a
reused command id, and discards another. ``wayline inspect`` names what a retry needs.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from engine.api.client import Client
from engine.api.queries import Queries
from engine.cli import main as cli_main
from engine.cli.runtime import STOPPED_AT_DEAD_LETTER
from engine.model.instance import InstanceStatus
from engine.modes.code.effects import SPAWN_NOT_FOUND
from engine.store.dead_letters import DeadLetter
from engine.store.errors import CommitUnknown
from tests.e2e import ghost_app
from tests.e2e.conftest import Harness
from tests.e2e.test_cli_e2e import argument_error, ok, one_line

APP = "tests.e2e.ghost_app:app"
DETAIL = "spawn of 'ghost': no published version can start"
AUDIT = ("--actor", "ops", "--reason", "ghost is published")


async def parked(e2e: Harness, *ids: str) -> dict[str, DeadLetter]:
    """Start a run of ``ghostly`` per id and wait until each one's decision is a dead
    letter; the dead letters by run."""
    flow = ghost_app.app.workflow_for(ghost_app.GHOSTLY, "1")
    assert flow is not None
    await e2e.client.publish(flow.definition, "e2e", code=flow)  # ghostly, not ghost
    for run_id in ids:
        await ok(e2e, "start", ghost_app.GHOSTLY, "--id", run_id)

    async def letters() -> dict[str, DeadLetter]:
        found = {d.instance_id: d for d in (await Queries(e2e.store).dead_letters()).items}
        return found if len(found) == len(ids) else {}

    return await e2e.until(letters, what="the dead letters")


def fence(letter: DeadLetter) -> tuple[str, ...]:
    return (letter.instance_id, letter.work_id, "--token", str(letter.token))


async def test_dead_letters_are_listed_retried_replayed_and_discarded(e2e: Harness) -> None:
    await e2e.spawn(app=APP)
    letters = await parked(e2e, "g1", "g2")
    first, second = letters["ghostly/g1"], letters["ghostly/g2"]

    listed = (await ok(e2e, "dead-letter", "list")).splitlines()
    assert len(listed) == 2
    assert listed[0].split("  ")[1:] == [
        first.instance_id,
        first.work_id,
        f"token {first.token}",
        "decision workflow:ghostly@1",
        f"{SPAWN_NOT_FOUND}: {DETAIL}",
    ]
    objects = [
        json.loads(line) for line in (await ok(e2e, "dead-letter", "list", "--json")).splitlines()
    ]
    assert [(o["instance_id"], o["work_id"], o["token"]) for o in objects] == [
        (d.instance_id, d.work_id, d.token) for d in (first, second)
    ]
    assert (objects[0]["kind"], objects[0]["failure_detail"]) == ("decision", DETAIL)
    assert (
        (await ok(e2e, "dead-letter", "list", "--limit", "1"))
        .splitlines()[1]
        .startswith("more dead letters than the 1 shown")
    )
    assert await ok(e2e, "dead-letter", "list", "--code", "no-such-code") == "no dead letters\n"

    shown = await ok(e2e, "inspect", first.instance_id)
    assert shown.splitlines()[-2:] == [
        f"  dead letter decision (work {first.work_id}, token {first.token}): "
        f"{SPAWN_NOT_FOUND}: {DETAIL}",
        f"  now: {STOPPED_AT_DEAD_LETTER}",
    ]
    assert "wayline dead-letter list / retry / discard" in STOPPED_AT_DEAD_LETTER

    past = ("--at", "2020-01-01T00:00:00Z")
    refused = await e2e.cli("dead-letter", "retry", *fence(first), *AUDIT, *past)
    assert refused.code == 2
    assert one_line(refused) == (
        "wayline dead-letter retry: the retry must be due now or later, not in the past"
    )
    late = ("--deadline", "2020-01-01T00:00:00Z")
    inverted = await e2e.cli("dead-letter", "retry", *fence(first), *AUDIT, *late)
    assert one_line(inverted) == (
        "wayline dead-letter retry: the new deadline must be after the retry is due"
    )
    bad_time = await e2e.cli("dead-letter", "retry", *fence(first), *AUDIT, "--at", "tomorrow")
    assert "--at: must be an RFC 3339 instant with a time zone" in argument_error(bad_time)

    published = await ok(e2e, "definition", "publish", "--app", APP)
    assert [line.split()[-2] for line in published.splitlines()] == ["ghostly@1", "ghost@1"]
    retry = ("dead-letter", "retry", *fence(first), *AUDIT, "--command-id", "cmd-1")
    done = (await ok(e2e, *retry)).splitlines()
    assert done[0].startswith(
        f"retried {first.instance_id} {first.work_id} token {first.token}: due "
    )
    assert done[0].endswith("(by ops: ghost is published)")
    assert done[1] == "command id: cmd-1"
    ended = await e2e.settled(first.instance_id, InstanceStatus.COMPLETED)
    assert ended.value("result") == ghost_app.GHOST_RESULT

    again = (await ok(e2e, *retry)).splitlines()
    assert again[0] == done[0] + "; replayed: recorded before, nothing changed"
    stale = await e2e.cli("dead-letter", "retry", *fence(first), *AUDIT)
    assert stale.code == 1
    assert one_line(stale) == (
        f"wayline dead-letter retry: work {first.work_id} has no dead letter with token "
        f"{first.token}: it was resolved, reclaimed or never dead-lettered"
    )

    discard = ("dead-letter", "discard", *fence(second), "--actor", "ops")
    gone = await ok(e2e, *discard, "--reason", "not wanted", "--command-id", "cmd-2")
    assert gone.splitlines() == [
        f"discarded {second.instance_id} {second.work_id} token {second.token} "
        "(by ops: not wanted)",
        "command id: cmd-2",
    ]
    reused = await e2e.cli(*discard, "--reason", "another reason", "--command-id", "cmd-2")
    assert one_line(reused) == (
        "wayline dead-letter discard: command cmd-2 was already used for a different resolution"
    )
    assert await ok(e2e, "dead-letter", "list") == "no dead letters\n"


async def test_an_unknown_outcome_says_to_give_the_same_command_again(
    e2e: Harness, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A lost COMMIT answer is no refusal: the line names the command id to repeat."""

    async def lost(client: Client, command: object) -> None:
        raise CommitUnknown("resolution cmd-9: the outcome is unknown")

    monkeypatch.setattr(Client, "resolve_dead_letter", lost)
    argv = ["dead-letter", "discard", "ghostly/g9", "ghostly/g9#1", "--token", "1", *AUDIT]
    argv += ["--command-id", "cmd-9", "--dsn", e2e.dsn, "--schema", e2e.schema]
    assert await asyncio.to_thread(cli_main.main, argv) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "wayline dead-letter discard: the outcome is unknown (the answer to the commit was lost): "
        "give the same command again with --command-id cmd-9 to learn it"
    ]
