"""D1-D4 at every boundary: one planned fault at hit n of a named boundary.

The fault matrix crosses every boundary of ``engine.worker.faults.Boundary`` with every action:
``kill`` and ``exit`` are worker crashes (D1), ``raise`` is a connection error before
COMMIT (D2), ``sever_*`` lose a COMMIT's answer through the proxy (D3), ``pause``
stops the process past its lease while another worker takes over (D4). Worker
boundaries are planned into worker A; ``before_signal_ack`` is a client boundary, so
the plan goes to one of the signal subprocesses, and a signal whose sender died or
hung is redelivered by the harness, as a message broker would.

The cells of ``OFFERED`` run again with worker A idle before the workload starts, so the
fault meets the write that takes the first start's offer (``engine.store.offers``).

Whatever happened, a fresh worker B is started for the quiet phase ("the harness
restarts a worker") and every instance must end.
"""

from __future__ import annotations

import json

from engine.store import store as store_module
from engine.store.rows import WorkState
from engine.worker.faults import Action, Boundary, Fault
from verification import observations, processes
from verification.drills.base import DrillEnv, DrillTimeout
from verification.fault_plan import BoundaryReport, choose_hit
from verification.processes import DrillProcess
from verification.proxy import DrillProxy
from verification.workloads import Planned, Workload

FAMILY = {
    Action.KILL: "D1",
    Action.EXIT: "D1",
    Action.RAISE: "D2",
    Action.SEVER_BEFORE_COMMIT: "D3",
    Action.SEVER_AFTER_COMMIT: "D3",
    Action.PAUSE: "D4",
}
SEVERS = (Action.SEVER_BEFORE_COMMIT, Action.SEVER_AFTER_COMMIT)
CUT_KINDS = {Boundary.IN_LEASE_RENEWAL: "renewal", Boundary.IN_RECOVERY: "sweep"}
"""Which COMMIT a sever at a boundary is about: the renewal's, the sweep's, or else the
transition (or lease-fenced outcome) the worker commits next."""
FIRE_SECONDS = 20.0


OPEN_TRANSACTIONS = """
SELECT count(*) FROM pg_stat_activity
WHERE application_name = %s AND xact_start IS NOT NULL AND pid <> pg_backend_pid()
"""
"""How many sessions of one worker sit inside a transaction (holding its row locks)."""


def idle_limit() -> float:
    """Seconds the server lets a stopped owner's session idle in a transaction."""
    return getattr(store_module, "IDLE_IN_TRANSACTION_TIMEOUT_MS", 0) / 1000


def release_seconds() -> float:
    """How long the server may take to end a stopped owner's transactions. Each ends
    one idle limit after its last statement, but a session whose statement waited for
    a row another of them locked goes idle only once that one ended: a chain of its
    sessions, at most its pool, takes one limit each (seen: two, 9.8 s)."""
    return store_module.DEFAULT_POOL_SIZE * idle_limit() + 3


def takeover_seconds(lease: float = 1.5) -> float:
    """How long a takeover may take once the stopped owner's transactions ended: the
    lease must expire (the idle limit may have outlived it) and a worker claim it."""
    return max(3 * lease, idle_limit() + lease) + 3


def applicable(boundary: Boundary, action: Action) -> bool:
    """A sever at the signal ack has no COMMIT left to cut: the signal committed already."""
    return not (boundary is Boundary.BEFORE_SIGNAL_ACK and action in SEVERS)


OFFERED = (
    (Boundary.AFTER_COMMIT, Action.KILL),
    (Boundary.AFTER_COMMIT, Action.EXIT),
    (Boundary.AFTER_COMMIT, Action.RAISE),
    (Boundary.AFTER_COMMIT, Action.PAUSE),
    (Boundary.BEFORE_COMMIT, Action.SEVER_BEFORE_COMMIT),
    (Boundary.BEFORE_COMMIT, Action.SEVER_AFTER_COMMIT),
)
"""The cells drilled again on an offer's write (``engine.store.offers``): the worker is
idle when the workload starts, so its first commit is the write that takes the first
start's offer, and the fault hits that write (its COMMIT cut either way) or follows it
(a crash, an error, a stall once the take committed). A drill counts whether it did
(``offers_taken``, or ``offers_lost`` to the worker's own first claim, which can be
under way as the workload starts); the ``ci`` campaign must take some."""
OFFERED_POLL_SECONDS = 60.0
"""Worker A's poll in a drill of ``OFFERED``: the longest a worker takes, so that it
claims only when woken (worker B, which finishes the workload, polls as usual)."""
LISTENING = """
SELECT count(*) FROM pg_stat_activity
WHERE application_name = %s AND query LIKE 'LISTEN %%' AND state = 'idle'
"""


async def boundary_drill(env: DrillEnv) -> None:
    boundary = Boundary(env.spec.params["boundary"])
    action = Action(env.spec.params["action"])
    proxy = await env.proxy() if action in SEVERS else None
    if proxy is not None:
        proxy.target_kind = CUT_KINDS.get(boundary, "transition")
    if env.spec.params.get("offered"):
        await _offered_fault(env, boundary, action, proxy)
    elif boundary is Boundary.BEFORE_SIGNAL_ACK:
        await _client_fault(env, await env.start_workload(Workload(env.spec.id)), action)
    else:
        planned = await env.start_workload(Workload(env.spec.id))
        await _worker_fault(env, planned, boundary, action, proxy)
    env.worker("b")
    await env.quiesce()
    await env.stop_processes()


