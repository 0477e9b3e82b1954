"""A drill plan run as drills: the team's definition, broken where its pins say.

Each plan (or, with ``--for-each-pin``, each pin) is one drill of family ``P`` that the
harness's runner runs like any other: a fresh schema, real worker processes, the
invariant checker and the scorecard. The scenario publishes the plan's definition,
starts one instance with the plan's input, and runs workers for the plan's stubs (or
the team's app, ``verification.plan_stubs``) with the pins armed per step
(``engine.worker.faults``: the n-th time *that step* reaches the boundary). When a
pinned fault kills or exits a worker, the next one gets the pins still to fire; a
paused worker is taken over and resumed, as drill D4 does. Signal and approval steps
are answered by the harness (``answers``); a pin on ``before_signal_ack`` sends that
signal from a subprocess that the fault hits, and the harness redelivers what was never
acknowledged, as a broker would.

The quiet phase ends when no work is open and the instance has *settled*: it ended, or
it holds an unknown outcome of a step whose ``on_unknown`` is ``hold`` (in doubt by
the definition's design: it waits for an operator, which is a verdict, not a lost
instance). The result, per pin (``record.extra["plan"]``), says whether it fired, the
instance's final state in operator words, the effects per idempotency key (more than
one effect under one key is a finding: the activity is not idempotent), the
history and the recovery time. Its own findings name the step they are about
(``findings``: ``{step, text}``), so a studio can explain each on its node; the
invariant checker's violations are the drill's ``failures``.

A plan on a state machine starts one execution (its parent is the instance itself) and
runs workers with a stubbed machine (``verification.plan_stubs``) whose pins hit the
advance of the state they name. Its advances write their rows in the drill's schema
as the role the machine's grants name (provisioned here), so invariant M1 holds one
committed write per transition; its effects are those rows, per transition. The drill
runs on a clock every process shares, which follows the wall clock and is moved past a
timer when the execution waits for one (a drill does not wait a machine's minutes).

A plan on a code-first workflow starts one run (``<workflow>/plan-1``) of the team's own
code: its workers run the app the plan names, every workflow that app declares is
published (the children it spawns), every signal the plan answers or pins is sent when
the run starts (its inbox keeps it until the code waits), and the clock is moved to the
next work due whenever nothing is due or in hand (its sleeps, its waits' timeouts). A
step whose outcome is unknown is held for an operator unless the code says otherwise,
so a run holding one settles as in doubt.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from engine import load_app, provision_roles
from engine.decide.audit import Action as Command
from engine.model.definitions import Definition, Mode, StepKind, definition_to_json
from engine.model.errors import WaylineError
from engine.model.events import EventKind
from engine.model.instance import AttemptStatus, Instance, InstanceStatus
from engine.model.words import counted
from engine.modes.machines.fold import progress_of
from engine.modes.machines.grants import role_of
from engine.store.clock import NOW_SQL
from engine.store.rows import WorkState
from engine.worker.faults import Action, Boundary, Fault
from verification import continuations
from verification import plan as plans
from verification import plan_machines as machines
from verification.clocks import FileClock, keep_running
from verification.drills.base import OPEN_WORK_COUNT, DrillEnv, DrillFailed, DrillSpec
from verification.drills.boundaries import react, wait_fired
from verification.drills.catalogue import drill_seed, strands
from verification.effects import BODY_ENTRIES_ENV
from verification.fault_plan import BoundaryReport
from verification.plan_stubs import PLAN_STUBS_ENV
from verification.processes import DrillProcess, spawn

FAMILY = "P"
MAX_ID_CHARS = 80
"""A drill id's readable part: worker ids (lease owners) are made from it."""
STUB_APP = "verification.plan_stubs:app"
INSTANCE = "plan-1"
FIRE_SECONDS = 20.0
SETTLE_SECONDS = 30.0
DUPLICATE_DELIVERIES = 3
"""How many times a ``duplicate_signal`` pin delivers its signal (one id)."""
ACTOR = "drill-plan"
MAX_HISTORY_EVENTS = 500
"""Events of the drilled instance kept in the result (its history is short)."""
EFFECTS = """
SELECT step, compensation, idempotency_key, count(*), count(*) FILTER (WHERE applied)
FROM drill_effect_calls WHERE instance_id = ANY(%s)
GROUP BY step, compensation, idempotency_key ORDER BY min(call_id)
"""
ENTRIES = """
SELECT step, compensation, idempotency_key, count(*), NULL
FROM drill_handler_entries WHERE instance_id = ANY(%s)
GROUP BY step, compensation, idempotency_key ORDER BY min(entry_id)
"""
"""The team's own code entered per key, in the shape of ``EFFECTS`` (the effects are
its own, so none are counted): a code-first run's step bodies per step_id
(``effects.BodyEntries``), or the team's handlers per idempotency key, each marked as it
was entered (``effects.mark_entry``), so a call that raised, or whose worker died while
it ran, is counted as the call it was. Both read every run of the drilled instance's
chain (one that continued as new, and its successors: ``verification.continuations``)."""
HISTORY = """
SELECT sequence, kind, step_name, attempt FROM history WHERE instance_id = %s
ORDER BY sequence LIMIT %s
"""
NEXT_DUE = f"""
SELECT min(available_at) FILTER (WHERE state = {WorkState.AVAILABLE}),
       count(*) FILTER (WHERE state = {WorkState.LEASED})
FROM work
"""
"""The earliest work to claim, and how much is in hand."""
LIVE_LEASES = f"""
SELECT count(*) FROM work WHERE state = {WorkState.LEASED} AND lease_expires_at > {NOW_SQL}
"""
"""Leases not yet run out (on the drill's clock)."""
LEASE_LAPSE_SECONDS = 30.0
"""How long a restarted server may take to show the stopped worker's lease run out."""
MACHINE_WRITES = """
SELECT compensation, transitions, count(*) FROM drill_machine_writes WHERE execution = %s
GROUP BY compensation, transitions ORDER BY compensation, transitions
"""
MACHINE_GRANTS = """
GRANT USAGE ON SCHEMA {schema} TO {role};
GRANT SELECT, INSERT ON drill_machine_writes TO {role};
"""
"""What the role a stubbed machine acts as may do in the drill's schema: its rows."""


