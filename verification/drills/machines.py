"""Machine drills (M): the harness's faults applied to state machine executions.

Every drill runs executions of ``drill.machine`` (``verification.drill_machine``), whose
advances write one application row each in the transaction that records their state;
the first execution's second advance also fails once (a backoff, with its write rolled
back), except where a COMMIT is cut. The checker's M1-M3 then hold the rows against
history. The faults:

- M1 ``kill``: SIGKILL of worker A before an advance (at its claim), during it (its
  writes made in the open transaction, at ``before_commit``) or after it committed;
- M3 ``sever_*``: an advance's COMMIT cut before, or after, the server got it (the
  wire proxy): settled, never applied twice or lost;
- M2 ``submits``: while worker A runs, many clients, each on a connection of its own,
  submit executions for one parent at once, one key several times: exactly one is
  admitted, every other submit is refused naming it, the repeats of its key return
  it; at most one execution is active per parent (invariant M4, checked right then,
  and again over the whole drill once both executions of the parent have ended);
  and once the admitted one ended, a new submit for the parent is admitted;
- M4 ``pause``: A SIGSTOPped past its lease before an advance or inside its
  transaction; another worker takes over, then A resumes (a stale owner stopped before
  its advance must try to write, and be refused);
- M6 ``cancels``: one execution is cancelled while an advance is held in flight, the
  same audited cancel command sent twice at once and then a different cancel; another
  is cancelled twice in a row while it waits on its timer, then once more after it
  ended. Each is cancelled once, compensated once, and enters no state after.

Whatever happened, a fresh worker B runs the quiet phase and every execution must end.
"""

from __future__ import annotations

import asyncio

import psycopg

from engine.api.client import Client
from engine.api.executions import Executions, Submitted
from engine.decide.operator_actions import Action as Command
from engine.model.events import EventKind
from engine.store.errors import ActiveExecutionExists
from engine.worker.faults import Action, Boundary, Fault
from verification import machine_checks
from verification.drill_machine import MACHINE
from verification.drills.base import DrillEnv
from verification.drills.boundaries import SEVERS
from verification.drills.leases import one_fault_recovered
from verification.findings import Findings
from verification.workloads import Execution, MachineWorkload

FIRST_HIT, LAST_HIT = 2, 8
"""The fault's hit at its boundary: reached well within the workload's advances (three
executions of five advances each, and one failed attempt)."""
WAIT_SECONDS = 20.0
K = EventKind


async def script(env: DrillEnv, execution: str, transitions: int, action: str) -> None:
    """Script the advance that would make transition ``transitions`` of ``execution``."""
    async with await psycopg.AsyncConnection.connect(env.ledger_dsn, autocommit=True) as conn:
        await conn.execute(
            "INSERT INTO drill_machine_script (execution, transitions, action) VALUES (%s, %s, %s)",
            (execution, transitions, action),
        )


async def boundary_drill(env: DrillEnv) -> None:
    """One fault (``params``: boundary and action) in worker A while it runs advances."""
    boundary = Boundary(env.spec.params["boundary"])
    action = Action(env.spec.params["action"])
    executions = MachineWorkload(env.spec.id).executions()
    proxy = await env.proxy() if action in SEVERS else None
    if proxy is None:  # a cut's every commit is an advance's: none records a failure
        await script(env, executions[0].execution_id, 2, "fail")
    await env.start_machines(executions)
    fault = Fault(boundary, env.rng.randint(FIRST_HIT, LAST_HIT), action)
    stale = action is Action.PAUSE and boundary is Boundary.AFTER_CLAIM
    await one_fault_recovered(env, fault, proxy, wait_stale=stale)


