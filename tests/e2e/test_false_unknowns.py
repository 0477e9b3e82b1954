"""Unknown must mean "may have happened": no attempt is recorded unknown unless its
handler may have run.

In process, to reach the moments that matter: a renewal answered while the outcome's
commit completes the lease, a lone fenced write whose answer is lost, a full pool of
handler threads, an outcome's write refused. Each test ends when the instance has
completed or an attempt was recorded unknown, and asserts the first.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pytest

from engine.events import EventKind
from engine.instance import AttemptStatus, Instance, InstanceStatus
from engine.store import work
from engine.store.errors import StaleLease
from engine.store.group_commit import CommitGroup
from engine.worker import Worker, WorkerConfig
from tests.e2e import definitions as d
from tests.e2e.app import app, script

if TYPE_CHECKING:
    from tests.e2e.conftest import Harness

K = EventKind
S = InstanceStatus
A = AttemptStatus
SHORT_LEASE = timedelta(seconds=2)
"""Short enough that a lost eager lease expires (and its attempt turns unknown) well
within the harness's deadline, so a regression fails fast rather than by timeout."""


def in_process_worker(e2e: Harness, **config: Any) -> Worker:
    options = {"lease": SHORT_LEASE, "poll_interval": timedelta(milliseconds=100), **config}
    return Worker(e2e.store, app, WorkerConfig(worker_id="honest", **options))


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
    renew, commit_all = work.renew, CommitGroup.commit_all

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

    monkeypatch.setattr(work, "renew", renew_noting_stale)
    monkeypatch.setattr(CommitGroup, "commit_all", commit_answered_after_a_stale_renewal)
    worker = in_process_worker(e2e, renew_every=timedelta(milliseconds=50))
    await e2e.start(d.THREE_STEPS, "renewed", script({}))
    state = await run_until_settled(e2e, worker, "renewed")

    assert stale.is_set(), "a renewal found the completed lease gone"
    assert_no_false_unknown(state, await e2e.history("renewed"))
