"""Bulk operator actions against a real PostgreSQL while a real worker makes progress.

An instance that moved between the preview and the action is judged again on its
state then, never acted on by the preview's verdict; every instance gets exactly one
kept result and at most one audited command of the bulk; the same bulk taken twice,
even at the same moment, acts once.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

import pytest

from engine import (
    ActivityRegistry,
    BulkCommands,
    BulkConflict,
    Client,
    Queries,
    UnknownOutcome,
    Worker,
    WorkerConfig,
)
from engine.api.bulk_commands import BulkCommand, command_id
from engine.decide.bulk_actions import bulk_request
from engine.decide.operator_actions import Action
from engine.model.instance import Instance, InstanceStatus
from engine.model.validation import parse_definition
from engine.store.bulk_commands import record_bulk
from engine.store.store import Store
from tests.e2e.conftest import until

S = InstanceStatus
LIMITS = {"input_limit": 1024, "result_limit": 1024}
RETRY = {"max_attempts": 3, "initial_delay": "1s", "max_delay": "1s"}
ORDER = parse_definition(
    {
        "name": "bulk.order",
        "version": "1",
        "mode": "orchestration",
        "steps": [
            {"name": "reserve", "kind": "activity", "target": "bulk.reserve", "timeout": "30s",
             "retry": RETRY, **LIMITS,
             "compensation": {"target": "bulk.release", "timeout": "30s", "retry": RETRY,
                              "result_limit": 1024}},
            {"name": "go", "kind": "signal", "target": "go", "timeout": "1h", "input_limit": 1024},
            {"name": "ship", "kind": "activity", "target": "bulk.ship", "timeout": "30s",
             "retry": RETRY, **LIMITS},
        ],
    }
)  # fmt: skip


@dataclass
class Effects:
    """What the worker's handlers did, and a gate that holds ``ship`` while a test wants."""

    calls: list[tuple[str, str]] = field(default_factory=list)
    keys: list[tuple[str, str]] = field(default_factory=list)
    """(instance, idempotency key) of every ``reserve`` call."""
    ship_open: asyncio.Event = field(default_factory=asyncio.Event)

    def app(self) -> ActivityRegistry:
        app = ActivityRegistry()

        async def reserve(request: Any) -> Any:
            first = request.instance_id not in {i for i, _ in self.keys}
            self.keys.append((request.instance_id, request.idempotency_key))
            if first and request.input.get("doubt"):
                return UnknownOutcome()  # the effect may or may not have happened
            self.calls.append(("reserve", request.instance_id))
            return {"reserved": True}

        async def release(request: Any) -> dict:
            self.calls.append(("release", request.instance_id))
            return {"released": True}

        async def ship(request: Any) -> dict:
            await self.ship_open.wait()
            self.calls.append(("ship", request.instance_id))
            return {"shipped": True}

        app.register("bulk.reserve", reserve)
        app.register("bulk.release", release)
        app.register("bulk.ship", ship)
        return app


@pytest.fixture
async def running(db_store: Store) -> AsyncIterator[tuple[Client, Effects]]:
    """A client and a worker running beside it on the test's schema."""
    client, effects = Client(db_store), Effects()
    await client.publish(ORDER)
    config = WorkerConfig(worker_id="bulk-worker", poll_interval=timedelta(milliseconds=50))
    stop = asyncio.Event()
    task = asyncio.create_task(Worker(db_store, effects.app(), config).run(stop))
    try:
        yield client, effects
    finally:
        effects.ship_open.set()
        stop.set()
        await task


async def waiting_for_go(client: Client, ids: list[str], doubt: bool = False) -> None:
    """Start ``ids`` and wait until the worker has reserved each (they wait for go), or
    with ``doubt`` until each reservation's outcome is unknown."""
    for instance_id in ids:
        await client.start(ORDER.name, instance_id, {"order": instance_id, "doubt": doubt})
    wanted = "unknown" if doubt else "succeeded"

    async def reserved() -> bool:
        states = [await client.inspect(i) for i in ids]
        return all(s.activities["reserve"].status.label == wanted for s in states)

    await until(reserved, what=f"every reservation {wanted}")


