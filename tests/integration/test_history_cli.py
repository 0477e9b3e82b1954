"""Reading a long history from the command line, as a person at a terminal does.

``wayline history`` printed every event of an instance, however many, with no way to
read it a page at a time; it now pages as the studio and the API do (``--after``,
``--limit`` up to ``MAX_HISTORY_PAGE_EVENTS``, a last line with the command for the
next page). ``wayline inspect`` printed every earlier attempt of a step under it; it now
lists the newest ``EARLIER_ATTEMPTS_SHOWN`` and names the command that lists the rest.

Each command runs through the ``wayline`` entry point (``engine.cli.main.main``) in
this process, against the real PostgreSQL of the integration fixtures.
"""

from __future__ import annotations

import asyncio
import json
import shlex
from datetime import timedelta
from typing import Any

import pytest

from engine import ActivityFailure, ActivityRegistry, ActivityRequest, Worker, WorkerConfig
from engine.api.client import Client
from engine.cli.main import main
from engine.cli.runtime import EARLIER_ATTEMPTS_SHOWN
from engine.decide.operator_actions import Action
from engine.decide.operator_commands import record_command
from engine.model.limits import MAX_HISTORY_PAGE_EVENTS
from engine.model.transitions import Draft
from engine.model.validation import parse_definition
from engine.store.store import Store
from tests.integration.factories import open_store
from tests.integration.test_cli_errors import EXAMPLE, argument_refused, refused

LENGTH = 57
"""About how long the padded history is (a pause or a resume adds two events): not a
multiple of the page size below, so the last page is a short one."""
PAGE = 10
FAILURES = EARLIER_ATTEMPTS_SHOWN + 4
"""Attempts of the flaky step that fail before one succeeds: more than inspect lists."""


@pytest.fixture
def store_options(pg_dsn: str, schema: str) -> list[str]:
    return ["--dsn", pg_dsn, "--schema", schema]


@pytest.fixture
def long_instance(
    pg_dsn: str, schema: str, store_options: list[str], capsys: pytest.CaptureFixture[str]
) -> tuple[str, int]:
    """The example order started as o-1, its history padded with pause and resume
    commands (as an operator's would be) to ``LENGTH`` events or one more: its id and
    how many events it has."""
    assert main(["definition", "publish", str(EXAMPLE), *store_options]) == 0
    assert main(["start", "order.fulfillment", "--id", "o-1", *store_options]) == 0
    capsys.readouterr()
    events = asyncio.run(pad(pg_dsn, schema, "o-1", LENGTH))
    assert events % PAGE, "the last page is a short one"
    return "o-1", events


async def pad(dsn: str, schema: str, instance_id: str, events: int) -> int:
    """Grow the instance's history to at least ``events`` with pause/resume commands;
    how many events it has then."""
    async with open_store(dsn, schema) as store:
        client = Client(store)
        state = await client.inspect(instance_id)
        registry = await client.registries.get()
        while state.sequence < events:
            draft = Draft(registry, state, max(store.now(), state.updated_at))
            action = Action.RESUME if state.status.label == "paused" else Action.PAUSE
            record_command(draft, f"pad-{state.sequence}", action, "ops", "padding")
            await store.commit(draft.build("pad", str(state.sequence)))
            state = draft.state
        return state.sequence


def positions(out: str) -> list[int]:
    """The positions of the event lines ``wayline history`` printed."""
    return [int(line.split()[0]) for line in out.splitlines() if line.split()[0].isdigit()]