@dataclass(frozen=True)
class Drilled:
    """A plan and the definition it drills (validated against each other)."""

    plan: plans.Plan
    definition: Definition

    @property
    def ref(self) -> str:
        return f"{self.definition.name}@{self.definition.version}"

    @property
    def machine(self) -> bool:
        return self.definition.mode is Mode.MACHINE

    @property
    def code(self) -> bool:
        return self.definition.mode is Mode.CODE

    @property
    def instance(self) -> str:
        """The drilled instance's id (a code-first run's is ``<workflow>/<id>``)."""
        return f"{self.definition.name}/{INSTANCE}" if self.code else INSTANCE


def specs(drilled: list[Drilled], master: int) -> list[DrillSpec]:
    """One drill per plan, each named by its definition and pins."""
    result = []
    for item in drilled:
        labels = ", ".join(p.label for p in item.plan.pins) or "no faults"
        digest = hashlib.sha256(json.dumps(item.plan.as_json()).encode()).hexdigest()[:6]
        pins = item.plan.pins
        what = pins[0].label.replace("#", "-") if len(pins) == 1 else f"{len(pins)}-pins"
        drill_id = f"P-{item.ref}-{what}"[:MAX_ID_CHARS] + f"-{digest}"
        result.append(
            DrillSpec(
                drill_id,
                FAMILY,
                f"{item.plan.name or item.ref}: {labels}",
                drill_seed(master, drill_id),
                scenario,
                params={"drilled": item},
                owned_server=plans.restarts(item.plan),
                exclusive=plans.restarts(item.plan),
                strands=any(_strands(p) for p in item.plan.pins),
                manual_clock=item.machine or item.code,
            )
        )
    return result


def _strands(pin: plans.Pin) -> bool:
    if pin.fault == plans.RESTART_DATABASE:  # as D10: the server's crash cuts the worker off
        return True
    return pin.fault in plans.WORKER_FAULTS and strands(Boundary(pin.boundary), Action(pin.fault))


