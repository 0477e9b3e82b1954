"""Code-first drills (C): the harness's faults applied to journaled workflow code.

Every drill runs ``drill.code`` (``verification.drill_code``), whose step bodies mark
their entry and record their effect by ``ctx.step_id``; the first run's first step
fails once, cleanly (a known failure: its next attempt runs under a new step_id). The
checker's J1-J4 then hold the bodies' records against history and replay every journal
against its code. The faults:

- C1 ``kill``: SIGKILL of worker A before a step's body (its attempt durably started),
  during it (its effect made, its outcome not recorded) or after it (committed): the
  step runs again under the same step_id only when its outcome is unknown;
- C3 ``sever_*``: a COMMIT cut before, or after, the server got it (the wire proxy):
  settled, never applied twice or lost;
- C4 ``pause``: A SIGSTOPped past its lease before a step or during its body; another
  worker takes over, then A resumes and must be refused;
- C5 ``duplicate-signals``: the signal a run waits for delivered six times at once
  (before one run waits, while the other does), then a second click with another id,
  then again after the end: one is consumed, the extra is set aside, nothing breaks;
- C6 ``cancels``: runs waiting for their signal are cancelled with one audited command
  sent twice at once, then another, then again after they ended: each is cancelled
  once and its compensated first step undone once (the undo under its step_id);
- C7 ``divergent-deploy``: runs park at their wait, the workers are replaced by a
  deployment whose code reaches another first step (same fingerprint: the change is in
  a helper the workflow calls); the signal's decisions must park each run visibly (a
  ``journal-divergence`` dead letter, nothing recorded past the journal), and after
  the matching code is deployed again and the dead letters retried, every run ends.

Every run continues as new once, after its first pass of work
(``verification.drill_code``): the run a drill started is done when its successor ended,
and J5 (``verification.continuations``) holds each continuation to its successor.
Whatever happened, a fresh worker B runs the quiet phase and every run must end.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from engine import make_resolution
from engine.api.client import Client
from engine.decide.operator_actions import Action as Command
from engine.model.events import EventKind
from engine.store.rows import WorkState
from engine.worker.faults import Action, Boundary, Fault
from verification import continuations, drill_code
from verification.drills.base import DrillEnv, DrillFailed
from verification.drills.boundaries import SEVERS
from verification.drills.leases import one_fault_recovered
from verification.workloads import CodeRun, CodeWorkload

FIRST_HIT, LAST_HIT = 2, 6
"""The fault's hit at its boundary: reached well within the workload (three runs of
four steps each, one failed attempt, their decisions)."""
WAIT_SECONDS = 20.0
DUPLICATES = 6
"""Clients that deliver one signal at once (C5)."""
SIGNALLED_WORK = 1.0
"""How long C5's work takes: the waiting run's second click, sent once the duplicates
are answered, must find it still running (it continues as new after one pass)."""
K = EventKind
DIVERGENCE = "journal-divergence"
EXPECTED_DIVERGENCE = (
    f"journal divergence: expected step '{drill_code.FIRST_STEP}' at position 0 (event "
)
"""How the divergent code's replay must be refused: at the first step it renamed."""


async def boundary_drill(env: DrillEnv) -> None:
    """One fault (``params``: boundary and action) in worker A while it runs steps."""
    boundary = Boundary(env.spec.params["boundary"])
    action = Action(env.spec.params["action"])
    runs = CodeWorkload(env.spec.id).runs()
    proxy = await env.proxy() if action in SEVERS else None
    await env.start_runs(runs)
    for run in runs:  # before each run waits: its inbox holds the signal
        await env.signal_run(run)
    fault = Fault(boundary, env.rng.randint(FIRST_HIT, LAST_HIT), action)
    await one_fault_recovered(env, fault, proxy, wait_stale=action is Action.PAUSE)


async def duplicate_signals(env: DrillEnv) -> None:
    """C5 (see the module)."""
    early, waiting = CodeWorkload(env.spec.id, count=2, slow=SIGNALLED_WORK).runs()
    await env.start_runs([early, waiting])
    await _deliver_at_once(env, early)
    await _click_again(env, early)  # before any worker runs it: it cannot have moved on
    env.worker("a")
    await _until_waiting(env, waiting)
    env.mark_fault("duplicate-signals")
    await _deliver_at_once(env, waiting)
    await _click_again(env, waiting)  # within its work's SIGNALLED_WORK: still running
    await env.quiesce()
    await env.stop_processes()
    for run in (early, waiting):
        await _consumed_once(env, run)


async def _deliver_at_once(env: DrillEnv, run: CodeRun) -> None:
    """``run``'s signal from ``DUPLICATES`` clients at once: every one answers success."""
    clients = [Client(env.store) for _ in range(DUPLICATES)]
    answers = await asyncio.gather(
        *(env.signal_run(run, client) for client in clients), return_exceptions=True
    )
    failed = [a for a in answers if isinstance(a, BaseException)]
    env.expect(not failed, f"{run.run_id}: duplicate deliveries were refused: {failed[:2]}")