def test_history_pages_and_its_last_line_gives_the_next_page(
    long_instance: tuple[str, int], store_options: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    instance_id, events = long_instance
    assert main(["history", instance_id, *store_options]) == 0
    assert positions(capsys.readouterr().out) == list(range(1, events + 1)), "one page"

    seen: list[int] = []
    argv: list[str] | None = ["history", instance_id, "--limit", str(PAGE)]
    while argv:
        assert main([*argv, *store_options]) == 0
        out = capsys.readouterr().out
        seen += positions(out)
        last = out.splitlines()[-1]
        argv = None
        if last.startswith("more events after "):
            assert len(positions(out)) == PAGE
            assert last.startswith(f"more events after {seen[-1]} (the last is {events}): ")
            argv = shlex.split(last.split(": ", 1)[1])[1:]  # as a person pastes it
    assert seen == list(range(1, events + 1)), "every event once, in order"

    assert main(["history", instance_id, "--limit", str(PAGE), "--json", *store_options]) == 0
    printed = capsys.readouterr()
    assert [json.loads(line)["sequence"] for line in printed.out.splitlines()] == list(
        range(1, PAGE + 1)
    ), "stdout holds events only"
    assert printed.err == (
        f"more events after {PAGE} (the last is {events}): "
        f"wayline history {instance_id} --after {PAGE} --limit {PAGE} --json\n"
    )

    assert main(["history", instance_id, "--after", str(events), *store_options]) == 0
    assert capsys.readouterr().out == f"no events after {events}\n"


def test_history_refuses_a_position_or_a_limit_it_cannot_page_by(
    long_instance: tuple[str, int], store_options: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    instance_id, events = long_instance
    history = ["history", instance_id, *store_options]
    status, line = refused(capsys, *history, "--after", str(events + 1))
    assert (status, line) == (
        2,
        f"wayline history: argument --after: {events + 1} is past the end of this history: "
        f"{instance_id} has {events} events, so --after is from 0 (from the first) to {events}",
    )
    limit_rule = (
        "wayline history: error: argument --limit: must be a whole number from 1 to "
        f"{MAX_HISTORY_PAGE_EVENTS} (MAX_HISTORY_PAGE_EVENTS)"
    )
    for bad in ("0", "-3", "ten", "2.5", str(MAX_HISTORY_PAGE_EVENTS + 1)):
        assert argument_refused(capsys, *history, "--limit", bad) == limit_rule, bad
    after_rule = (
        "wayline history: error: argument --after: must be a position in the history, "
        "a whole number of at least 0 (0: from the first)"
    )
    for bad in ("-1", "first", "1.5"):
        assert argument_refused(capsys, *history, "--after", bad) == after_rule, bad


flaky = ActivityRegistry()


@flaky.activity("history.flaky")
def call(request: ActivityRequest) -> Any:
    if request.attempt <= FAILURES:
        raise ActivityFailure("busy", f"attempt {request.attempt} busy", retryable=True)
    return {"ok": request.attempt}


async def test_inspect_lists_the_newest_earlier_attempts_and_the_command_for_the_rest(
    db_store: Store, store_options: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """A step retried hundreds of times buried the rest of ``inspect`` under a line per
    attempt."""
    retry = {"max_attempts": FAILURES + 1, "initial_delay": "1ms", "max_delay": "1ms"}
    step = {"name": "call", "kind": "activity", "target": "history.flaky", "timeout": "30s"}
    client = Client(db_store)
    flow = {"name": "flaky", "version": "1", "steps": [step | {"retry": retry}]}
    await client.publish(parse_definition(flow))
    await client.start("flaky", "f-1", None)
    stop = asyncio.Event()
    config = WorkerConfig(worker_id="flaky-worker", poll_interval=timedelta(milliseconds=20))
    worker = asyncio.create_task(Worker(db_store, flaky, config).run(stop))
    try:
        await client.wait("f-1", timedelta(seconds=60))
    finally:
        stop.set()
        await worker

    assert await asyncio.to_thread(main, ["inspect", "f-1", *store_options]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = lines.index(
        f"  activity call: succeeded attempt {FAILURES + 1} key=f-1/call/{FAILURES + 1}"
    )
    unlisted = FAILURES - EARLIER_ATTEMPTS_SHOWN
    assert lines[at + 1] == (
        f"    attempts 1 to {unlisted} are not listed here: "
        "wayline history f-1 --step call lists them"
    )
    shown = [line for line in lines if line.startswith("    attempt ")]
    assert shown == [
        f"    attempt {n}: failed code=busy: attempt {n} busy"
        for n in range(unlisted + 1, FAILURES + 1)
    ]
    assert lines[at + 2 : at + 2 + EARLIER_ATTEMPTS_SHOWN] == shown, "under the step"

    argv = ["history", "f-1", "--step", "call", *store_options]
    assert await asyncio.to_thread(main, argv) == 0
    failed = [line for line in capsys.readouterr().out.splitlines() if " attempt_failed " in line]
    assert [line.split("attempt=")[1].split()[0] for line in failed] == [
        str(n) for n in range(1, FAILURES + 1)
    ], "the command it names lists every attempt"