async def scenario(env: DrillEnv) -> None:
    drilled: Drilled = env.spec.params["drilled"]
    plan, definition = drilled.plan, drilled.definition
    if drilled.code:  # its runs' journals replay against the team's code (J3)
        env.code = load_app(drilled.plan.app)
    for published in _published(drilled):
        await env.client.publish(published, ACTOR)
    clock = asyncio.create_task(keep_running(FileClock(env.clock_file))) if env.clock_file else None
    try:
        if drilled.machine:
            await _machine_rows(env, definition)
        _prepare_workers(env, plan, definition)
        await _start(env, drilled)
        env.record.acked.append(drilled.instance)
        env.record.workload_started = env.record.workload_started or time.monotonic()
        env.record.stats["started"] += 1
        fired = await _fault_phase(env, drilled)
        env.worker("b")
        await _quiet_phase(env, drilled)
        await _result(env, drilled, fired)
        await env.stop_processes()
    finally:
        if clock is not None:
            clock.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await clock


def _published(drilled: Drilled) -> list[Definition]:
    """What the drill publishes: the plan's definition; for a code-first workflow every
    workflow its app declares too (the ones it spawns)."""
    if not drilled.code:
        return [drilled.definition]
    others = [f.definition for f in load_app(drilled.plan.app).workflows]
    return [drilled.definition, *(d for d in others if d.ref != drilled.definition.ref)]


async def _start(env: DrillEnv, drilled: Drilled) -> None:
    plan, definition = drilled.plan, drilled.definition
    if drilled.code:
        await env.client.start_run(
            definition.name, plan.input, id=INSTANCE, version=definition.version
        )
        return
    start = {"input": plan.input, "parent": INSTANCE} if drilled.machine else plan.input
    await env.client.start(definition.name, INSTANCE, start, version=definition.version)


async def _machine_rows(env: DrillEnv, definition: Definition) -> None:
    """The machine's roles (cluster-wide, as ``wayline machine roles --apply`` makes
    them), and the role its grants name allowed to write its rows in this schema."""
    role = role_of(machines.manifest_of(definition))
    grants = sql.SQL(MACHINE_GRANTS).format(
        schema=sql.Identifier(env.schema), role=sql.Identifier(role)
    )
    async with await psycopg.AsyncConnection.connect(env.ledger_dsn, autocommit=True) as conn:
        await provision_roles(conn, [machines.manifest_of(definition).resource])
        await conn.execute(grants)


def _prepare_workers(env: DrillEnv, plan: plans.Plan, definition: Definition) -> None:
    """Every worker runs the stub app, built from a file in the drill's directory."""
    targets = {s.target for s in definition.steps if s.kind is StepKind.ACTIVITY}
    targets |= {s.compensation.target for s in definition.steps if s.compensation}
    document: dict[str, Any] = {
        "targets": sorted(targets),
        "stubs": {step: stub.as_json() for step, stub in plan.stubs.items()},
        "app": plan.app,
    }
    if definition.mode is Mode.MACHINE:
        document["machine"] = definition_to_json(definition)
    path = env.directory / "stubs.json"
    path.write_text(json.dumps(document))
    exact = env.directory / "plan.json"  # this drill's own plan: its pins only
    exact.write_text(json.dumps(plan.as_json(), indent=2))
    env.record.extra["reproduce"] = f"wayline drill run --plan {exact}"
    env.worker_app = STUB_APP
    env.variables = {PLAN_STUBS_ENV: str(path)}
    if definition.mode is Mode.CODE:  # its bodies are the team's code: marked as entered
        env.variables[BODY_ENTRIES_ENV] = "1"


def _faults(pins: list[plans.Pin]) -> list[Fault]:
    """The worker's faults: a ``restart_database`` pin stops (SIGSTOP) the worker at
    its boundary, where the harness holds it while it restarts the server."""
    return [Fault(Boundary(p.boundary), p.hit, _action(p), p.step) for p in pins]


def _action(pin: plans.Pin) -> Action:
    return Action.PAUSE if pin.fault == plans.RESTART_DATABASE else Action(pin.fault)


