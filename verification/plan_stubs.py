"""The activities of a drill plan's worker: recorded stubs, or the team's own handlers.

A drill worker runs ``--app verification.plan_stubs:app``. The app is built when the
worker imports it, from the file ``WAYLINE_DRILL_PLAN_STUBS`` names (written by the
plan's drill, ``verification.plan_drills``): every activity and compensation target of
the drilled definition, each step's stub, and, when the plan names one, the team's app
(``MODULE:APP``) whose handlers then run instead of stubs.

Either way every handler marks its entry and records its effect in the drill's ledger
(``verification.effects``), so the invariant checker counts real effects per
idempotency key. A team's handler's effect is recorded once it returned (its own
system is what knows more).

A plan on a state machine (the file's ``machine``: its definition document) gets a
stubbed machine of the same name, function and states: its advance writes one row of
``drill_machine_writes`` in its transaction (as ``drill.machine`` does, so invariant
M1 holds the rows against history: one per committed transition, none without one),
then does what the state's stub says (``verification.plan_machines``).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable
from typing import Any

from engine import (
    ActivityFailure,
    ActivityRegistry,
    ActivityRequest,
    MachineCall,
    MachineState,
    UnknownOutcome,
    load_app,
    variant,
)
from engine.model.validation import parse_definition
from engine.modes.machines.declaration import Machine
from engine.modes.machines.field_types import FIELD_TYPES
from engine.modes.machines.manifest import MachineManifest
from engine.worker.activities import is_async_handler
from verification import plan_machines
from verification.effects import mark_entry, record_effect
from verification.plan import Stub

PLAN_STUBS_ENV = "WAYLINE_DRILL_PLAN_STUBS"
MACHINE_WRITE = """
INSERT INTO drill_machine_writes (execution, transitions, compensation, attempt, xact_id, pid)
SELECT %(execution)s, CASE WHEN %(compensation)s THEN 0 ELSE count(*) + 1 END,
       %(compensation)s, %(attempt)s, pg_current_xact_id(), %(pid)s
FROM drill_machine_writes WHERE execution = %(execution)s AND NOT compensation
"""
"""One row for the advance (numbered after the transitions whose rows committed: the
stub's state has no counter of its own) or for the compensation."""


class StubFailure(Exception):
    """A stubbed advance that fails, as its plan says."""


def stub_handler(stubs: dict[str, Stub]) -> Callable[[ActivityRequest], Any]:
    """One handler for every stubbed target: what it does is the request's step's stub
    (a compensation always succeeds)."""

    def handler(request: ActivityRequest) -> Any:
        mark_entry(request)
        stub = Stub() if request.compensation else stubs.get(request.step, Stub())
        if stub.behaviour == "fail" and (not stub.times or request.attempt <= stub.times):
            raise ActivityFailure("stubbed-failure", f"{request.step} fails in this drill plan")
        time.sleep(stub.seconds if stub.behaviour == "slow" else 0)
        record_effect(request, stub.idempotent)
        if stub.behaviour == "unknown":
            return UnknownOutcome("stubbed-unknown")
        return stub.result if stub.result is not None else {"stub": request.step}

    return handler


def recorded(handler: Callable[[ActivityRequest], Any]) -> Callable[[ActivityRequest], Any]:
    """A team's handler, its entry and effect recorded in the drill's ledger."""
    if is_async_handler(handler):

        async def run_async(request: ActivityRequest) -> Any:
            await asyncio.to_thread(mark_entry, request)
            result = await handler(request)
            await asyncio.to_thread(record_effect, request, seen=False)
            return result

        return run_async

    def run(request: ActivityRequest) -> Any:
        mark_entry(request)
        result = handler(request)
        record_effect(request, seen=False)
        return result

    return run


def stub_machine(definition: dict[str, Any], stubs: dict[str, Stub]) -> Machine:
    """A machine declared from ``definition`` (its document) whose advance is ``stubs``'
    (see the module); its states are classes made from the manifest's variants."""
    declared = parse_definition(definition)
    manifest = declared.manifest
    assert isinstance(manifest, MachineManifest)
    family = type(manifest.state, (MachineState,), {"__module__": __name__})
    states = {
        v.name: variant(
            type(
                v.name,
                (family,),
                {
                    "__module__": __name__,
                    "__annotations__": {f: FIELD_TYPES[t] for f, t in v.fields},
                },
            )
        )
        for v in manifest.variants
    }
    flow = Machine(declared, family)

    async def advance(call: MachineCall) -> MachineState:
        name = type(call.state).__name__
        stub = stubs.get(name, Stub())
        await _write(call, compensation=False)
        if stub.behaviour == "fail" and (not stub.times or call.attempt <= stub.times):
            raise StubFailure(f"{name} fails in this drill plan")
        await asyncio.sleep(stub.seconds if stub.behaviour == "slow" else 0)
        entered, fields = plan_machines.entered(manifest, name, stub.result)
        return states[entered](**fields)

    async def compensate(call: MachineCall) -> str:
        await _write(call, compensation=True)
        return "compensated by the drill plan's stub"

    flow.advance(advance)
    if manifest.compensation:
        flow.compensate(compensate)
    return flow


async def _write(call: MachineCall, compensation: bool) -> None:
    fields = {"execution": call.execution_id, "compensation": compensation}
    await call.execute(MACHINE_WRITE, {**fields, "attempt": call.attempt, "pid": os.getpid()})


def build(document: dict[str, Any]) -> ActivityRegistry:
    """The worker's app for ``document`` (``{"targets": [...], "stubs": {...}, "app"}``,
    or ``{"machine": {...}, "stubs": {...}}``)."""
    registry = ActivityRegistry()
    if document.get("machine"):
        stubs = {state: Stub(**raw) for state, raw in document.get("stubs", {}).items()}
        registry.machine(stub_machine(document["machine"], stubs))
        return registry
    if document.get("app"):
        team = load_app(document["app"])
        for target in team.targets:
            handler = team.get(target)
            if handler is not None:
                registry.register(target, recorded(handler))
        for flow in team.workflows:  # a code-first workflow's steps run in its code
            registry.workflow(flow.name, version=flow.version)(flow.function)
        return registry
    stubs = {step: Stub(**raw) for step, raw in document.get("stubs", {}).items()}
    handler = stub_handler(stubs)
    for target in document["targets"]:
        registry.register(target, handler)
    return registry


def _from_env() -> ActivityRegistry:
    path = os.environ.get(PLAN_STUBS_ENV)
    if not path:
        return ActivityRegistry()
    with open(path, encoding="utf-8") as handle:
        return build(json.load(handle))


app = _from_env()
