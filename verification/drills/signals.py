"""Client-side drills: unknown COMMITs of starts (D3) and duplicate signals (D6).

The harness is the client here, the way an application or a message broker is: it
starts instances and delivers signals through the engine's ``Client``, sometimes
through the proxy so the COMMIT's answer goes missing, and redelivers whatever was not
acknowledged. The engine's answer is compared with the server's truth the proxy saw:
a COMMIT that committed must be reported as success (settled), one that did not must
be reported as not committed (safe to retry), and redelivery must never duplicate.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from engine.api.client import Client
from engine.model.errors import WaylineError
from engine.store.errors import CommitOutcome, StoreError
from verification.drills.base import DrillEnv
from verification.proxy import Cut, DrillProxy, Truth
from verification.workloads import FLOW, SIGNAL_STEP, Planned, Workload

CUTS = (Cut.SEVER_AFTER_COMMIT, Cut.SEVER_BEFORE_COMMIT)


async def _cut_call(
    env: DrillEnv, proxy: DrillProxy, cut: Cut, call: Callable[[], Awaitable[object]]
) -> str:
    """Run ``call`` with ``cut`` armed; compare the engine's answer with the truth."""
    before = len(proxy.ambiguous)
    proxy.arm(cut)
    env.record.env_faults[cut.value] += 1
    try:
        await call()
        answer = "success"
    except StoreError as exc:
        answer = exc.outcome.value
    await proxy.settled(10.0)
    cuts = proxy.ambiguous[before:]
    env.expect(bool(cuts), f"{cut.value}: no COMMIT was cut")
    truth = cuts[0].truth if cuts else Truth.UNKNOWN
    wanted = {Truth.COMMITTED: "success", Truth.ABORTED: CommitOutcome.NOT_COMMITTED.value}
    env.expect(
        wanted.get(truth) == answer,
        f"{cut.value}: the server {truth.value} the COMMIT but the engine answered {answer}",
    )
    return answer


async def client_commit(env: DrillEnv) -> None:
    """D3 for a client: starts whose COMMIT answer is lost, both ways, then redelivered."""
    proxy, client = await env.proxied_client()
    planned = Workload(env.spec.id, count=2).instances()
    for cut, item in zip(CUTS, planned, strict=True):
        await _cut_call(env, proxy, cut, lambda i=item: client.start(FLOW, i.instance_id, i.input))
        env.mark_fault(cut.value)
        await env.client.start(FLOW, item.instance_id, item.input)  # redelivery is idempotent
        env.record.acked.append(item.instance_id)
        await env.signal(item)
    env.worker("a")
    await env.quiesce()
    await env.stop_processes()


async def concurrent(env: DrillEnv) -> None:
    """The same signal six times at once, from six clients."""
    (item,) = await env.start_workload(Workload(env.spec.id, count=1))
    clients = [Client(env.store) for _ in range(6)]
    answers = await asyncio.gather(*(_deliver(c, item) for c in clients), return_exceptions=True)
    env.record.stats["signals_sent"] += len(clients)
    failed = [a for a in answers if isinstance(a, BaseException)]
    env.expect(not failed, f"duplicate deliveries were refused: {failed[:2]}")
    env.mark_fault("duplicate-signals")
    env.worker("a")
    await env.quiesce()
    await env.stop_processes()


async def _deliver(client: Client, item: Planned) -> None:
    await client.signal(item.instance_id, SIGNAL_STEP, item.signal_id, item.signal_payload)


async def after_cut(env: DrillEnv) -> None:
    """A signal whose COMMIT answer was lost (both ways), delivered again."""
    planned = await env.start_workload(Workload(env.spec.id, count=2))
    proxy, client = await env.proxied_client()
    for cut, item in zip(CUTS, planned, strict=True):
        await _cut_call(env, proxy, cut, lambda i=item: _deliver(client, i))
        env.mark_fault(cut.value)
        await env.signal(item)  # the broker redelivers: one event, success
    env.worker("a")
    await env.quiesce()
    await env.stop_processes()


async def after_end(env: DrillEnv) -> None:
    """The signal again after the end (a no-op success); a new one is refused."""
    (item,) = await env.start_workload(Workload(env.spec.id, count=1))
    await env.signal(item)
    env.worker("a")
    await env.quiesce()
    await env.stop_processes()
    events = await env.scalar("SELECT count(*) FROM history")
    await env.signal(item)
    try:
        await env.client.signal(item.instance_id, SIGNAL_STEP, f"{item.signal_id}-late", None)
        env.expect(False, "a new signal to an ended instance was accepted")
    except WaylineError:
        env.record.stats["signals_refused"] += 1
    after = await env.scalar("SELECT count(*) FROM history")
    env.expect(after == events, f"signals after the end appended {after - events} events")