async def _fault_phase(env: DrillEnv, drilled: Drilled) -> set[str]:
    """Run workers with the worker pins armed until each fired or the instance settled;
    answer signals and approvals meanwhile. The labels of the pins that fired."""
    pins = drilled.plan.pins
    signal_pins = {p.step: p for p in pins if p.boundary == Boundary.BEFORE_SIGNAL_ACK.value}
    remaining = [p for p in pins if p.step not in signal_pins]
    fired: set[str] = set()
    proxy = None
    if any(p.fault in plans.SEVERS for p in remaining):
        proxy = await env.proxy()
        renewal = any(p.boundary == Boundary.IN_LEASE_RENEWAL.value for p in remaining)
        proxy.target_kind = "renewal" if renewal else "transition"
    round_ = 0
    worker: DrillProcess | None = None

    async def answer() -> None:
        await _answer(env, drilled, signal_pins, fired)

    while True:
        if remaining and (worker is None or not worker.alive):
            round_ += 1
            armed = _faults(remaining)
            worker = env.worker(f"a{round_}", plan=armed, proxy=proxy)
            if round_ > 1 and armed:  # planned with the first worker: a pin is planned once
                del env.record.plan[-len(armed) :]
        elif worker is None:
            worker = env.worker("a")
        await answer()
        if not remaining or await _settled(env, drilled):
            return fired
        now = await _wait_any_fired(env, remaining, worker, drilled, answer)
        if not now and not worker.alive and not await _settled(env, drilled):
            raise DrillFailed(
                f"worker {worker.name} exited with status {worker.returncode} before any pin "
                f"fired: see {worker.log}"
            )
        for pin in now:
            fired.add(pin.label)
            env.mark_fault(pin.fault)
            if pin.fault == plans.RESTART_DATABASE:
                await _restart_database(env, worker)
            else:
                await react(env, worker, Action(pin.fault))
        remaining = [p for p in remaining if p not in now]


async def _restart_database(env: DrillEnv, worker: DrillProcess) -> None:
    """With ``worker`` stopped at its pin's boundary, crash the server (``pg_ctl stop
    -m immediate``) and start it again, then let the worker go on, as D10 does to the
    whole engine: what it held in the server is gone, and it must recover.

    The worker goes on once its lease has run out: an outage longer than a lease. Whether
    a lease outlives a restart is a race of the restart's length (1 to 7 s on these
    hosts) against the lease's (1.5 s), and a drill's verdict and state must not follow
    it: a step stopped after its body ran is then in doubt every time, never sometimes
    written by the worker that resumed in time."""
    await worker.wait_paused(10.0)
    down = await env.target.restart_immediate()
    env.record.env_faults["pg_restart_immediate"] += 1
    env.record.extra.setdefault("server_down_seconds", []).append(round(down, 3))
    clock = FileClock(env.clock_file) if env.clock_file else None

    async def lapsed() -> bool:
        now = clock.sql_now() if clock else None
        return not await env.scalar(LIVE_LEASES, {"now": now})

    await env.until(lapsed, LEASE_LAPSE_SECONDS, "the stopped worker's lease to run out")
    worker.resume()


async def _wait_any_fired(
    env: DrillEnv,
    pins: list[plans.Pin],
    worker: DrillProcess,
    drilled: Drilled,
    answer: Callable[[], Awaitable[None]],
) -> list[plans.Pin]:
    """Until a pin fired, the worker is gone, or the instance settled without them
    (answering what it waits for meanwhile: a pin may be after an approval)."""
    found: list[plans.Pin] = []

    async def progress() -> bool:
        await answer()
        # Gone first, then the report: a fault's line is written before it acts, so a
        # worker seen gone has written it already.
        gone = not worker.alive or await _settled(env, drilled)
        found[:] = _fired(env, pins)
        return bool(found) or gone

    await env.until(progress, FIRE_SECONDS, f"a pin to fire ({', '.join(p.label for p in pins)})")
    return found


def _fired(env: DrillEnv, pins: list[plans.Pin] | tuple[plans.Pin, ...]) -> list[plans.Pin]:
    """The worker pins among ``pins`` that the drill's report shows fired."""
    report = BoundaryReport.read(env.process_env.report)
    worker = [p for p in pins if p.fault in plans.WORKER_FAULTS | {plans.RESTART_DATABASE}]
    return [p for p, f in zip(worker, _faults(worker), strict=True) if report.has_fired(f)]


