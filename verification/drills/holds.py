"""Hold drills: an incident hold loses nothing, across a worker crash and a lease expiry.

While worker a runs the workload's slow step, the harness holds ``drill.flow`` and then
takes a out: SIGKILLed (``crash``: its leases are recovered by b's sweep at once) or
SIGSTOPped past its lease (``expiry``: its leases run out while it is alive, and it
must be fenced when it wakes). Worker b then finds a's leases due; under the hold it
must park them, and it must claim none of the held work until the release. The
harness releases gradually, one instance and then at a rate, and every instance must
end with each effect exactly once (the harness's invariants) and no work leased while
the hold held it (the harness's own log of work changes, ``lease_audit``).
"""

from __future__ import annotations

from engine import HoldScope, Queries
from engine.store.rows import WorkState
from verification.drills.base import DrillEnv
from verification.drills.leases import wait_running, wait_stale_attempt
from verification.workloads import FLOW, Workload

ACTOR = "drills"
RELEASE_RATE = 2.0
"""Instances per second the second, gradual release lets go."""

PARKED = f"""
SELECT count(*) FILTER (WHERE state = {WorkState.LEASED}) = 0
   AND count(*) FILTER (WHERE state = {WorkState.HELD} AND lease_token > 0) > 0
FROM work
"""
"""Nothing is leased and some work that had been leased before (a's) is parked."""
CLAIMED_DURING = """
SELECT work_id, new_owner, new_token FROM drill_work_changes
WHERE new_state = %(leased)s AND new_token > old_token
  AND at > %(held)s AND at < %(released)s
ORDER BY change_id LIMIT 3
"""
"""Work leased between the hold and its first release (a claim, or a row inserted
already leased by eager dispatch, which the log records as a claim of a new row);
there must be none."""
FIRST_RELEASE = "SELECT min(released_at) FROM hold_releases WHERE hold_id = %(hold)s"
NOW = "SELECT clock_timestamp()"


async def crash(env: DrillEnv) -> None:
    await _held_across(env, "crash", lease_seconds=1.5)


async def expiry(env: DrillEnv) -> None:
    await _held_across(env, "expiry", lease_seconds=1.0)


async def _held_across(env: DrillEnv, fault: str, lease_seconds: float) -> None:
    planned = await env.start_workload(Workload(env.spec.id, count=3, slow=1.5))
    for item in planned:
        await env.signal(item)
    a = env.worker("a", lease_seconds=lease_seconds)
    await wait_running(env, a.worker_id)
    hold = await env.client.place_hold(HoldScope("", FLOW), ACTOR, f"{env.spec.id}: incident")
    held_at = await env.scalar(NOW)
    env.mark_fault(fault)
    if fault == "crash":
        a.kill()
        await a.wait_exit(5.0)
        env.record.env_faults["process_crashes"] += 1
    else:
        a.pause()
        env.record.env_faults["process_pauses"] += 1
    env.worker("b", lease_seconds=lease_seconds)
    await env.until(lambda: _parked(env), 20.0, "a's work parked under the hold")
    parked = await Queries(env.store).hold("", hold.hold_id)
    env.record.extra["backlog"] = parked.backlog if parked else 0
    await env.client.release_hold("", hold.hold_id, ACTOR, "one first", count=1)
    await env.client.release_hold("", hold.hold_id, ACTOR, "the rest", rate=RELEASE_RATE)
    if fault == "expiry":
        a.resume()
        await wait_stale_attempt(env, a)
    await env.quiesce()
    await env.stop_processes()
    await nothing_claimed_while_held(env, hold.hold_id, held_at)


async def _parked(env: DrillEnv) -> bool:
    return bool(await env.scalar(PARKED))


async def nothing_claimed_while_held(env: DrillEnv, hold_id: str, held_at: object) -> None:
    """No work was leased from ``held_at`` (the hold's placement) to its first release."""
    released_at = await env.scalar(FIRST_RELEASE, {"hold": hold_id})
    params = {"leased": int(WorkState.LEASED), "held": held_at, "released": released_at}
    async with env.store.connection() as conn:
        rows = await (await conn.execute(CLAIMED_DURING, params)).fetchall()
    for work_id, owner, token in rows:
        env.expect(False, f"work {work_id} was leased to {owner} (token {token}) while held")