async def cancels(env: DrillEnv) -> None:
    """M6: duplicate and repeated cancels, one of them while an advance is in flight."""
    cancelled = frozenset({"cancelled"})
    held = Execution(f"{env.spec.id}-held", 5, cancelled)
    resting = Execution(f"{env.spec.id}-resting", 0, cancelled)
    running = Execution(f"{env.spec.id}-running", 3)
    await script(env, held.execution_id, 2, "hold")
    await env.start_machines([held, resting, running])
    env.worker("a")
    await _entered_hold(env, held.execution_id)
    env.mark_fault("duplicate-cancels")
    await _cancel_twice_at_once(env, held.execution_id)
    await env.count_cancel(_command(env.client, held.execution_id, "second"))
    await _release(env, held.execution_id)
    await _resting(env, resting.execution_id)
    for _ in range(2):  # the same command again: success, nothing new
        await _command(env.client, resting.execution_id, "first")
    await env.quiesce()
    await env.count_cancel(_command(env.client, resting.execution_id, "after-end"))
    await env.stop_processes()
    for execution in (held, resting):
        await _cancelled_once(env, execution.execution_id)
    made = (await env.client.inspect(held.execution_id)).machine
    env.expect(
        made is not None and made.transitions == 1,
        f"{held.execution_id}: the advance held in flight was not rolled back by the cancel",
    )


SUBMITTERS = 8
"""Clients that submit for one parent at once, each with a key of its own."""
REPEATS = 3
"""More clients that submit the first client's key again, at the same time."""
SUBMITTER = {"actor": "drills", "team": "", "scope": "operator"}


async def submits(env: DrillEnv) -> None:
    """M2: concurrent submits for one parent (see the module)."""
    parent = f"{env.spec.id}-parent"
    keys = [f"k{n}" for n in range(SUBMITTERS)] + ["k0"] * REPEATS
    clients = [Executions(Client(await env.client_store())) for _ in keys]
    env.worker("a")
    env.mark_fault("concurrent-submits")
    answers = await asyncio.gather(
        *(_submit(c, parent, key, 0) for c, key in zip(clients, keys, strict=True)),
        return_exceptions=True,
    )
    admitted = _admitted(env, parent, keys, answers)
    await _one_active(env)
    for key, client in zip(keys, clients, strict=True):  # each key once more, alone
        _answered_again(env, key, admitted, await _submit_or_refusal(client, parent, key))
    for execution in admitted.values():  # the one admitted (more, if the engine is broken)
        await _end(env, execution)
    after = await _submit(clients[0], parent, "after-end", 2)
    env.expect(after.created, f"{parent}: a submit after the active execution ended was refused")
    _remember(env, after.execution_id, 2, "completed")
    await env.quiesce()
    await env.stop_processes()


async def _submit(client: Executions, parent: str, key: str, steps: int) -> Submitted:
    return await client.submit(MACHINE, parent=parent, input=steps, key=key, **SUBMITTER)


async def _submit_or_refusal(
    client: Executions, parent: str, key: str
) -> Submitted | ActiveExecutionExists:
    try:
        return await _submit(client, parent, key, 0)
    except ActiveExecutionExists as refused:
        return refused


def _admitted(env: DrillEnv, parent: str, keys: list[str], answers: list[object]) -> dict[str, str]:
    """The executions the burst admitted, by key; every answer checked: one admitted
    (once created, its key's repeats answered with it), every other refused naming it."""
    admitted = {
        k: a.execution_id for k, a in zip(keys, answers, strict=True) if isinstance(a, Submitted)
    }
    created = sum(isinstance(a, Submitted) and a.created for a in answers)
    env.record.stats["submits"] += len(answers)
    env.expect(
        len(set(admitted.values())) == 1 and created == 1,
        f"{parent}: {len(set(admitted.values()))} executions admitted, {created} created, "
        f"of {len(answers)} concurrent submits: exactly one must be",
    )
    for execution in set(admitted.values()):
        _remember(env, execution, 0, "cancelled")
    for key, answer in zip(keys, answers, strict=True):
        if isinstance(answer, ActiveExecutionExists):
            env.record.stats["submits_refused"] += 1
            env.expect(
                answer.active_id in admitted.values() and key not in admitted,
                f"{parent}: submit {key} was refused for {answer.active_id}, "
                f"not the admitted {sorted(set(admitted.values()))}",
            )
        elif not isinstance(answer, Submitted):
            env.expect(False, f"{parent}: submit {key} failed: {answer!r}")
    return admitted