async def _answer(
    env: DrillEnv, drilled: Drilled, signal_pins: dict[str, plans.Pin], fired: set[str]
) -> None:
    """Send each signal step its signal and approve each waiting approval (once each);
    a code-first run gets every signal its plan answers or pins at once (its inbox keeps
    it until the code waits)."""
    answered = env.record.extra.setdefault("answered", [])
    signals = [s.name for s in drilled.definition.steps if s.kind is StepKind.SIGNAL]
    if drilled.code:
        signals = [
            *drilled.plan.answers,
            *(s for s in signal_pins if s not in drilled.plan.answers),
        ]
    approvals = [s.name for s in drilled.definition.steps if s.kind is StepKind.APPROVAL]
    for name in signals:
        if name not in answered:
            pin = signal_pins.get(name)
            await _deliver(env, drilled.instance, name, drilled.plan.answers.get(name), pin)
            if pin is not None:
                fired.add(pin.label)
            answered.append(name)
    for name in approvals:
        payload = drilled.plan.answers.get(name)
        if name not in answered and await _approve(env, drilled.instance, name, payload):
            answered.append(name)


async def _deliver(
    env: DrillEnv, instance: str, step: str, payload: Any, pin: plans.Pin | None
) -> None:
    signal_id = f"{step}-1"
    if pin is None or pin.fault == plans.DUPLICATE_SIGNAL:
        times = DUPLICATE_DELIVERIES if pin is not None else 1
        for _ in range(times):
            await env.client.signal(instance, step, signal_id, payload)
            env.record.stats["signals_sent"] += 1
        if pin is not None:
            env.mark_fault(pin.fault)
        return
    fault = Fault(Boundary.BEFORE_SIGNAL_ACK, 1, Action(pin.fault), step)
    command = ["signal", "--instance", instance, "--step", step, "--signal-id", signal_id,
               "--payload", json.dumps(payload)]  # fmt: skip
    env.record.plan.append(fault)
    sender = spawn(env.process_env, f"{env.spec.id}-signal-{step}", command, plan=[fault])
    env.processes.append(sender)
    env.record.stats["signals_sent"] += 1
    await wait_fired(env, fault, sender)
    env.mark_fault(pin.fault)
    if fault.action is Action.PAUSE:
        await sender.wait_paused(10.0)
    else:
        await react(env, sender, fault.action)
    await env.client.signal(instance, step, signal_id, payload)  # the broker redelivers
    env.record.stats["signals_redelivered"] += 1
    sender.resume()


async def _approve(env: DrillEnv, instance: str, step: str, payload: Any) -> bool:
    """Approve ``step`` when the instance waits there (False when it does not yet)."""
    try:
        await env.client.command(
            instance, Command.APPROVE, ACTOR, "drill plan answer", f"approve-{step}",
            step=step, payload=payload,
        )  # fmt: skip
    except WaylineError:
        return False
    return True


async def _settled(env: DrillEnv, drilled: Drilled) -> bool:
    """No open work, and the instance ended or waits for an operator by design (one
    that continued as new: the last run of its chain)."""
    *_, state = await continuations.live_chain(env.store, drilled.instance)
    if drilled.machine:
        _pass_timer(env, state)
    elif drilled.code:
        await _pass_due_work(env)
    if await env.scalar(OPEN_WORK_COUNT):
        return False
    return state.status.terminal or bool(in_doubt(state, drilled.definition))


async def _pass_due_work(env: DrillEnv) -> None:
    """When nothing is due or in hand, move the drill's clock to the earliest work due
    later (a code-first run's sleep, or a wait's timeout): a drill does not wait hours."""
    async with env.store.connection() as conn:
        due, leased = await (await conn.execute(NEXT_DUE)).fetchone()
    clock = FileClock(env.clock_file)
    if due is not None and not leased and due > clock.now():
        clock.set(due)


def _pass_timer(env: DrillEnv, state: Instance) -> None:
    """Move the drill's clock to the timer the execution waits for (if it does)."""
    now = progress_of(state)
    due = now.timer_due_at
    if state.status is InstanceStatus.RUNNING and due and now.timer_fired_at is None:
        clock = FileClock(env.clock_file)
        if due > clock.now():
            clock.set(due)


def in_doubt(state: Instance, definition: Definition) -> list[str]:
    """Steps whose unknown outcome waits for an operator (``on_unknown: hold``)."""
    return [
        step
        for step, progress in state.activities.items()
        if progress.status is AttemptStatus.UNKNOWN
        and (definition.mode is Mode.CODE or plans.holds_on_unknown(definition, step))
    ]


