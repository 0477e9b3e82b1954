"""Unknown must mean "may have happened": no attempt is recorded unknown unless its
handler may have run.

In process, to reach the moments that matter: a renewal answered while the outcome's
commit completes the lease, a lone fenced write whose answer is lost, a full pool of
handler threads, an outcome's write refused. Each test ends when the instance has
completed or an attempt was recorded unknown, and asserts the first.
"""

from __future__ import annotations

import asyncio
import os
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pytest

from engine.model.events import EventKind
from engine.model.instance import AttemptStatus, Instance, InstanceStatus
from engine.store import leases, sessions
from engine.store.errors import StaleLease
from engine.store.group_commit import CommitGroup
from engine.store.store import Store
from engine.worker.activities import ActivityRegistry, ActivityRequest
from engine.worker.loop import Worker, WorkerConfig
from tests.e2e import definitions as d
from tests.e2e.app import ACTIVITY_TARGET, app, script
from verification.proxy import Cut, DrillProxy

if TYPE_CHECKING:
    from tests.e2e.conftest import Harness

K = EventKind
S = InstanceStatus
A = AttemptStatus
SHORT_LEASE = timedelta(seconds=2)
"""Short enough that a lost eager lease expires (and its attempt turns unknown) well
within the harness's deadline, so a regression fails fast rather than by timeout."""


ANSWER_WAIT_SECONDS = 10.0
"""How long the server may take to answer a COMMIT whose answer the proxy swallowed."""
QUIET = timedelta(minutes=1)
"""Heartbeat and sweep interval of a worker behind a proxy armed to cut the next write:
their statements must not take the cut meant for the outcome's write."""


def in_process_worker(e2e: Harness, store: Store | None = None, **config: Any) -> Worker:
    options = {"lease": SHORT_LEASE, "poll_interval": timedelta(milliseconds=100), **config}
    return Worker(store or e2e.store, app, WorkerConfig(worker_id="honest", **options))


async def completed_or_unknown(e2e: Harness, instance: str) -> Instance:
    """The instance once it completed or one of its attempts was recorded unknown."""

    async def ended() -> Instance | None:
        state = await e2e.state(instance)
        unknown = any(p.status is A.UNKNOWN for p in state.activities.values())
        return state if unknown or state.status is S.COMPLETED else None

    return await e2e.until(ended, what=f"{instance} to complete or turn unknown")


async def run_until_settled(e2e: Harness, worker: Worker, instance: str) -> Instance:
    stop = asyncio.Event()
    running = asyncio.create_task(worker.run(stop))
    try:
        return await completed_or_unknown(e2e, instance)
    finally:
        stop.set()
        await running


def assert_no_false_unknown(state: Instance, history: list) -> None:
    unknown = [e.step for e in history if e.kind is K.ATTEMPT_UNKNOWN]
    assert not unknown, f"attempts recorded unknown though their handlers never ran: {unknown}"
    assert state.status is S.COMPLETED


