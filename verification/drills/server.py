"""Server drills: restart (D10), backends terminated (D11), the whole server paused (D14).

D10 and D14 act on the server itself, so they run only on a cluster the harness owns
and alone (the runner sees to both). D11 only terminates the sessions of one drill's
worker (found by its application name), so it runs anywhere.

D14 asks whether every engine wait has a client-side deadline. A paused server never
looks dead on loopback (the kernel keeps answering TCP), and ``statement_timeout`` runs
on the server, which is stopped: only the client can give up. While the server is
paused, the drill probes the engine's operations (a commit, a claim, an inspection,
opening a store), each on a warmed-up pool of a store of its own. To keep the pause
short, that store is opened with the engine's configurable deadlines (``Deadlines``)
set to a few seconds: the drill tests that every wait *has* a deadline, not its
length. A probe still blocked when the pause ends has none.
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

from engine.api.client import Client
from engine.store import catalog, leases, reads
from engine.store.rows import WorkState
from engine.store.store import Deadlines, Store
from verification.drills.base import OPEN_WORK_COUNT, DrillEnv
from verification.target import terminate_backends
from verification.workloads import FLOW, SIGNAL_STEP, Workload

STARTED = "SELECT count(*) FROM history WHERE kind = 12"
PROBE_DEADLINE = 3
"""Seconds every configurable store deadline is set to for the probes."""
PROBE_DEADLINES = Deadlines(PROBE_DEADLINE, PROBE_DEADLINE, PROBE_DEADLINE)
PAUSE_SECONDS = 4 * PROBE_DEADLINE + 2.0
"""Long enough for a probe to meet a few deadlines in a row (wait for a connection,
run, roll back) and still finish before the server resumes."""


async def _running(env: DrillEnv, count: int, slow: float = 0.8) -> None:
    """A signalled workload, two workers, and some attempts already started."""
    for item in await env.start_workload(Workload(env.spec.id, count=count, slow=slow)):
        await env.signal(item)
    env.worker("a")
    env.worker("b")

    async def progressed() -> bool:
        return await env.scalar(STARTED) >= 2

    await env.until(progressed, 20.0, "attempts to start")


async def restart(env: DrillEnv) -> None:
    await _running(env, count=4)
    down = await env.target.restart_immediate()
    env.mark_fault("pg-restart")
    env.record.env_faults["pg_restart_immediate"] += 1
    env.record.extra["server_down_seconds"] = round(down, 3)
    await env.quiesce()
    await env.stop_processes()


async def terminate(env: DrillEnv) -> None:
    for item in await env.start_workload(Workload(env.spec.id, count=3, slow=1.0)):
        await env.signal(item)
    a = env.worker("a")
    for _ in range(3):
        if not await _holds_lease(env, a.worker_id):
            break
        killed = await terminate_backends(env.target.dsn, a.worker_id)
        env.record.env_faults["backend_terminations"] += killed
        env.mark_fault("backend-terminated")
    env.expect(env.record.env_faults["backend_terminations"] > 0, "no backend was terminated")
    await env.quiesce()
    await env.stop_processes()


async def _holds_lease(env: DrillEnv, owner: str) -> bool:
    """Until ``owner`` holds a lease (False when the workload ended first)."""

    async def leasing_or_done() -> bool:
        held = await env.scalar(
            f"SELECT count(*) FROM work WHERE state = {WorkState.LEASED} AND lease_owner = %s",
            (owner,),
        )
        left = await env.scalar(OPEN_WORK_COUNT)
        return held > 0 or left == 0

    await env.until(leasing_or_done, 20.0, f"{owner} to hold a lease")
    return await env.scalar(OPEN_WORK_COUNT) > 0


async def pause(env: DrillEnv) -> None:
    await _running(env, count=2)
    store = await Store.open(env.target.dsn, env.schema, deadlines=PROBE_DEADLINES)
    try:
        await _probe_paused(env, store)
    finally:
        await store.close()
    await env.quiesce()
    await env.stop_processes()


async def _probe_paused(env: DrillEnv, store: Store) -> None:
    registry = await catalog.load_registry(store)
    await asyncio.gather(*(_warm(store) for _ in range(4)))
    client = Client(store)
    await client.registries.get()
    probe_id = f"{env.spec.id}-probe"
    probes = {
        "commit (Client.start)": lambda: client.start(FLOW, probe_id, {}),
        "claim (leases.claim)": lambda: leases.claim(store, "probe", timedelta(seconds=1), 1),
        "read (reads.inspect)": lambda: reads.inspect(store, registry, env.record.acked[0]),
        "connect (Store.open)": lambda: _open_and_close(env),
    }
    pids = env.target.pause()
    env.mark_fault("server-pause")
    started = time.monotonic()
    tasks = {name: asyncio.create_task(probe()) for name, probe in probes.items()}
    try:
        await asyncio.wait(tasks.values(), timeout=PAUSE_SECONDS)
    finally:
        env.target.resume(pids)
    held = time.monotonic() - started
    env.record.env_faults["server_pauses"] += 1
    env.record.extra["pause_seconds"] = round(held, 1)
    for name, task in tasks.items():
        env.expect(
            task.done(),
            f"engine wait without a client-side deadline: {name} was still blocked after "
            f"{held:.1f} s on a paused server",
        )
    await asyncio.wait(tasks.values(), timeout=30.0)
    failures = {n: t.exception() for n, t in tasks.items() if t.done()}
    env.record.extra["probe_errors"] = {n: type(e).__name__ for n, e in failures.items() if e}
    started = tasks["commit (Client.start)"]
    if started.done() and not failures["commit (Client.start)"]:
        env.record.acked.append(probe_id)
        await env.client.signal(probe_id, SIGNAL_STEP, f"{probe_id}-go", None)


async def _warm(store: Store) -> None:
    """Hold one of the pool's connections a moment, so that several are open."""
    async with store.reading() as conn:
        await conn.execute("SELECT pg_sleep(0.05)")


async def _open_and_close(env: DrillEnv) -> None:
    store = await Store.open(env.target.dsn, env.schema, deadlines=PROBE_DEADLINES)
    await store.close()