def cancel_bulk(bulk_id: str, ids: list[str], reason: str = "incident 42") -> BulkCommand:
    return BulkCommand(bulk_id, "", "cancel", "", {}, "alice", reason, tuple(ids))


def bulk_commands_of(state: Instance, bulk_id: str) -> list[str]:
    return [a.command_id for a in state.audit if a.command_id.startswith(f"{bulk_id}.")]


async def test_an_instance_that_moved_after_the_preview_is_judged_again(
    running: tuple[Client, Effects],
) -> None:
    client, effects = running
    ids = ["o-1", "o-2", "o-3"]
    await waiting_for_go(client, ids)
    bulk = BulkCommands(client)
    previews = await bulk.preview(ids, bulk_request(Action.CANCEL))
    assert [(p.verdict.value, p.compensations) for p in previews] == [("applies", ("reserve",))] * 3

    effects.ship_open.set()  # o-2 moves on and completes before the operator confirms
    await client.signal("o-2", "go", "go-o-2")
    await until(lambda: _status(client, "o-2", S.COMPLETED), what="o-2 completed")

    outcome = await bulk.act(cancel_bulk("b1", ids))
    results = {r.instance_id: r for r in outcome.results}
    assert {i: r.outcome for i, r in results.items()} == {
        "o-1": "done",
        "o-2": "refused",
        "o-3": "done",
    }
    assert results["o-2"].detail and results["o-2"].command_id == ""
    assert bulk_commands_of(await client.inspect("o-2"), "b1") == [], "never acted on blindly"
    for done in ("o-1", "o-3"):
        assert results[done].command_id == command_id("b1", done)
        await until(lambda i=done: _status(client, i, S.CANCELLED), what=f"{done} cancelled")
        assert bulk_commands_of(await client.inspect(done), "b1") == [command_id("b1", done)]
    assert sorted(i for what, i in effects.calls if what == "release") == ["o-1", "o-3"]


async def test_the_same_bulk_taken_twice_at_once_acts_once(
    running: tuple[Client, Effects],
) -> None:
    client, effects = running
    ids = [f"t-{n}" for n in range(6)]
    await waiting_for_go(client, ids)
    effects.ship_open.set()
    bulk = BulkCommands(client)
    # The worker keeps moving instances while the same bulk is posted twice.
    for instance_id in ids[::2]:
        await client.signal(instance_id, "go", f"go-{instance_id}")
    first, second = await asyncio.gather(
        bulk.act(cancel_bulk("b2", ids)), bulk.act(cancel_bulk("b2", ids))
    )
    assert first.results == second.results and len(first.results) == len(ids)
    again = await bulk.act(cancel_bulk("b2", ids))
    assert again.replayed and again.results == first.results

    for result in first.results:
        state = await client.inspect(result.instance_id)
        recorded = bulk_commands_of(state, "b2")
        assert recorded == ([result.command_id] if result.outcome == "done" else [])
        if result.outcome == "done":
            assert state.status in (S.CANCELLING, S.CANCELLED)
        else:
            assert result.outcome == "refused" and state.status is S.COMPLETED

    async def settled() -> bool:
        return all([(await client.inspect(i)).status.terminal for i in ids])

    await until(settled, what="every instance ended")
    released = [i for what, i in effects.calls if what == "release"]
    cancelled = [r.instance_id for r in first.results if r.outcome == "done"]
    assert sorted(released) == sorted(cancelled), "each cancelled instance compensated once"

    with pytest.raises(BulkConflict):
        await bulk.act(replace(cancel_bulk("b2", ids), reason="another reason"))