async def _quiet_phase(env: DrillEnv, drilled: Drilled) -> None:
    """Answer what waits, until the instance settled; then the recovery time."""

    async def settled() -> bool:
        await _answer(env, drilled, {}, set())
        return await _settled(env, drilled)

    await env.until(settled, SETTLE_SECONDS, "the instance to end or wait for an operator")
    if env.fault_at is not None:
        env.record.recovery_seconds.append(time.monotonic() - env.fault_at)


def _why_unfired(pin: plans.Pin) -> str:
    if pin.boundary == Boundary.AFTER_CLAIM.value:
        return (
            "the step was never claimed (a step after an activity is usually handed on to "
            "the worker with that activity's outcome: eager dispatch)"
        )
    if pin.boundary == Boundary.IN_LEASE_RENEWAL.value:
        return (
            f"the step's lease was never renewed {counted(pin.hit, 'time')} while its handler "
            f"ran in one worker (a drill renews it every {plans.RENEWAL_EVERY_SECONDS:g} s: "
            f"a handler must run at least {plans.RENEWAL_SLOW_SECONDS:g} s to reach it)"
        )
    return f"the step never reached {pin.boundary} {counted(pin.hit, 'time')} in one worker"


def describe(state: Instance, definition: Definition) -> list[str]:
    """The instance's state as an operator would say it, one line per activity (a
    machine's: the state it is in)."""
    if definition.mode is Mode.MACHINE:
        return _describe_machine(state)
    doubt = set(in_doubt(state, definition))
    lines = [f"instance: {state.status.label.upper()}"]
    for step, progress in state.activities.items():
        line = f"{step}: {progress.status.label.upper()}"
        if step in doubt:
            line += " (in doubt), waiting for an operator"
        elif progress.status is AttemptStatus.UNKNOWN:
            line += " (in doubt), retried with the same key"
        if progress.attempt > 1:
            line += f" after {progress.attempt} attempts"
        lines.append(line)
    for step, progress in state.compensations.items():
        lines.append(f"{step} compensation: {progress.status.label.upper()}")
    return lines


def describe_chain(chain: list[Instance], definition: Definition) -> list[str]:
    """``describe`` of a drilled run and the successors it continued as new as: the
    chain's end first (the last run's), then the runs, then each run's steps under its
    id (a step's key is its own in each run). A chain of one run is said as ``describe``
    says it."""
    *before, last = chain
    lines = describe(last, definition)
    if not before:
        return lines
    runs = " -> ".join(run.instance_id for run in chain)
    steps = [f"{run.instance_id} {line}" for run in chain for line in describe(run, definition)[1:]]
    return [lines[0], f"continued as new {counted(len(before), 'time')}: {runs}", *steps]


def _describe_machine(state: Instance) -> list[str]:
    """The execution's end, and the state it is in (named first, as an activity's line
    is, so a studio shows it on that state's node)."""
    now = progress_of(state)
    code = f" ({state.failure_code})" if state.failure_code else ""
    failed = f", {counted(now.attempts, 'failed attempt')}" if now.attempts else ""
    return [
        f"instance: {state.status.label.upper()}{code}",
        f"{now.state}: CURRENT STATE after {counted(now.transitions, 'transition')}{failed}",
    ]


