"""F1: the primary lost, its standby promoted, and nothing acknowledged lost (or: why not).

Each F1 drill builds its own servers (``verification.standby.StandbyPair``: a primary
and a standby made by ``pg_basebackup``) and runs everything, the harness's store, the
workers and the checker, through one multi-host connection string
(``host=p,s target_session_attrs=read-write``), exactly as a team would.

- ``F1-sync``: the standby is synchronous (``synchronous_standby_names``). A worker stops
  itself with an outcome's transaction staged and its COMMIT not yet sent (a
  persistence boundary), another worker takes a lease; the primary's postmaster is
  SIGKILLed, the stopped worker resumed (its COMMIT meets a dead server), the standby
  promoted. Workers must resume on the promoted server by themselves, every COMMIT whose
  answer was lost must be settled there like any other unknown commit, and every
  invariant must hold on the promoted server. The record gives the time to resume
  (kill to the first new commit on the promoted server) and the ambiguous commits.
- ``F1-async``: the standby is asynchronous. Its WAL shipping is paused, a client starts
  instances (each acknowledged by the primary), and the primary is killed: after the
  promotion those starts are gone. That loss is PostgreSQL's documented behaviour with
  an asynchronous standby, not the engine's fault, so the drill reports it as a finding
  (``acknowledged_lost``) and checks every invariant for the rest of the workload.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

from engine.store.rows import WorkState
from engine.worker.faults import Action, Boundary, Fault
from verification import observations
from verification.drills.base import DrillEnv
from verification.drills.boundaries import wait_fired
from verification.standby import StandbyPair
from verification.target import Target
from verification.workloads import Workload

RESUME_SECONDS = 30.0
"""How long work may take to resume on the promoted server (kill to first new commit)."""
LOST_INSTANCES = 3
"""Instances started while the asynchronous standby receives nothing (F1-async)."""
LEASED_BY = f"SELECT count(*) FROM work WHERE state = {WorkState.LEASED} AND lease_owner = %s"
COMMITTED_SINCE = "SELECT count(*) FROM transitions WHERE committed_at > %s"
"""Transitions whose transaction began after a moment (after the kill: on the promoted
server, as the old primary was gone)."""
SYNC_FINDING = (
    "with an asynchronous standby (synchronous_standby_names empty) the primary "
    "acknowledges a commit before the standby has it: {lost} of {started} starts "
    "acknowledged to the client were missing after the standby was promoted. With a "
    "synchronous standby a commit is acknowledged only once the standby has flushed it."
)


@asynccontextmanager
async def standby_pair(root: Path, synchronous: bool) -> AsyncIterator[Target]:
    """A drill's own primary and standby, as a target named by a multi-host DSN."""
    pair = await asyncio.to_thread(StandbyPair.start, root, synchronous)
    try:
        yield Target(pair.multi_host_dsn, standby=pair)
    finally:
        await asyncio.to_thread(pair.stop)


@asynccontextmanager
async def synchronous_pair(root: Path) -> AsyncIterator[Target]:
    async with standby_pair(root, synchronous=True) as target:
        yield target


@asynccontextmanager
async def asynchronous_pair(root: Path) -> AsyncIterator[Target]:
    async with standby_pair(root, synchronous=False) as target:
        yield target


def _pair(env: DrillEnv) -> StandbyPair:
    assert env.target.standby is not None, "an F1 drill runs on the pair it builds"
    return env.target.standby


async def synchronous(env: DrillEnv) -> None:
    pair = _pair(env)
    for item in await env.start_workload(Workload(env.spec.id, count=6)):
        await env.signal(item)
    fault = Fault(Boundary.BEFORE_COMMIT, 3, Action.PAUSE)
    stopped = env.worker("a", plan=[fault])
    await wait_fired(env, fault, stopped)
    await stopped.wait_paused(10.0)
    busy = env.worker("b")

    async def leasing() -> bool:
        return await env.scalar(LEASED_BY, (busy.worker_id,)) > 0

    await env.until(leasing, RESUME_SECONDS, f"{busy.worker_id} to hold a lease")
    killed = await _fail_over(env, pair, resume=stopped.resume)
    await _resumed(env, killed)
    await env.quiesce()
    await env.stop_processes()
    _count_ambiguous(env)


async def _fail_over(
    env: DrillEnv, pair: StandbyPair, resume: Callable[[], None] | None = None
) -> datetime:
    """SIGKILL the primary (resume a stopped worker into the dead server), promote;
    when the primary was killed."""
    await asyncio.to_thread(pair.kill_primary)
    killed = datetime.now(UTC)
    env.mark_fault("failover")
    env.record.env_faults["primary_killed"] += 1
    if resume is not None:
        resume()
    started = time.monotonic()
    env.record.extra["xid_horizon"] = await asyncio.to_thread(pair.promote)
    env.record.extra["promote_seconds"] = round(time.monotonic() - started, 3)
    return killed


async def _resumed(env: DrillEnv, killed: datetime) -> None:
    """Until a commit lands on the promoted server: the time to resume, from the kill."""

    async def committed() -> bool:
        return await env.scalar(COMMITTED_SINCE, (killed,)) > 0

    assert env.fault_at is not None
    await env.until(committed, RESUME_SECONDS, "a new commit on the promoted server")
    env.record.extra["time_to_resume_seconds"] = round(time.monotonic() - env.fault_at, 3)


def _count_ambiguous(env: DrillEnv) -> None:
    """The commits whose answer was lost (settled by the engine), for the scorecard."""
    settled = [
        o for o in observations.read(env.process_env.observations) if o.get("kind") == "settled"
    ]
    env.record.extra["ambiguous_commits"] = len(settled)


async def asynchronous(env: DrillEnv) -> None:
    pair = _pair(env)
    kept = await env.start_workload(Workload(env.spec.id, count=3))
    await asyncio.to_thread(pair.wait_caught_up)
    await asyncio.to_thread(pair.pause_shipping)
    lost = await env.start_workload(Workload(f"{env.spec.id}-lost", count=LOST_INSTANCES))
    killed = await _fail_over(env, pair)
    await _report_lost(env, [item.instance_id for item in lost])
    for item in kept:
        await env.signal(item)
    env.worker("a")
    await _resumed(env, killed)
    await env.quiesce()
    await env.stop_processes()
    _count_ambiguous(env)


async def _report_lost(env: DrillEnv, started: list[str]) -> None:
    """Which acknowledged starts the promoted server lacks: the finding. They are taken
    out of the acknowledged set, as the engine never had them to lose or keep."""
    present: set[str] = set()

    async def read() -> bool:  # the first reads may meet connections to the dead primary
        async with env.store.reading() as conn:
            query = "SELECT instance_id FROM instances WHERE instance_id = ANY(%s)"
            present.update(i for (i,) in await (await conn.execute(query, (started,))).fetchall())
        return True

    await env.until(read, RESUME_SECONDS, "the promoted server to answer")
    lost = [instance for instance in started if instance not in present]
    env.record.acked = [a for a in env.record.acked if a not in lost]
    env.record.extra["acknowledged_lost"] = len(lost)
    env.record.extra["finding"] = SYNC_FINDING.format(lost=len(lost), started=len(started))
    env.expect(lost == started, f"an asynchronous standby kept {len(started) - len(lost)} "
               "starts it was never sent: WAL shipping was not paused")  # fmt: skip
