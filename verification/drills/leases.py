"""Lease drills: stale owners, starved heartbeats, racing claimers, reused ids, clocks.

- D4 ``sigstop``: the harness SIGSTOPs worker A while it runs an attempt, past its
  lease; worker B takes the lease over; SIGCONT; A's next write must be rejected (the
  drill insists that A really tried: a stale attempt must appear in the observations).
- D5 ``blocked_loop``: an async activity blocks A's event loop for twice the lease, so
  no renewal can run; the lease is taken over and A is fenced when its loop wakes.
- D15 ``races``: two workers with short leases, one of them repeatedly frozen past its
  lease, while harness claimers grab expired and due work and recovery sweeps run in
  parallel: completed work must never come back, claims never steal a live lease.
- D16 ``same_identity``: A is SIGKILLed mid-attempt and restarted at once under the
  same worker id; its old leases must still be recovered (I10), never trusted by name.
- D19 ``clock_forward`` / ``clock_back``: A's wall clock jumps an hour after start-up.
  Leases and due times are the store's clock (PostgreSQL), so the run must look the
  same: every instance ends in the quiet period, with event times near commit times.
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

from engine.store import leases, sweeps
from engine.store.errors import StoreError
from engine.store.rows import WorkState
from engine.worker.faults import Fault
from verification import observations
from verification.drills.base import DrillEnv
from verification.drills.boundaries import SEVERS, react, take_over, wait_fired
from verification.processes import DrillProcess
from verification.proxy import DrillProxy
from verification.workloads import Planned, Workload

RUNNING_LEASE = f"""
SELECT w.work_id FROM work w
JOIN history h ON h.instance_id = w.instance_id AND h.kind = 12
             AND h.step_name = convert_from(w.payload, 'UTF8')::jsonb->>'step'
             AND h.attempt = (convert_from(w.payload, 'UTF8')::jsonb->>'attempt')::int
JOIN drill_handler_entries e ON e.instance_id = h.instance_id AND e.step = h.step_name
                            AND e.attempt = h.attempt AND NOT e.compensation
WHERE w.state = {WorkState.LEASED} AND w.lease_owner = %(owner)s
  AND convert_from(w.payload, 'UTF8')::jsonb->>'step' = %(step)s
