"""Work claimed before its instance wants it, run by a real processor on PostgreSQL.

An operator may retry a dead letter at once although its instance does not want the
work yet (an activity waiting out its policy backoff, a timer not yet due), and
resuming a paused instance makes all its open work available at once. The processor
must then neither start the attempt early (replay refuses it) nor fire the timer with
a time in the future: the work waits until it is due, or, when its deadline comes
first, is dead-lettered again with a code that says so.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from engine.api.client import Client
from engine.decide import lifecycle
from engine.decide.audit import Action
from engine.model.definitions import Definition
from engine.model.instance import AttemptStatus, InstanceStatus
from engine.model.registry import Registry
from engine.model.validation import parse_definition
from engine.modes import decide
from engine.store import reads, sweeps
from engine.store.clock import ManualClock
from engine.store.dead_letters import DeadLetter, list_dead_letters, make_resolution, resolve
from engine.store.rows import WorkState
from engine.store.store import Store
from engine.worker.activities import ActivityFailure, ActivityRegistry, ActivityRequest
from engine.worker.instance_cache import RegistrySource
from engine.worker.leased_commits import Context
from tests.integration.factories import adjust_work, run_due, work_row

T0 = datetime(2031, 6, 7, 8, 0, tzinfo=UTC)
LEASE = timedelta(seconds=30)
BACKOFF = timedelta(minutes=10)
TIMER = timedelta(hours=1)
DAY = timedelta(days=1)


def definition(name: str, first: dict) -> Definition:
    notify = {
        "name": "notify",
        "kind": "activity",
        "target": "test.notify",
        "timeout": "10s",
        "input_limit": 1000,
        "result_limit": 1000,
        "retry": {"max_attempts": 3, "initial_delay": "10m", "max_delay": "10m"},
    }
    steps = [first, notify] if first else [notify]
    return parse_definition({"name": name, "version": "1", "mode": "orchestration", "steps": steps})


BACKING_OFF = definition("backing-off", {})
WAITING = definition("waiting", {"name": "wait", "kind": "timer", "timeout": "1h"})
REGISTRY = Registry([BACKING_OFF, WAITING])


def context(store: Store, calls: list[int], fail_first: bool = False) -> Context:
    """A processor context whose ``test.notify`` records each call's attempt and, with
    ``fail_first``, fails its first attempt (retryable, so the policy backs off)."""

    def notify(request: ActivityRequest) -> dict:
        calls.append(request.attempt)
        if fail_first and request.attempt == 1:
            raise ActivityFailure("busy", retryable=True)
        return {"sent": True}

    activities = ActivityRegistry()
    activities.register("test.notify", notify)
    return Context(store, activities, RegistrySource(store, REGISTRY))


async def start(store: Store, spec: Definition, instance_id: str) -> None:
    draft = lifecycle.start_draft(REGISTRY, spec, instance_id, store.now(), {})
    decide(draft)
    await store.commit(draft.build("start"))


async def dead_letter_early(store: Store, clock: ManualClock, instance_id: str) -> DeadLetter:
    """Make the instance's open work miss its deadline now, before it is due (as the
    browser tests' ``overdue`` does), and sweep it into a dead letter."""
    async with store.connection() as conn:
        cur = await conn.execute(
            "SELECT work_id FROM work WHERE instance_id = %s AND state = 1", (instance_id,)
        )
        ids = [row[0] for row in await cur.fetchall()]
    assert len(ids) == 1
    now = clock.now()
    await adjust_work(store, ids, available_at=now, deadline=now + timedelta(seconds=1))
    clock.advance(timedelta(seconds=2))
    assert await sweeps.sweep_expired_deadlines(store) == 1
    (dead,) = (await list_dead_letters(store)).items
    return dead


async def dead_in_backoff(
    store: Store, clock: ManualClock, instance_id: str, calls: list[int]
) -> tuple[Context, DeadLetter]:
    """A ``BACKING_OFF`` instance whose attempt 1 failed and whose attempt 2, due at
    T0 + BACKOFF, was dead-lettered before then; the processor context that ran it."""
    ctx = context(store, calls, fail_first=True)
    await start(store, BACKING_OFF, instance_id)
    assert await run_due(ctx) == 1  # attempt 1 fails; attempt 2 is due at T0 + BACKOFF
    return ctx, await dead_letter_early(store, clock, instance_id)


async def retry_now(store: Store, dead: DeadLetter, deadline: timedelta = DAY) -> None:
    """The operator's retry of ``dead``: due at once, with a new deadline."""
    now, fence = store.now(), (dead.instance_id, dead.work_id, dead.token)
    retry = ("retry", "olive", "back", now, now, now + deadline)
    command = make_resolution("cmd-retry", *fence, *retry)
    await resolve(store, command)


