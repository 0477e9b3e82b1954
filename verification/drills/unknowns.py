"""U1-U4: the four ways a live worker once recorded "unknown" for a handler never run.

Unknown must mean "may have happened": an operator has to act on it. These drills are
strict about invariant U (every attempt recorded unknown had its handler started, by
the ledger's handler-entry marks), and no worker is crashed, stopped or cut off from
its database, so no false unknown is excused:

- U1: the answer to every transition's COMMIT is held back through the proxy until a
  lease renewal after it has been answered. One slot, so that renewal is of the lease
  the commit worked under: after an outcome's commit, which completed that lease and
  handed on the next step's (eager dispatch), it is answered "stale" before the
  outcome's answer, every time. The worker must not take that for a lost lease.
- U2: the answer of every outcome's write (one statement in autocommit) is cut after
  the server got it; the session check settles most as committed, and the worker must
  still run the next step whose lease such a write handed on.
- U3: three times as many slow sync handlers at once as asyncio's default thread pool
  has threads, with a timeout between one and two handler times: no attempt may wait
  for a thread on its timeout.
- U4: every outcome's write is cut before the server gets it: known not to have
  committed, it must be written again while the outcome is in hand. Its handler did
  run, so U alone cannot see a dropped outcome: the drill expects no unknown at all.
"""

from __future__ import annotations

import os

from engine.worker.faults import Action, Boundary, Fault
from verification.drills.base import DrillEnv
from verification.drills.boundaries import wait_fired
from verification.proxy import Truth
from verification.sql_checks import UNKNOWN_KINDS, UNKNOWNS
from verification.workloads import BURST, BURST_TIMEOUT_MS, Workload

RACE_INSTANCES = 3
"""U1's instances: the race happens at every outcome, so a few are plenty."""
RACE_LEASE_SECONDS = 3.0
"""U1's worker's lease (renewed every second): a held answer (a renewal period and the
proxy's gap at most) still leaves the lease handed on two renewals' time to spare."""
RACE_QUIET_SECONDS = 90.0
"""How long U1 waits for its instances to end. Every commit's answer waits for the next
renewal, about a second, and the three instances make 26 commits: the drill takes 26 s
on an idle machine, too close to the profile's 30 s on a loaded one (it once timed out
there with every lease still held and its step on its way)."""
CUT_INSTANCES = 3
HANDLER_HITS_PER_INSTANCE = 3
"""Handlers of one ``drill.flow`` instance that succeed at once: reserve, work, finish
(the first instance's scripted failure of reserve adds one more hit, left uncut)."""
CUT_LEASE_SECONDS = 6.0
"""The lease of U2's and U4's worker: long enough that on a loaded machine a late renewal
does not lose the lease while a cut write is written again (the next owner would then
rightly record unknown), short enough that a dropped outcome (the self-test's mutant)
still ends in the lease's expiry and an unknown within the drill's wait."""
BURST_WAVES = 3
"""Attempts per default-pool thread in U3: the third wave would wait out its whole
timeout for a thread in a pool of that size."""
BURST_HANDLER_SECONDS = 1.0
"""Two thirds of the burst step's timeout: one handler fits, two in turn do not."""


def default_pool_threads() -> int:
    """Threads in asyncio's default executor (Python's ThreadPoolExecutor default)."""
    return min(32, (os.cpu_count() or 1) + 4)


async def renewal_race(env: DrillEnv) -> None:
    planned = await env.start_workload(Workload(env.spec.id, count=RACE_INSTANCES))
    proxy = await env.proxy()
    proxy.hold_for_renewal = True
    env.worker("a", proxy=proxy, concurrency=1, lease_seconds=RACE_LEASE_SECONDS)
    env.mark_fault("answer_after_renewal")
    for item in planned:
        await env.signal(item)
    await env.quiesce(RACE_QUIET_SECONDS)
    await env.stop_processes()
    missed = proxy.held - proxy.renewed
    env.expect(proxy.held > 0, "no transition's answer was held for a renewal")
    env.expect(missed == 0, f"{missed} of {proxy.held} held answers saw no renewal: no race")


async def lone_write_cut(env: DrillEnv) -> None:
    await _outcome_cuts(env, Action.SEVER_AFTER_COMMIT)


async def cut_before_outcome(env: DrillEnv) -> None:
    await _outcome_cuts(env, Action.SEVER_BEFORE_COMMIT)


async def _outcome_cuts(env: DrillEnv, action: Action) -> None:
    """Cut the write that follows each of the first handlers (their outcomes')."""
    planned = await env.start_workload(Workload(env.spec.id, count=CUT_INSTANCES))
    proxy = await env.proxy()
    proxy.target_kind = "transition"
    hits = range(1, CUT_INSTANCES * HANDLER_HITS_PER_INSTANCE + 1)
    plan = [Fault(Boundary.AFTER_HANDLER, hit, action) for hit in hits]
    worker = env.worker("a", plan=plan, proxy=proxy, lease_seconds=CUT_LEASE_SECONDS)
    for item in planned:
        await env.signal(item)
    await wait_fired(env, plan[-1], worker)
    env.mark_fault(action.value)
    await env.quiesce()
    await env.stop_processes()
    truths = {c.truth for c in proxy.ambiguous}
    wanted = Truth.COMMITTED if action is Action.SEVER_AFTER_COMMIT else Truth.ABORTED
    env.expect(wanted in truths, f"no cut write ended {wanted.value}: {len(proxy.ambiguous)} cut")
    if action is Action.SEVER_BEFORE_COMMIT:
        # Every cut write was settled as not committed while its outcome was in hand
        # (its handler did run, so invariant U holds either way): none may be unknown.
        unknown = await env.scalar(UNKNOWNS, UNKNOWN_KINDS)
        env.expect(unknown == 0, f"{unknown} outcomes known to the worker recorded unknown")


async def thread_pool(env: DrillEnv) -> None:
    count = BURST_WAVES * default_pool_threads()
    script = {"slow": {"work": BURST_HANDLER_SECONDS}}
    for n in range(count):
        instance = f"{env.spec.id}-{n}"
        await env.client.start(BURST, instance, script)
        env.record.acked.append(instance)
    env.record.stats["started"] += count
    env.worker("a", concurrency=count)
    env.mark_fault("thread_pool")
    await env.quiesce()
    await env.stop_processes()
    env.record.extra["burst"] = {"attempts": count, "timeout_ms": BURST_TIMEOUT_MS}