async def _offered_fault(
    env: DrillEnv, boundary: Boundary, action: Action, proxy: DrillProxy | None
) -> None:
    """The fault at worker A's first commit, which takes the first start's offer: A is
    idle and listening before anything starts."""
    fault = Fault(boundary, 1, action)
    # No poll: only its first claim, at its start, can be under way when the workload
    # starts, and take the first start's work before its offer (then the fault hits
    # the claimed work's first commit, and the drill counts the offer lost)
    worker = env.worker("a", plan=[fault], proxy=proxy, poll_seconds=OFFERED_POLL_SECONDS)
    name = env.worker_id("a")
    await env.until(lambda: _listening(env, name), FIRE_SECONDS, f"{name} listening")
    for item in await env.start_workload(Workload(env.spec.id)):
        await env.signal(item)
    await wait_fired(env, fault, worker)
    env.mark_fault(action.value)
    taken = any(_takes(o) for o in observations.read(env.process_env.observations))
    env.record.stats["offers_taken" if taken else "offers_lost"] += 1
    await react(env, worker, action)


async def _listening(env: DrillEnv, name: str) -> bool:
    return await env.scalar(LISTENING, [name]) > 0


def _takes(observed: dict) -> bool:
    """An observed lease-holder write that takes an offered lease (``lease_audit``)."""
    return observed.get("kind") == "fenced" and "(taking)" in observed.get("statement", "")


async def _worker_fault(
    env: DrillEnv,
    planned: list[Planned],
    boundary: Boundary,
    action: Action,
    proxy: DrillProxy | None,
) -> None:
    for item in planned:
        await env.signal(item)
    hit = env.spec.params.get("hit") or choose_hit(
        env.rng, env.campaign.calibration.get(boundary.value, 1)
    )
    fault = Fault(boundary, hit, action)
    worker = env.worker("a", plan=[fault], proxy=proxy)
    await wait_fired(env, fault, worker)
    env.mark_fault(action.value)
    await react(env, worker, action)


async def wait_fired(env: DrillEnv, fault: Fault, process: DrillProcess) -> None:
    """Until the report shows the planned fault fired (or the process is gone)."""

    async def fired() -> bool:
        report = BoundaryReport.read(env.process_env.report)
        return report.has_fired(fault) or not process.alive

    await env.until(fired, FIRE_SECONDS, f"{fault.action.value} at {fault.boundary.value}")


async def react(env: DrillEnv, process: DrillProcess, action: Action) -> None:
    """What the harness does once the fault fired in ``process``."""
    if action in (Action.KILL, Action.EXIT):
        code = await process.wait_exit(10.0)
        env.expect(code in (-9, 86), f"{process.name} ended with {code}, not by the fault")
        env.record.env_faults["process_crashes"] += 1
    elif action is Action.PAUSE:
        await process.wait_paused(10.0)
        await take_over(env, process)


async def take_over(env: DrillEnv, stopped: DrillProcess) -> None:
    """With ``stopped`` frozen, a second worker takes its leases over; then SIGCONT it.
    Its leases are claimable once they expired and the server ended its open
    transactions (claims skip locked rows), so the two are awaited in turn."""
    held = await _leases_of(env, stopped.worker_id)
    env.worker("takeover")
    env.record.env_faults["process_pauses"] += 1

    async def released() -> bool:
        return await env.scalar(OPEN_TRANSACTIONS, (stopped.worker_id,)) == 0

    async def taken() -> bool:
        return not (await _leases_of(env, stopped.worker_id)) & held

    try:
        await env.until(released, release_seconds(), "the server to end its transactions")
        await env.until(taken, takeover_seconds(), "another worker to take them over")
    except DrillTimeout as exc:
        held_by = ", ".join(w for w, _ in sorted(held))
        env.expect(
            False,
            f"leases of stopped owner {stopped.worker_id} on {held_by}: {exc}; "
            f"{await env.diagnose()}",
        )
    stopped.resume()


async def _leases_of(env: DrillEnv, owner: str) -> set[tuple[str, int]]:
    async with env.store.connection() as conn:
        rows = await (
            await conn.execute(
                f"SELECT work_id, lease_token FROM work WHERE state = {WorkState.LEASED} "
                "AND lease_owner = %s",
                (owner,),
            )
        ).fetchall()
    return {(w, t) for w, t in rows}


async def _client_fault(env: DrillEnv, planned: list[Planned], action: Action) -> None:
    """The fault in one signal sender; any signal not acknowledged is delivered again."""
    env.worker("a")
    chosen = env.rng.randrange(len(planned))
    for index, item in enumerate(planned):
        plan = [Fault(Boundary.BEFORE_SIGNAL_ACK, 1, action)] if index == chosen else []
        sender = _sender(env, item, plan)
        hung = False
        if plan:
            await wait_fired(env, plan[0], sender)
            env.mark_fault(action.value)
            if action is Action.PAUSE:
                await sender.wait_paused(10.0)
                hung = True
            else:
                await react(env, sender, action)
        if hung or await sender.wait_exit(15.0) != 0:
            await env.signal(item)  # the broker redelivers what was never acknowledged
            env.record.stats["signals_redelivered"] += 1
        sender.resume()
        await sender.wait_exit(15.0)


def _sender(env: DrillEnv, item: Planned, plan: list[Fault]) -> DrillProcess:
    command = [
        "signal",
        "--instance",
        item.instance_id,
        "--step",
        "go",
        "--signal-id",
        item.signal_id,
        "--payload",
        json.dumps(item.signal_payload),
    ]
    env.record.plan.extend(plan)
    name = f"{env.spec.id}-signal-{item.signal_id}"
    process = processes.spawn(env.process_env, name, command, plan=plan)
    env.processes.append(process)
    env.record.stats["signals_sent"] += 1
    return process