async def test_a_bulk_retry_runs_the_activity_in_doubt_again_with_the_previewed_key(
    running: tuple[Client, Effects],
) -> None:
    client, effects = running
    await waiting_for_go(client, ["d-1", "d-2"], doubt=True)
    await waiting_for_go(client, ["d-3"])
    bulk = BulkCommands(client)
    previews = await bulk.preview(["d-1", "d-2", "d-3"], bulk_request(Action.RETRY_ACTIVITY))
    verdicts = {p.instance_id: (p.verdict.value, p.reason) for p in previews}
    assert verdicts["d-3"] == ("refused", "no activity is in doubt")
    promised = {p.instance_id: p.reruns for p in previews if p.applies}
    assert {i: [(r.step, r.attempt, r.same_key) for r in runs] for i, runs in promised.items()} == {
        "d-1": [("reserve", 2, True)],
        "d-2": [("reserve", 2, True)],
    }

    retry = BulkCommand(
        "b5", "", "retry_activity", "", {}, "alice", "provider back", ("d-1", "d-2", "d-3")
    )
    outcome = await bulk.act(retry)
    assert [r.outcome for r in outcome.results] == ["done", "done", "refused"]
    await until(
        lambda: {"d-1", "d-2"} <= {i for what, i in effects.calls if what == "reserve"},
        what="both reservations ran again",
    )
    for instance_id, runs in promised.items():
        keys = [key for i, key in effects.keys if i == instance_id]
        assert keys == [runs[0].key, runs[0].key], "run again once, with the previewed key"


async def test_a_selection_is_bounded_and_a_bulk_is_kept_with_its_results(
    running: tuple[Client, Effects],
) -> None:
    client, _ = running
    bulk = BulkCommands(client)
    with pytest.raises(ValueError, match="at most 100 per request"):
        await bulk.preview([f"x-{n}" for n in range(101)], bulk_request(Action.PAUSE))
    await waiting_for_go(client, ["k-1"])
    pause = BulkCommand("b3", "red", "pause", "", {}, "alice", "hold", ("k-1",))
    await bulk.act(pause)
    queries = Queries(client.store)
    kept, results = await queries.bulk_command("b3")
    assert (kept.action, kept.actor, kept.reason, kept.instance_ids) == (
        "pause",
        "alice",
        "hold",
        ("k-1",),
    )
    assert [(r.instance_id, r.outcome, r.status_before, r.status_after) for r in results] == [
        ("k-1", "done", S.RUNNING, S.PAUSED)
    ]
    assert [b.bulk_id for b in await queries.recent_bulk_commands("red")] == ["b3"]
    assert await queries.recent_bulk_commands("blue") == []
    assert await queries.bulk_command("b4") is None


async def _status(client: Client, instance_id: str, status: InstanceStatus) -> bool:
    return (await client.inspect(instance_id)).status is status


async def test_a_bulk_id_taken_says_as_what_by_whom_and_why(db_store: Store) -> None:
    """Confirmed again by someone else (the same action and selection), a bulk was refused
    as 'already confirmed for another action or selection': neither was another, and the
    caller could not tell whose confirmation stood. Another team learns nothing of it."""
    await record_bulk(db_store, cancel_bulk("b9", ["o-1", "o-2"]))
    with pytest.raises(BulkConflict) as clash:
        await record_bulk(db_store, replace(cancel_bulk("b9", ["o-1", "o-2"]), actor="token:ab12"))
    assert str(clash.value) == (
        "bulk command b9 was already confirmed as cancel of 2 instances by alice: incident 42; "
        "a new bulk action needs a new bulk id (a preview draws one)"
    )
    with pytest.raises(BulkConflict) as other_team:
        await record_bulk(db_store, replace(cancel_bulk("b9", ["o-1"]), tenant_id="blue"))
    assert str(other_team.value) == (
        "bulk id b9 is taken: a new bulk action needs a new bulk id (a preview draws one)"
    )
