"""A worker resuming a long instance after a crash reads one snapshot and the events after
it (issue 23), never the whole history.

The long instance is built by the engine's own pure core, as workers would have built it,
and committed through the store, which writes the snapshots of the transitions that
cross an interval. Its last step then runs in a real ``wayline worker`` process that is
killed with SIGKILL while its handler is blocked; a fresh worker in this process (so its
replay cache can be looked at) takes the dead one's work over, records the unknown
outcome, and its cache says what it read.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from engine.decide import decisions, lifecycle
from engine.model.definitions import Definition
from engine.model.events import EventKind
from engine.model.instance import AttemptStatus, InstanceStatus
from engine.model.registry import Registry
from engine.model.transitions import Draft, Transition
from engine.modes import decide
from engine.replay.fold import replay
from engine.replay.snapshots import SNAPSHOT_INTERVAL_EVENTS
from engine.store.rows import WorkState
from engine.worker.loop import Worker, WorkerConfig
from tests.e2e import definitions as d
from tests.e2e.app import Behaviour, app, script
from tests.e2e.conftest import Harness

INSTANCE = "long-crash"
STEPS_BEFORE = 260
"""Steps run before the one that crashes: 3 events each, so the history passes one
snapshot interval and ends well after it."""
CRASH_LEASE_SECONDS = 600.0
"""Longer than the test: the fresh worker finds the dead one's work through its closed
session, not by waiting for the lease to run out."""
LONG = d.definition(
    "e2e.long",
    *(d.activity(f"s{k}") for k in range(STEPS_BEFORE)),
    d.activity("risky", on_unknown="hold"),
)
POLL = timedelta(milliseconds=100)
RETIRE_OTHER_WORK = f"""
UPDATE work SET state = {WorkState.COMPLETED}, completed_at = now()
WHERE instance_id = %(instance)s AND work_id <> ALL(%(keep)s)
"""
"""The work rows of the steps the pure core ran (no worker held them) are done."""


def long_history(definition: Definition, harness: Harness, gate: str) -> list[Transition]:
    """The transitions of an instance whose steps before ``risky`` all succeeded, each
    attempt started and finished in transitions of its own, ending with ``risky``
    scheduled: what workers would have committed, a millisecond apart, just now."""
    registry = Registry([definition])
    now = harness.store.now() - timedelta(seconds=5)
    risky = script({"risky": Behaviour(block=gate)})
    draft = lifecycle.start_draft(registry, definition, INSTANCE, now, risky)
    decide(draft)
    transitions = [draft.build("start")]
    for step in definition.steps[:-1]:
        now += timedelta(milliseconds=1)
        draft = Draft(registry, draft.state, now)
        key = decisions.attempt_key(INSTANCE, step.name, 1)
        decisions.start_activity_attempt(draft, step.name, 1, key)
        transitions.append(draft.build())
        now += timedelta(milliseconds=1)
        draft = Draft(registry, draft.state, now)
        decisions.record_outcome(draft, step.name, 1, EventKind.ATTEMPT_SUCCEEDED)
        decide(draft)
        transitions.append(draft.build())
    return transitions


async def test_a_worker_resuming_a_long_instance_reads_one_snapshot_and_the_tail(
    e2e: Harness,
) -> None:
    await e2e.publish(LONG)
    transitions = long_history(LONG, e2e, e2e.gate("risky"))
    for k in range(0, len(transitions), 100):
        await e2e.store.commit_all(transitions[k : k + 100])
    keep = [w.work_id for w in transitions[-1].work]
    async with e2e.store.connection() as conn:
        await conn.execute(RETIRE_OTHER_WORK, {"instance": INSTANCE, "keep": keep})
        await conn.commit()
    ((snapshot_at,),) = await e2e.query("SELECT sequence FROM snapshots")
    assert SNAPSHOT_INTERVAL_EVENTS <= snapshot_at < transitions[-1].committed_sequence

    (first,) = await e2e.spawn(lease=CRASH_LEASE_SECONDS)
    await e2e.until(lambda: e2e.calls(INSTANCE), what="the handler of risky running")
    await first.kill()
    e2e.release("risky")
    ((crashed_at,),) = await e2e.query("SELECT sequence FROM instances")

    config = WorkerConfig(worker_id="resumer", concurrency=1, poll_interval=POLL)
    worker = Worker(e2e.store, app, config)
    stop = asyncio.Event()
    running = asyncio.create_task(worker.run(stop))
    try:
        state = await e2e.activity_reaches(INSTANCE, "risky", AttemptStatus.UNKNOWN)
    finally:
        stop.set()
        await running

    cache = worker.ctx.cache
    assert cache.snapshots_read == 1
    assert cache.events_read == crashed_at - snapshot_at < SNAPSHOT_INTERVAL_EVENTS
    assert state.status is InstanceStatus.RUNNING, "an unknown outcome waits for an operator"
    assert state.digest == replay(Registry([LONG]), await e2e.history(INSTANCE)).digest
