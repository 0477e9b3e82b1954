"""Running a code step's body (or its compensation) as an attempt, on a worker.

The attempt is bracketed like every activity's (``engine.worker.processors``):
``attempt_started`` with the step's ``step_id`` as idempotency key is durable before the
body runs, and its outcome is recorded after. Here is only the middle: the body is a
closure of the code, so the worker reaches it again by replaying the code up to the
step (``driver.find_command``; recorded bodies never run on the way) and runs it with
``ctx.step_id`` set to the attempt's key.

What the body does decides the outcome, as "unknown means may have happened" says:
it returns (succeeded, with a JSON value), raises ``StepFailure`` (a known failure: the
effect did not happen, so a retry is a new effect with a new ``step_id``), or anything
else (unknown: raised some other exception, ran past its timeout, returned a value
that is not JSON or is too large to record, or the worker died meanwhile, which a
redelivery records). An unknown outcome is held for an operator unless the step says
``on_unknown="retry_same_key"``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from engine.model.canonical import canonical_json
from engine.model.instance import Instance
from engine.modes.code.driver import find_command, run_body, run_compensation
from engine.modes.code.failures import StepFailure, StepTimedOut
from engine.modes.code.fold import entries
from engine.modes.code.records import STEP_RESULT_LIMIT
from engine.worker.activities import (
    CRASH_CODE,
    Failed,
    Outcome,
    Succeeded,
    Unknown,
    not_json,
    too_large,
)

log = logging.getLogger("wayline.code")
STEP_FAILURE = "step-failure"
STEP_TIMED_OUT = "step-timed-out"
STEP_NOT_REACHED = "step-not-reached"
"""The code no longer reaches the step it started (it was changed under a running
attempt): the attempt's outcome is unknown, and the next decision says where."""
WORKFLOW_CODE_MISSING = "workflow-code-missing"
WORKFLOW_CODE_DIFFERS = "workflow-code-differs"
SPAWN_NOT_FOUND = "spawn-definition-not-found"
"""A decision's spawn names a workflow with no published version to start."""
SUCCESSOR_ID_TAKEN = "successor-id-taken"
"""A run continued as new whose successor's id another instance holds."""


async def run_effect(ctx: Any, state: Instance, key: str, compensation: bool) -> Outcome:
    """Run the started attempt of step ``key`` (its compensation when ``compensation``)."""
    flow = ctx.activities.workflow_for(state.definition.name, state.definition.version)
    if flow is None:  # the attempt is started: as for a missing handler, unknown
        return Unknown(WORKFLOW_CODE_MISSING)
    if flow.fingerprint != state.definition.fingerprint:
        return Unknown(WORKFLOW_CODE_DIFFERS)
    command = find_command(
        flow.function, state.value("input"), entries(state), run_id=state.instance_id, key=key
    )
    if command is None:
        return Unknown(STEP_NOT_REACHED)
    progress = state.activities[key]
    step_id = progress.idempotency_key
    if not compensation:
        step_id = ctx.hooks.step_id(step_id, progress.attempt)
    recorded = progress.result if compensation else None  # what a compensation undoes
    result = None if recorded is None else json.loads(recorded)
    await ctx.hooks.body_entering(state.instance_id, key, step_id, progress.attempt, compensation)
    try:
        if compensation:
            value = await run_compensation(command, result, step_id=step_id)
        else:
            value = await run_body(command, step_id=step_id)
    except StepFailure as failure:
        return Failed(STEP_FAILURE, True, {"message": str(failure)})
    except StepTimedOut as timed_out:
        return Unknown(STEP_TIMED_OUT, {"message": str(timed_out)})
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # the effect may have happened: unknown, never a failure
        log.warning("step %s of %s raised", key, state.instance_id, exc_info=True)
        return Unknown(CRASH_CODE, {"error": type(exc).__name__})
    try:
        text = canonical_json(value)
        size = len(text.encode())  # text with a lone surrogate is not UTF-8: ValueError
    except (TypeError, ValueError):
        return not_json(value, "step")
    # too large, the event could not be written: unknown, saying why (as for step lists)
    return too_large(size, STEP_RESULT_LIMIT, "step") or Succeeded(json.loads(text), text)