async def event_times(store: Store, instance_id: str) -> list[datetime]:
    return [e.occurred_at async for e in reads.export_history(store, instance_id)]


async def test_an_activity_retried_before_its_backoff_ends_runs_when_it_is_due(
    store: Store, clock: ManualClock
) -> None:
    calls: list[int] = []
    ctx, dead = await dead_in_backoff(store, clock, "i-backoff", calls)
    await retry_now(store, dead)

    assert await run_due(ctx) == 1  # claimed early: no uncaught ReplayRejected
    row = await work_row(store, dead.work_id)
    assert (row["state"], row["available_at"]) == (WorkState.AVAILABLE, T0 + BACKOFF)
    assert calls == [1]

    clock.set(T0 + BACKOFF)
    assert await run_due(ctx) == 1
    state = await reads.inspect(store, REGISTRY, "i-backoff")
    assert state.status is InstanceStatus.COMPLETED and calls == [1, 2]
    assert state.activities["notify"].started_at == T0 + BACKOFF
    assert max(await event_times(store, "i-backoff")) == T0 + BACKOFF


async def test_an_activity_whose_new_deadline_comes_before_its_backoff_is_dead_again(
    store: Store, clock: ManualClock
) -> None:
    calls: list[int] = []
    ctx, dead = await dead_in_backoff(store, clock, "i-short", calls)
    await retry_now(store, dead, deadline=timedelta(minutes=1))

    assert await run_due(ctx) == 1
    (again,) = (await list_dead_letters(store)).items
    assert (again.work_id, again.token, again.failure_code) == (
        dead.work_id,
        dead.token + 1,
        "due-after-deadline",
    )
    state = await reads.inspect(store, REGISTRY, "i-short")
    assert state.activities["notify"].status is AttemptStatus.RETRY_WAITING and calls == [1]


async def test_a_timer_retried_before_it_is_due_fires_when_due_with_a_true_time(
    store: Store, clock: ManualClock
) -> None:
    calls: list[int] = []
    ctx = context(store, calls)
    await start(store, WAITING, "i-timer")
    dead = await dead_letter_early(store, clock, "i-timer")
    await retry_now(store, dead)

    assert await run_due(ctx) == 1
    state = await reads.inspect(store, REGISTRY, "i-timer")
    assert state.timers["wait"].fired_at is None
    assert max(await event_times(store, "i-timer")) <= clock.now()
    assert (await work_row(store, dead.work_id))["available_at"] == T0 + TIMER

    clock.set(T0 + TIMER + timedelta(seconds=5))
    assert await run_due(ctx) == 2  # the timer, then the activity after it
    state = await reads.inspect(store, REGISTRY, "i-timer")
    assert state.status is InstanceStatus.COMPLETED and calls == [1]
    assert state.timers["wait"].fired_at == clock.now()
    assert max(await event_times(store, "i-timer")) == clock.now()


@pytest.mark.parametrize(
    ("spec", "due"), [(BACKING_OFF, T0 + BACKOFF), (WAITING, T0 + TIMER)], ids=["backoff", "timer"]
)
async def test_work_rearmed_by_a_resume_before_it_is_due_waits_for_it(
    store: Store, clock: ManualClock, spec: Definition, due: datetime
) -> None:
    calls: list[int] = []
    ctx = context(store, calls, fail_first=spec is BACKING_OFF)
    client = Client(store, ctx.registries)
    await start(store, spec, "i-paused")
    await run_due(ctx)
    clock.advance(timedelta(seconds=1))
    await client.command("i-paused", Action.PAUSE, "olive", "look first")
    clock.advance(timedelta(seconds=1))
    await client.command("i-paused", Action.RESUME, "olive", "looked")

    assert await run_due(ctx) == 1  # resuming re-armed it at once: claimed before it is due
    assert max(await event_times(store, "i-paused")) <= clock.now()
    assert await open_work(store, "i-paused") == [due]

    clock.set(due)
    await run_due(ctx)
    state = await reads.inspect(store, REGISTRY, "i-paused")
    assert state.status is InstanceStatus.COMPLETED
    assert max(await event_times(store, "i-paused")) == due


async def open_work(store: Store, instance_id: str) -> list[datetime]:
    """When each of the instance's open work rows is available."""
    async with store.connection() as conn:
        cur = await conn.execute(
            "SELECT available_at FROM work WHERE instance_id = %s AND state = 1", (instance_id,)
        )
        return [row[0] for row in await cur.fetchall()]
