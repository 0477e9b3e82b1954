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
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import time
from collections.abc import Callable
from typing import Any

from engine import ActivityFailure, ActivityRegistry, ActivityRequest, UnknownOutcome, load_app
from verification.effects import mark_entry, record_effect
from verification.plan import Stub

PLAN_STUBS_ENV = "WAYLINE_DRILL_PLAN_STUBS"


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
    if inspect.iscoroutinefunction(handler):

        async def run_async(request: ActivityRequest) -> Any:
            await asyncio.to_thread(mark_entry, request)
            result = await handler(request)
            await asyncio.to_thread(record_effect, request)
            return result

        return run_async

    def run(request: ActivityRequest) -> Any:
        mark_entry(request)
        result = handler(request)
        record_effect(request)
        return result

    return run


def build(document: dict[str, Any]) -> ActivityRegistry:
    """The worker's app for ``document`` (``{"targets": [...], "stubs": {...}, "app"}``)."""
    registry = ActivityRegistry()
    if document.get("app"):
        team = load_app(document["app"])
        for target in team.targets:
            handler = team.get(target)
            if handler is not None:
                registry.register(target, recorded(handler))
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