async def _click_again(env: DrillEnv, run: CodeRun) -> None:
    """``run``'s second click, after its first signal was answered: another id, which
    the run's wait (taking the oldest) leaves set aside. Sent while the run still runs:
    once it continued as new, a new signal is refused and names its successor."""
    await env.client.signal(run.run_id, drill_code.SIGNAL, _extra(run), None)
    env.record.stats["signals_sent"] += 1


def _extra(run: CodeRun) -> str:
    """The id of ``run``'s second click."""
    return f"{run.signal_id}-again"


SIGNALS = """
SELECT count(*) FILTER (WHERE kind = %(received)s),
       count(DISTINCT idempotency_key) FILTER (WHERE kind = %(received)s)
FROM history WHERE instance_id = %(run)s
"""


async def _consumed_once(env: DrillEnv, run: CodeRun) -> None:
    """Two signal ids recorded once each, the first consumed: the run returned its
    payload, and the end is not disturbed by a delivery again."""
    params = {"received": int(K.SIGNAL_RECEIVED), "run": run.run_id}
    async with env.store.connection() as conn:
        received, ids = await (await conn.execute(SIGNALS, params)).fetchone()
    env.expect(
        (received, ids) == (2, 2),
        f"{run.run_id}: {received} signals recorded under {ids} ids, not the two sent",
    )
    *_, last = await continuations.live_chain(env.store, run.run_id)
    result = last.value("result") if last.result is not None else {}
    env.expect(
        result.get("go") == run.signal_payload,
        f"{run.run_id}: the wait returned {result.get('go')!r}, not the first signal",
    )
    state = await env.client.inspect(run.run_id)
    consumed = {s.signal_id: s.consumed_by for s in state.inbox}
    env.expect(
        bool(consumed.get(run.signal_id)) and consumed.get(_extra(run)) == "",
        f"{run.run_id}: the inbox is {consumed}, not the first consumed and the extra aside",
    )
    events = await _events(env, run)
    await env.signal_run(run)
    env.expect(
        await _events(env, run) == events, f"{run.run_id}: a signal after the end appended events"
    )


async def _events(env: DrillEnv, run: CodeRun) -> int:
    """How many events ``run``'s history holds."""
    return await env.scalar("SELECT count(*) FROM history WHERE instance_id = %s", (run.run_id,))


async def _until_waiting(env: DrillEnv, run: CodeRun) -> None:
    async def waiting() -> bool:
        query = "SELECT count(*) FROM history WHERE instance_id = %s AND kind = %s"
        return await env.scalar(query, (run.run_id, int(K.WAIT_STARTED))) > 0

    await env.until(waiting, WAIT_SECONDS, f"{run.run_id} to wait for its signal")


async def cancels(env: DrillEnv) -> None:
    """C6 (see the module)."""
    runs = CodeWorkload(env.spec.id, count=2).runs()
    await env.start_runs(runs)
    env.worker("a")
    for run in runs:
        await _until_waiting(env, run)
    env.mark_fault("duplicate-cancels")
    for run in runs:
        answers = await asyncio.gather(
            *(_cancel(Client(env.store), run, "first") for _ in range(2)), return_exceptions=True
        )
        failed = [a for a in answers if isinstance(a, BaseException)]
        env.expect(not failed, f"{run.run_id}: a duplicate of cancel first was refused: {failed}")
        await env.count_cancel(_cancel(env.client, run, "second"))
    await env.quiesce()
    await env.stop_processes()
    for run in runs:
        events = await _events(env, run)
        await env.count_cancel(_cancel(env.client, run, "after-end"))
        await _cancelled_once(env, run, events)


async def _cancel(client: Client, run: CodeRun, command: str) -> None:
    reason = "cancelled by the drill"
    await client.command(run.run_id, Command.CANCEL, "drills", reason, f"{run.id}-{command}")


CANCELS = """
SELECT count(*) FILTER (WHERE kind = %(requested)s), count(*) FILTER (WHERE kind = %(undone)s),
       count(*) FILTER (WHERE kind = %(cancelled)s)
FROM history WHERE instance_id = %(run)s
"""


async def _cancelled_once(env: DrillEnv, run: CodeRun, events: int) -> None:
    """Cancelled once, its first step undone once, nothing appended after the end."""
    params = {
        "requested": int(K.CANCELLATION_REQUESTED),
        "undone": int(K.COMPENSATION_SUCCEEDED),
        "cancelled": int(K.CANCELLED),
        "run": run.run_id,
    }
    async with env.store.connection() as conn:
        counts = await (await conn.execute(CANCELS, params)).fetchone()
    env.expect(
        tuple(counts) == (1, 1, 1),
        f"{run.run_id}: {counts[0]} cancellations requested, {counts[1]} compensations, "
        f"{counts[2]} cancelled events: one of each, whatever was sent",
    )
    env.expect(
        await _events(env, run) == events, f"{run.run_id}: a cancel after the end appended events"
    )


