"""The activities drills run: every effect goes to the ledger, behaviour is scripted.

Every handler marks its entry in the ledger before anything else (``mark_entry``).

Run a worker for them with ``--app verification.drill_app:app``. What a handler does is
scripted per step by the instance input, so one definition serves every drill:

- ``{"fail": {"reserve": 1}}``: the first attempt of ``reserve`` fails cleanly
  (retryable, *before* any effect, as a declined request would);
- ``{"slow": {"work": 0.8}}``: ``work`` takes 0.8 s in its thread (the lease is renewed
  meanwhile);
- ``{"block": {"finish": 3}}``: the first attempt of ``finish`` (an async handler)
  blocks the worker's event loop for 3 s, so its lease cannot be renewed (D5); it
  blocks once no transaction of the harness's fencing oracle is open
  (``lease_audit.until_no_wrapped_write``).

The app also runs the drills' state machine (``verification.drill_machine``) and their
code-first workflow (``verification.drill_code``).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from engine.worker.activities import ActivityFailure, ActivityRegistry, ActivityRequest
from verification import drill_code, lease_audit
from verification.drill_machine import flow as machine_flow
from verification.effects import mark_entry, record_effect

EFFECT_TARGET = "drill.effect"
LOOP_TARGET = "drill.loop"
UNDO_TARGET = "drill.undo"

app = ActivityRegistry()
app.machine(machine_flow)
app.workflow(drill_code.CODE, version=drill_code.VERSION)(drill_code.workflow)


def _script(request: ActivityRequest, name: str) -> Any:
    """The instance input's setting ``name`` for this step (None when absent)."""
    settings = request.input.get(name, {}) if isinstance(request.input, dict) else {}
    return settings.get(request.step) if isinstance(settings, dict) else None


def _fail_early(request: ActivityRequest) -> None:
    failures = _script(request, "fail") or 0
    if not request.compensation and request.attempt <= int(failures):
        raise ActivityFailure("scripted-failure", "failed on purpose before any effect")


def _result(request: ActivityRequest, applied: bool) -> dict[str, Any]:
    return {"key": request.idempotency_key, "applied": applied}


@app.activity(EFFECT_TARGET)
def effect(request: ActivityRequest) -> dict[str, Any]:
    """A synchronous external call (runs in a thread, so the event loop stays free)."""
    mark_entry(request)
    _fail_early(request)
    time.sleep(float(_script(request, "slow") or 0))
    return _result(request, record_effect(request))


@app.activity(LOOP_TARGET)
async def loop_effect(request: ActivityRequest) -> dict[str, Any]:
    """An async handler; scripted to block the event loop on its first attempt."""
    await asyncio.to_thread(mark_entry, request)
    _fail_early(request)
    if request.attempt == 1 and (block := float(_script(request, "block") or 0)):
        await lease_audit.until_no_wrapped_write()  # the harness's lock would outlive it
        time.sleep(block)  # deliberately blocks the loop
    return _result(request, await asyncio.to_thread(record_effect, request))


@app.activity(UNDO_TARGET)
def undo(request: ActivityRequest) -> dict[str, Any]:
    """A compensation: an effect of its own, keyed by the compensation attempt."""
    mark_entry(request)
    return _result(request, record_effect(request))
