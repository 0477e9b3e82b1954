"""F1: the primary lost, its standby promoted, and nothing acknowledged lost (or: why not).

Each F1 drill builds its own servers (``verification.standby.StandbyPair``: a primary
and a standby made by ``pg_basebackup``) and runs everything, the harness's store, the
workers and the checker, through one multi-host connection string
(``host=p,s target_session_attrs=read-write``), exactly as a team would.

- ``F1-sync``: the standby is synchronous (``synchronous_standby_names``). While two
  workers run, the standby stops receiving WAL, so every COMMIT the primary is sent
  waits for it: a persistence boundary held open. With commits so in flight, the
  primary's postmaster is SIGKILLed and the standby promoted. Workers must resume on
  the promoted server by themselves, every COMMIT whose answer was lost must be settled
  there like any other unknown commit (none of them reached the standby, so none may be
  taken for committed, even when the promoted server gives its transaction id to
  another, and the same attempt was started again there under the same transition id),
  and every invariant must hold on the promoted server. The record gives the
  time to resume (kill to the first new commit on the promoted server), the COMMITs in
  flight at the kill and how many of them the engine settled.
- ``F1-async``: the standby is asynchronous. Its WAL shipping is paused, a client starts
  instances (each acknowledged by the primary), and the primary is killed: after the
  promotion those starts are gone. That loss is PostgreSQL's documented behaviour with
  an asynchronous standby, not the engine's fault, so the drill reports it as a finding
  (``acknowledged_lost``) and checks every invariant for the rest of the workload.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

from engine.store.embedded import EmbeddedPostgresError, find_pg_bin
from verification import observations
from verification.drills.base import DrillEnv, DrillNotRun
from verification.standby import StandbyPair
from verification.target import Target
from verification.threads import to_the_end
from verification.workloads import Workload

RESUME_SECONDS = 30.0
"""How long work may take to resume on the promoted server (kill to first new commit)."""
IN_FLIGHT = 2
"""COMMITs F1-sync has waiting for the standby (sent, not answered) when it kills the
primary: each answer is surely lost, each must be settled on the promoted server."""
WAITING_FOR_STANDBY = (
    "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep' "
    "AND application_name LIKE 'F1-%'"
)
STARTED = "SELECT count(*) FROM history WHERE kind = 12"
"""Attempts started (``attempt_started`` events): the workload is under way."""
LOST_INSTANCES = 3
"""Instances started while the asynchronous standby receives nothing (F1-async)."""
COMMITTED_SINCE = "SELECT count(*) FROM transitions WHERE committed_at > %s"
"""Transitions whose transaction began after a moment (after the kill: on the promoted
server, as the old primary was gone)."""
ASYNC_FINDING = (
    "with an asynchronous standby (synchronous_standby_names empty) the primary "
    "acknowledges a commit before the standby has it: {lost} of {started} starts "
    "acknowledged to the client were missing after the standby was promoted. With a "
    "synchronous standby a commit is acknowledged only once the standby has flushed it."
)


@asynccontextmanager
async def standby_pair(root: Path, synchronous: bool) -> AsyncIterator[Target]:
    """A drill's own primary and standby, as a target named by a multi-host DSN; not
    run where PostgreSQL's server binaries are missing (a borrowed server)."""
    try:
        find_pg_bin()
    except EmbeddedPostgresError as exc:
        raise DrillNotRun(str(exc)) from None
    pair = await to_the_end(StandbyPair.start, root, synchronous, undo=StandbyPair.stop)
    try:
        yield Target(pair.multi_host_dsn, standby=pair)
    finally:
        await asyncio.to_thread(pair.stop)


synchronous_pair = partial(standby_pair, synchronous=True)
asynchronous_pair = partial(standby_pair, synchronous=False)


def _pair(env: DrillEnv) -> StandbyPair:
    assert env.target.standby is not None, "an F1 drill runs on the pair it builds"
    return env.target.standby


async def synchronous(env: DrillEnv) -> None:
    pair = _pair(env)
    for item in await env.start_workload(Workload(env.spec.id, count=6)):
        await env.signal(item)
    env.worker("a")
    env.worker("b")

    async def progressed() -> bool:
        return await env.scalar(STARTED) >= 2

    await env.until(progressed, RESUME_SECONDS, "attempts to start")
    await asyncio.to_thread(pair.pause_shipping)

    async def waiting() -> bool:
        return await env.scalar(WAITING_FOR_STANDBY) >= IN_FLIGHT

    await env.until(waiting, RESUME_SECONDS, f"{IN_FLIGHT} commits to wait for the standby")
    env.record.extra["commits_in_flight"] = await env.scalar(WAITING_FOR_STANDBY)
    killed = await _fail_over(env, pair)
    await _resumed(env, killed)
    await env.quiesce()
    await env.stop_processes()
    _count_ambiguous(env)


async def _fail_over(env: DrillEnv, pair: StandbyPair) -> datetime:
    """SIGKILL the primary, promote the standby; when the primary was killed."""
    await asyncio.to_thread(pair.kill_primary)
    killed = datetime.now(UTC)
    env.mark_fault("failover")
    env.record.env_faults["primary_killed"] += 1
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
    """The commits whose answer was lost that the engine settled, for the scorecard
    (lease writes, claims and heartbeats have no ledger row to settle by: they stay
    unknown and are retried)."""
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
    env.record.extra["finding"] = ASYNC_FINDING.format(lost=len(lost), started=len(started))
    env.expect(lost == started, f"an asynchronous standby kept {len(started) - len(lost)} "
               "starts it was never sent: WAL shipping was not paused")  # fmt: skip