def _answered_again(
    env: DrillEnv, key: str, admitted: dict[str, str], answer: Submitted | ActiveExecutionExists
) -> None:
    """A key submitted again: the admitted key returns its execution, any other key is
    refused naming it."""
    if key in admitted:
        env.expect(
            isinstance(answer, Submitted)
            and (answer.execution_id, answer.created) == (admitted[key], False),
            f"submit {key} again did not return its execution {admitted[key]}: {answer!r}",
        )
    else:
        env.expect(
            isinstance(answer, ActiveExecutionExists) and answer.active_id in admitted.values(),
            f"submit {key} again was not refused for the active execution: {answer!r}",
        )


async def _one_active(env: DrillEnv) -> None:
    """Invariant M4 right after the burst, while the admitted execution is active."""
    findings = Findings()
    async with env.store.connection() as conn:
        await machine_checks.parents(conn, findings)
    for violation in findings.violations:
        env.expect(False, violation)


async def _end(env: DrillEnv, execution: str) -> None:
    """Cancel an execution resting on its timer, and wait until it is cancelled."""
    await _resting(env, execution)
    actor = SUBMITTER["actor"]
    await Executions(env.client).cancel(execution, actor, "", "ends", f"{execution}-end")

    async def ended() -> bool:
        return (await env.client.inspect(execution)).status.terminal

    await env.until(ended, WAIT_SECONDS, f"{execution} to be cancelled")


def _remember(env: DrillEnv, execution: str, steps: int, ends: str) -> None:
    """An execution the drill made, for I1 and M3."""
    env.record.acked.append(execution)
    env.record.machines[execution] = Execution(execution, steps, frozenset({ends}))
    env.record.stats["machines_started"] += 1


async def _entered_hold(env: DrillEnv, execution: str) -> None:
    async def entered() -> bool:
        query = "SELECT count(*) FROM drill_machine_entries WHERE execution = %s"
        return await env.scalar(query, (execution,)) > 0

    await env.until(entered, WAIT_SECONDS, f"the advance of {execution} to be held")


async def _resting(env: DrillEnv, execution: str) -> None:
    async def resting() -> bool:
        machine = (await env.client.inspect(execution)).machine
        return machine is not None and machine.state == "Resting"

    await env.until(resting, WAIT_SECONDS, f"{execution} to rest on its timer")


async def _cancel_twice_at_once(env: DrillEnv, execution: str) -> None:
    """The same audited cancel from two clients at once: both answer success."""
    clients = [Client(env.store) for _ in range(2)]
    answers = await asyncio.gather(
        *(_command(c, execution, "first") for c in clients), return_exceptions=True
    )
    failed = [a for a in answers if isinstance(a, BaseException)]
    env.expect(not failed, f"a duplicate of cancel command first was refused: {failed[:1]}")


async def _command(client: Client, execution: str, command: str) -> None:
    await client.command(execution, Command.CANCEL, "drill", "cancelled", f"{execution}-{command}")


async def _release(env: DrillEnv, execution: str) -> None:
    async with await psycopg.AsyncConnection.connect(env.ledger_dsn, autocommit=True) as conn:
        await conn.execute(
            "UPDATE drill_machine_script SET released = true WHERE execution = %s", (execution,)
        )


CANCEL_EVENTS = """
SELECT count(*) FILTER (WHERE kind = %(requested)s), count(*) FILTER (WHERE kind = %(compensated)s)
FROM history WHERE instance_id = %(execution)s
"""


async def _cancelled_once(env: DrillEnv, execution: str) -> None:
    """One cancellation requested and one compensation, whatever was sent."""
    params = {
        "requested": int(K.CANCELLATION_REQUESTED),
        "compensated": int(K.COMPENSATION_SUCCEEDED),
        "execution": execution,
    }
    async with env.store.connection() as conn:
        requested, compensated = await (await conn.execute(CANCEL_EVENTS, params)).fetchone()
    env.expect(
        (requested, compensated) == (1, 1),
        f"{execution}: {requested} cancellations requested, {compensated} compensations",
    )
