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

from engine.model.instance import AttemptStatus, InstanceStatus
from engine.model.registry import Registry
from engine.replay.fold import replay
from engine.replay.snapshots import SNAPSHOT_INTERVAL_EVENTS
from engine.store.rows import WorkState
from engine.worker.loop import Worker, WorkerConfig
from tests.e2e import definitions as d
from tests.e2e.app import Behaviour, app, script
from tests.e2e.conftest import Harness
from tests.integration.long_histories import commit_history, long_history

INSTANCE = "long-crash"
STEPS_BEFORE = 260
"""Steps run before the one that crashes: 3 events each, so the history passes more
than one snapshot interval, and its newest snapshot is behind its end."""
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


async def test_a_worker_resuming_a_long_instance_reads_one_snapshot_and_the_tail(
    e2e: Harness,
) -> None:
    await e2e.publish(LONG)
    risky = script({"risky": Behaviour(block=e2e.gate("risky"))})
    start = e2e.store.now() - timedelta(seconds=5)
    transitions = long_history(LONG, INSTANCE, start, risky, run_last=False)
    await commit_history(e2e.store, transitions)
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