LIMIT 1
"""
"""A lease of ``owner`` on ``step`` whose attempt start is durable and whose handler was
entered (``effects.mark_entry``): a fault that lands then finds the owner inside the
handler. Between the start and the handler's entry it would find an owner that, once
resumed, sees its lease gone and never calls the handler, and a drill of a handler run
twice (the self-test's redelivery mutant, under D4-sigstop) would see it run once."""
FUTURE_EVENTS = """
SELECT h.instance_id, h.sequence, h.occurred_at - t.committed_at
FROM history h JOIN transitions t ON t.instance_id = h.instance_id
     AND h.sequence > t.expected_sequence AND h.sequence <= t.committed_sequence
WHERE abs(extract(epoch FROM h.occurred_at - t.committed_at)) > %(tolerance)s
ORDER BY h.instance_id, h.sequence LIMIT 3
"""


async def _signalled(env: DrillEnv, workload: Workload) -> list[Planned]:
    planned = await env.start_workload(workload)
    for item in planned:
        await env.signal(item)
    return planned


async def wait_running(env: DrillEnv, owner: str, step: str = "work") -> None:
    """Until ``owner`` is inside the handler of ``step`` (``RUNNING_LEASE``)."""

    async def running() -> bool:
        return await env.scalar(RUNNING_LEASE, {"owner": owner, "step": step}) is not None

    await env.until(running, 20.0, f"{owner} to run {step}")


async def wait_stale_attempt(env: DrillEnv, process: DrillProcess) -> None:
    """Until ``process`` tried a lease-holder write without holding the lease."""

    async def tried() -> bool:
        return any(
            o.get("kind") == "fenced" and o.get("pid") == process.pid and not o.get("held")
            for o in observations.read(env.process_env.observations)
        )

    try:
        await env.until(tried, 10.0, "the stale owner to try a write")
    except AssertionError as exc:
        env.expect(False, f"{process.worker_id} never wrote after SIGCONT: {exc}")


async def sigstop(env: DrillEnv) -> None:
    await _signalled(env, Workload(env.spec.id, count=2, slow=1.5))
    a = env.worker("a")
    await wait_running(env, a.worker_id)
    a.pause()
    env.mark_fault("sigstop")
    await take_over(env, a)
    await wait_stale_attempt(env, a)
    await env.quiesce()
    await env.stop_processes()


async def blocked_loop(env: DrillEnv) -> None:
    await _signalled(env, Workload(env.spec.id, count=1, script={"block": {"finish": 3.5}}))
    env.worker("a")
    env.worker("b")
    env.mark_fault("blocked-loop")
    await env.quiesce()
    await env.stop_processes()
    stale = [o for o in observations.read(env.process_env.observations) if o.get("held") is False]
    env.expect(bool(stale), "no worker's lease was taken over: the blocked loop was not stale")


async def races(env: DrillEnv) -> None:
    await _signalled(env, Workload(env.spec.id, count=4, slow=0.9))
    a = env.worker("a", lease_seconds=1.0)
    env.worker("b", lease_seconds=1.0)
    stop = asyncio.Event()
    tasks = [asyncio.create_task(_claimer(env, n, stop)) for n in range(3)]
    tasks += [asyncio.create_task(_sweeper(env, stop)) for _ in range(2)]
    env.mark_fault("races")
    try:
        await _flap(env, a, times=3)
        await env.quiesce()
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
    await env.stop_processes()
    env.expect(env.record.stats["rescue_claims"] > 0, "the racing claimers never claimed")


async def _flap(env: DrillEnv, process: DrillProcess, times: int) -> None:
    """Freeze ``process`` past its lease a few times (the fault's own duration)."""
    for _ in range(times):
        process.pause()
        env.record.env_faults["process_pauses"] += 1
        await asyncio.sleep(1.3)
        process.resume()
        await asyncio.sleep(0.4)


async def _claimer(env: DrillEnv, n: int, stop: asyncio.Event) -> None:
    """Claim whatever is claimable and hand it straight back, racing the workers."""
    while not stop.is_set():
        try:
            for lease in await leases.claim(env.store, f"rescuer-{n}", timedelta(seconds=0.3), 1):
                env.record.stats["rescue_claims"] += 1
                await leases.retry_at(env.store, lease, env.store.now(), "rescued")
        except StoreError:
            env.record.stats["rescue_conflicts"] += 1
        await asyncio.sleep(0.02)


async def _sweeper(env: DrillEnv, stop: asyncio.Event) -> None:
    while not stop.is_set():
        try:
            await sweeps.expire_leases_of_dead_owners(env.store)
            await sweeps.sweep_expired_deadlines(env.store)
            env.record.stats["recovery_sweeps"] += 1
        except StoreError:
            pass
        await asyncio.sleep(0.02)


async def same_identity(env: DrillEnv) -> None:
    await _signalled(env, Workload(env.spec.id, count=3, slow=1.2))
    worker_id = env.worker_id("same")
    a = env.worker("a", worker_id=worker_id)
    await wait_running(env, worker_id)
    a.kill()
    killed = time.monotonic()
    await a.wait_exit(5.0)
    env.worker("a2", worker_id=worker_id)
    env.record.extra["restart_gap_ms"] = round((time.monotonic() - killed) * 1000)
    env.mark_fault("same-identity")
    env.record.env_faults["process_crashes"] += 1
    await env.quiesce()
    await env.stop_processes()


async def clock_forward(env: DrillEnv) -> None:
    await _clock_jump(env, 3600)


async def clock_back(env: DrillEnv) -> None:
    await _clock_jump(env, -3600)


async def _clock_jump(env: DrillEnv, seconds: int) -> None:
    await _signalled(env, Workload(env.spec.id, count=2))
    env.worker("a", clock_jump=f"{seconds}@0.3")
    env.mark_fault("clock-jump")
    env.record.env_faults["clock_jumps"] += 1
    try:
        await env.quiesce()
    finally:
        await _event_times(env)
    await env.stop_processes()


async def _event_times(env: DrillEnv) -> None:
    """Event times must follow the store's clock, not a jumped worker clock."""
    async with env.store.connection() as conn:
        rows = await (await conn.execute(FUTURE_EVENTS, {"tolerance": 60})).fetchall()
    for instance, sequence, offset in rows:
        env.expect(
            False,
            f"{instance} event {sequence} is dated {offset} from its commit: event times "
            "follow the worker's wall clock (DatabaseClock measures its offset only at open)",
        )


async def one_fault_recovered(
    env: DrillEnv, fault: Fault, proxy: DrillProxy | None, wait_stale: bool
) -> None:
    """Worker a runs until ``fault`` fires in it; once it has acted (a kill, a stop past
    the lease, a COMMIT cut by ``proxy``), worker b takes over until everything is done,
    and a cut must really have cut a COMMIT. With ``wait_stale`` a stopped worker a is
    first seen attempting a stale write (and refused) before b starts."""
    worker = env.worker("a", plan=[fault], proxy=proxy)
    await wait_fired(env, fault, worker)
    env.mark_fault(fault.action.value)
    await react(env, worker, fault.action)
    if wait_stale:
        await wait_stale_attempt(env, worker)
    env.worker("b")
    await env.quiesce()
    await env.stop_processes()
    if fault.action in SEVERS:
        env.expect(bool(proxy and proxy.ambiguous), f"{fault.action.value}: no COMMIT was cut")