async def test_a_renewal_answered_stale_by_the_outcomes_own_commit_keeps_the_next_step(
    e2e: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The outcome's commit completes the lease and hands on the next step's lease
    (eager dispatch); a renewal of the completed lease answered before the processor
    switched leases says "stale". That is the processor's own commit, not a loss: the
    next step must run, not sit leased to a live worker until it expires as unknown."""
    stale = asyncio.Event()
    renew, commit_all = leases.renew, CommitGroup.commit_all

    async def renew_noting_stale(store, lease, extend):
        try:
            return await renew(store, lease, extend)
        except StaleLease:
            stale.set()
            raise

    async def commit_answered_after_a_stale_renewal(self, transitions, fence=None):
        results = await commit_all(self, transitions, fence)
        if fence is not None and fence.lease_next and not stale.is_set():
            await stale.wait()  # the answer comes late: a renewal sees the lease gone first
        return results

    monkeypatch.setattr(leases, "renew", renew_noting_stale)
    monkeypatch.setattr(CommitGroup, "commit_all", commit_answered_after_a_stale_renewal)
    worker = in_process_worker(e2e, renew_every=timedelta(milliseconds=50))
    await e2e.start(d.THREE_STEPS, "renewed", script({}))
    state = await run_until_settled(e2e, worker, "renewed")

    assert stale.is_set(), "a renewal found the completed lease gone"
    assert_no_false_unknown(state, await e2e.history("renewed"))


async def test_a_lone_fenced_write_settled_as_committed_hands_on_the_next_lease(
    e2e: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The outcome of step one is one statement in autocommit that also leases step two
    to this worker. Its answer is cut after the server got it; the session check settles
    it as committed. Step two must still run here, not wait out its lease as unknown.

    The session is ended only once the server has answered the cut statement (as a
    slower settlement would find it): ended earlier, the statement may be aborted, and
    that is the other case (a write known not to have committed)."""
    end = sessions.end

    async def end_after_the_answer(conn, session):
        assert await proxy.settled(ANSWER_WAIT_SECONDS)
        return await end(conn, session)

    monkeypatch.setattr(sessions, "end", end_after_the_answer)
    async with DrillProxy(e2e.dsn) as proxy:
        state, _ = await first_outcome_cut(e2e, monkeypatch, proxy, Cut.SEVER_AFTER_COMMIT, "cut")

    assert proxy.intercepted == ["E"], "the lone fenced write's answer was cut"
    assert_no_false_unknown(state, await e2e.history("cut"))


async def test_an_outcome_known_not_to_have_committed_is_written_again(
    e2e: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The outcome's write is cut before it reaches the server: settled, it did not take
    effect and is safe to retry. The worker still has the outcome in hand and the lease:
    it must write it again, not drop it and let the attempt expire into unknown."""
    async with DrillProxy(e2e.dsn) as proxy:
        cut = Cut.SEVER_BEFORE_COMMIT
        state, worker = await first_outcome_cut(e2e, monkeypatch, proxy, cut, "refused")

    assert proxy.intercepted == ["E"], "the outcome's write was cut before the server"
    assert_no_false_unknown(state, await e2e.history("refused"))
    assert worker.metrics.value("write_retries") == 1
    assert [r["step"] for r in e2e.records()] == ["one", "two", "three"], "each ran once"


async def first_outcome_cut(
    e2e: Harness, monkeypatch: pytest.MonkeyPatch, proxy: DrillProxy, cut: Cut, instance: str
) -> tuple[Instance, Worker]:
    """Run THREE_STEPS as ``instance`` on a worker behind ``proxy``, with ``cut`` armed
    for the first outcome's write (the one that also leases the next step to it)."""
    commit_all = CommitGroup.commit_all
    cuts = []

    async def cut_the_first_outcome(self, transitions, fence=None):
        if fence is not None and fence.lease_next and not cuts:
            cuts.append(fence.lease_next)
            proxy.arm(cut)
        return await commit_all(self, transitions, fence)

    monkeypatch.setattr(CommitGroup, "commit_all", cut_the_first_outcome)
    store = await Store.open(proxy.conninfo(), e2e.schema)
    try:
        worker = in_process_worker(
            e2e, store, renew_every=timedelta(seconds=1), heartbeat_every=QUIET
        )
        await e2e.start(d.THREE_STEPS, instance, script({}))
        return await run_until_settled(e2e, worker, instance), worker
    finally:
        await store.close()


DEFAULT_POOL_THREADS = min(32, (os.cpu_count() or 1) + 4)
"""Threads in asyncio's default pool, which sync handlers used to queue for."""
SYNC_HANDLER_SECONDS = 1.0
SYNC_TIMEOUT = "1600ms"
"""Longer than one handler, shorter than two: an attempt that waited for another's
thread before its own ran out."""
SYNC_POOL = d.definition("e2e.sync-pool", d.activity("only", timeout=SYNC_TIMEOUT))


async def test_sync_handlers_never_wait_for_a_thread_on_their_timeout(e2e: Harness) -> None:
    """Twice as many sync handlers at once as the default pool has threads, each well
    within its timeout: every one runs and succeeds; none times out waiting for a
    thread (recorded unknown though it never started)."""
    began: list[str] = []
    registry = ActivityRegistry()

    @registry.activity(ACTIVITY_TARGET)
    def sync_handler(request: ActivityRequest) -> str:
        began.append(request.instance_id)
        time.sleep(SYNC_HANDLER_SECONDS)
        return "done"

    count = 2 * DEFAULT_POOL_THREADS
    instances = [f"sync-{n}" for n in range(count)]
    for instance in instances:
        await e2e.start(SYNC_POOL, instance, {})
    config = WorkerConfig(worker_id="threads", concurrency=count, lease=timedelta(seconds=30))
    worker = Worker(e2e.store, registry, config)
    stop = asyncio.Event()
    running = asyncio.create_task(worker.run(stop))
    try:
        states = [await completed_or_unknown(e2e, instance) for instance in instances]
    finally:
        stop.set()
        await running

    unknown = [s.instance_id for s in states if s.status is not S.COMPLETED]
    assert not unknown, f"{len(unknown)} of {count} attempts timed out; {len(began)} ran"
    assert sorted(began) == sorted(instances), "each handler ran once"