async def divergent_deploy(env: DrillEnv) -> None:
    """C7 (see the module)."""
    runs = CodeWorkload(env.spec.id).runs()
    await env.start_runs(runs)
    original = env.worker("a")
    for run in runs:
        await _until_waiting(env, run)
    await original.stop()
    env.worker("divergent", deployment=drill_code.DIVERGENT)
    env.mark_fault("divergent-deploy")
    recorded = {run.run_id: await _commands(env, run) for run in runs}
    for run in runs:
        await env.signal_run(run)
    dead = await _parked(env, runs)
    for run in runs:
        env.expect(
            await _commands(env, run) == recorded[run.run_id],
            f"{run.run_id}: the divergent code recorded commands past the journal",
        )
    await env.stop_processes()
    env.worker("b")
    for n, fence in enumerate(dead):
        await _retry(env, f"{env.spec.id}-retry-{n}", *fence)
    await env.quiesce()
    await env.stop_processes()


COMMANDS = """
SELECT count(*) FROM history WHERE instance_id = %(run)s AND kind = ANY(%(kinds)s)
"""
COMMAND_KINDS = [
    int(k)
    for k in (
        K.ACTIVITY_SCHEDULED,
        K.TIMER_SCHEDULED,
        K.WAIT_STARTED,
        K.CHILD_SCHEDULED,
        K.VALUE_RECORDED,
        K.COMPLETED,
        K.INSTANCE_FAILING,
    )
]
"""What only a decision that ran the code records: its commands, and how it ended."""


async def _commands(env: DrillEnv, run: CodeRun) -> int:
    return await env.scalar(COMMANDS, {"run": run.run_id, "kinds": COMMAND_KINDS})


RETRY_DEADLINE = timedelta(minutes=5)


async def _retry(
    env: DrillEnv, command_id: str, instance_id: str, work_id: str, token: int
) -> None:
    """The operator's retry of a dead letter, once the matching code is deployed."""
    now = datetime.now(UTC)
    reason = "the matching code is deployed again"
    fence = (instance_id, work_id, token)
    retry = make_resolution(
        command_id, *fence, "retry", "drills", reason, now, now, now + RETRY_DEADLINE
    )
    await env.client.resolve_dead_letter(retry)
    env.record.stats["dead_letters_retried"] += 1


DEAD_DECISIONS = """
SELECT instance_id, work_id, lease_token, failure_code, failure_detail FROM work
WHERE state = %(dead)s AND instance_id = ANY(%(runs)s)
"""
DECIDING = f"""
SELECT DISTINCT instance_id FROM work
WHERE state IN ({WorkState.AVAILABLE}, {WorkState.LEASED}, {WorkState.HELD})
  AND instance_id = ANY(%(runs)s) AND (lease_token > 0 OR available_at < now() + %(soon)s)
"""
"""Runs whose work may still move: due within the wait (a server's clock may run behind
the worker's), held by a worker, or put back by one. A run's wake-up at its wait's
timeout (``drill_code.SIGNAL_TIMEOUT``), never claimed, is not."""


async def _parked(env: DrillEnv, runs: list[CodeRun]) -> list[tuple[str, str, int]]:
    """Until every run's signal decision settled; each one's fence (instance id, work id
    and token), once checked to be parked: dead-lettered as the divergence, its run
    still running. A decision that settled otherwise (an engine that took the divergent
    code as waiting) fails the drill at once, rather than at the quiet phase's timeout."""
    params = {
        "dead": int(WorkState.DEAD_LETTERED),
        "runs": [r.run_id for r in runs],
        "soon": timedelta(seconds=WAIT_SECONDS),
    }
    found: list[tuple[str, str, int, str, str]] = []

    async def settled() -> bool:
        nonlocal found
        async with env.store.connection() as conn:
            # deciding first: a run not deciding then has settled, and if it was
            # dead-lettered, the read after it finds it so
            deciding = await (await conn.execute(DECIDING, params)).fetchall()
            found = await (await conn.execute(DEAD_DECISIONS, params)).fetchall()
        dead = {row[0] for row in found}
        return not {row[0] for row in deciding} - dead

    await env.until(settled, WAIT_SECONDS, "every run's decision to settle")
    if unparked := sorted(set(params["runs"]) - {row[0] for row in found}):
        raise DrillFailed(
            f"{', '.join(unparked)}: the signal's decision settled without parking the run "
            "as a journal divergence"
        )
    for run_id, _, _, code, detail in found:
        env.expect(
            code == DIVERGENCE and (detail or "").startswith(EXPECTED_DIVERGENCE),
            f"{run_id}: its decision was dead-lettered {code}: {detail!r}, not the divergence",
        )
        state = await env.client.inspect(run_id)
        env.expect(not state.status.terminal, f"{run_id}: {state.status.label}, not parked")
    return [(run_id, work_id, token) for run_id, work_id, token, _, _ in found]