async def _result(env: DrillEnv, drilled: Drilled, fired: set[str]) -> None:
    """The plan's verdicts per pin, in ``record.extra["plan"]`` (see the module)."""
    fired |= {p.label for p in _fired(env, drilled.plan.pins)}  # fired as the instance ended
    instance = drilled.instance
    chain = await continuations.live_chain(env.store, instance)
    runs = [run.instance_id for run in chain]
    doubt = in_doubt(chain[-1], drilled.definition)
    if doubt:  # by design: not a lost instance (I1), an operator's to resolve
        env.record.acked.remove(instance)
    async with env.store.connection() as conn:
        calls = ENTRIES if drilled.plan.app else EFFECTS
        effects = await (await conn.execute(calls, (runs,))).fetchall()
        history = [
            (run, *event)
            for run in runs
            for event in await (await conn.execute(HISTORY, (run, MAX_HISTORY_EVENTS))).fetchall()
        ]
        writes = await (await conn.execute(MACHINE_WRITES, (instance,))).fetchall()
    per_key = [
        {"step": f"{s} compensation" if c else s, "key": k, "calls": n, "effects": applied}
        for s, c, k, n, applied in effects
    ]
    notes: list[dict[str, str]] = []
    if drilled.plan.app:
        per_key, notes = _team_calls(per_key, BODIES if drilled.code else HANDLERS)
    findings = [
        {
            "step": item["step"],
            "text": f"{item['step']}: its effect happened {item['effects']} times under one "
            f"idempotency key ({item['key']}): the activity is not idempotent, and a retry "
            "with the same key repeated it",
        }
        for item in per_key
        if (item["effects"] or 0) > 1
    ]
    if drilled.machine:
        per_key, findings = _machine_effects(drilled.definition, writes, history)
    findings += [
        {"step": p.step, "text": f"pin {p.label} never fired: {_why_unfired(p)}"}
        for p in drilled.plan.pins
        if p.label not in fired
    ]
    env.record.expectations += [f["text"] for f in findings]
    env.record.extra["plan"] = {
        "findings": findings,
        "notes": notes,
        "definition": drilled.ref,
        "pins": [
            {**p.as_json(), "label": p.label, "fired": p.label in fired} for p in drilled.plan.pins
        ],
        "state": describe_chain(chain, drilled.definition),
        "in_doubt": doubt,
        "recovery_seconds": round(env.record.recovery_seconds[-1], 2)
        if env.record.recovery_seconds
        else None,
        "effects": per_key,
        "server_down_seconds": env.record.extra.get("server_down_seconds", []),
        "history": [
            {"run": r, "seq": q, "kind": EventKind(k).name.lower(), "step": s or "", "attempt": a}
            for r, q, k, s, a in history
        ],
    }


@dataclass(frozen=True)
class TeamCode:
    """What of a team's own code ran under a key, in a plan's words."""

    ran: str
    key: str
    deduplicates: str


HANDLERS = TeamCode("your handler", "idempotency key", "the handler deduplicates by "
                    "request.idempotency_key")  # fmt: skip
BODIES = TeamCode("your step body", "step_id", "the body deduplicates by ctx.step_id")


def _team_calls(
    per_key: list[dict[str, Any]], code: TeamCode
) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """The runs of a team's own handlers (or step bodies) per key, with no count of
    effects (``None``): the drill records a run, but the effect is made in the team's
    own system, which it does not see. A key run more than once is a note, not a
    finding: idempotent code runs again under its key by design (a ``retry_same_key``
    redelivery, a stale owner still running), and only the team can say whether it
    deduplicated."""
    calls = [{**item, "effects": None, "by": code.ran} for item in per_key]
    notes = [
        {
            "step": item["step"],
            "text": f"{item['step']}: {code.ran} ran {item['calls']} times under one "
            f"{code.key} ({item['key']}); the drill does not see your system's effects: "
            f"unless {code.deduplicates}, its effect happened {item['calls']} times",
        }
        for item in calls
        if item["calls"] > 1
    ]
    return calls, notes


def _machine_effects(
    definition: Definition, writes: list[tuple[Any, ...]], history: list[tuple[Any, ...]]
) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """A machine's effects (its advances' committed rows, per transition, named by the
    state each advanced from in ``history``, rows of (run, sequence, kind, step,
    attempt)) and the findings among them: a transition whose write
    committed more than once."""
    entered = [step for _, _, kind, step, _ in history if kind == EventKind.STATE_ENTERED]
    left = [machines.manifest_of(definition).initial, *entered]
    per_key = [
        {
            "step": "compensation" if compensation else left[min(n, len(left)) - 1],
            "key": "compensation" if compensation else f"transition {n}",
            "calls": count,
            "effects": count,
        }
        for compensation, n, count in writes
    ]
    findings = [
        {
            "step": item["step"],
            "text": f"{item['step']}: its advance's write for {item['key']} committed "
            f"{item['effects']} times: an advance must commit once, with its state",
        }
        for item in per_key
        if item["effects"] > 1
    ]
    return per_key, findings
