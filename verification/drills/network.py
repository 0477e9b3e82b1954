"""D13: the network between a worker and PostgreSQL degrades, then goes dark.

Worker A reaches the server only through the proxy; worker B connects directly. First
every message of A is delayed (a slow network: leases must still be renewed in time),
then A's connections are blackholed (packets vanish, sockets stay open, exactly what a
partition looks like from either end) for longer than A's leases. B takes the work
over; when the partition heals, whatever A still had in flight reaches the server and
must be fenced off (the invariants check that no stale write was accepted).
"""

from __future__ import annotations

import asyncio

from verification.drills.base import DrillEnv
from verification.drills.leases import wait_running
from verification.workloads import Workload

DELAY_SECONDS = 0.02
PARTITION_SECONDS = 4.0
"""Longer than a drill lease (1.5 s), so the partitioned owner's leases expire."""


async def partition(env: DrillEnv) -> None:
    for item in await env.start_workload(Workload(env.spec.id, count=3, slow=1.2)):
        await env.signal(item)
    proxy = await env.proxy()
    proxy.delay_seconds = DELAY_SECONDS
    a = env.worker("a", proxy=proxy)
    await wait_running(env, a.worker_id)
    proxy.delay_seconds = 0.0
    proxy.blackhole(True)
    env.mark_fault("partition")
    env.worker("b")
    try:
        await asyncio.sleep(PARTITION_SECONDS)  # the fault's duration, not a wait for state
    finally:
        proxy.blackhole(False)
    env.record.env_faults["partitions"] += 1
    env.record.extra["partition_seconds"] = PARTITION_SECONDS
    await env.quiesce()
    await env.stop_processes()
