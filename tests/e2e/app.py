"""The activity registry end-to-end tests run in real worker processes.

``wayline worker --app tests.e2e.app:app`` loads it. Every call of a handler appends
one ``call`` line to the JSON-lines file named by ``WAYLINE_EFFECTS_FILE`` (the same
variable the order example uses) with the idempotency key, attempt, wall-clock time
and process id, so a test can count real effects apart from what history says, and
spot a handler that ran twice. A handler cancelled mid-call (its lease was lost)
appends a ``cancelled`` line as well.

Tests script behaviour per step through the instance input, which every handler
receives: ``{"script": {"charge": {"fail": 2}}}`` (see ``Behaviour``); a compensation
reads the entry named ``undo_key(step)``. Without a script a handler succeeds.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from engine.worker.activities import (
    ActivityFailure,
    ActivityRegistry,
    ActivityRequest,
    UnknownOutcome,
)
from examples.orders import EFFECTS_ENV
from verification.effects import attempt_fields

ACTIVITY_TARGET = "e2e.act"
UNDO_TARGET = "e2e.undo"
SCRIPTED_FAILURE = "scripted-failure"
SCRIPTED_TERMINAL = "scripted-terminal"
SCRIPTED_UNKNOWN = "scripted-unknown"
BLOCK_POLL_SECONDS = 0.02

app = ActivityRegistry()


@dataclass(frozen=True)
class Behaviour:
    """How one step's handler behaves, in the order the checks apply."""

    fail: int = 0
    """Fail this many attempts (attempt number <= fail) retryably, then go on."""
    terminal: bool = False
    """Fail non-retryably (the effect did not happen)."""
    detail: int = 0
    """With ``terminal``: the failure carries a detail of this many characters."""
    block: str = ""
    """After recording the effect, wait until this file exists (a crash window)."""
    sleep: float = 0.0
    """After recording the effect, sleep this long (past the timeout: unknown)."""
    unknown: bool = False
    """Return UnknownOutcome: the handler cannot tell whether its effect happened."""
    no_code: bool = False
    """Raise ActivityFailure with an empty code, which the engine refuses where it is built."""


def undo_key(step: str) -> str:
    """The script entry of ``step``'s compensation (':' cannot occur in a step name)."""
    return f"undo:{step}"


def script(behaviours: dict[str, Behaviour], **extra: Any) -> dict[str, Any]:
    """An instance input that scripts the named steps (and carries ``extra`` fields)."""
    return {"script": {step: asdict(b) for step, b in behaviours.items()}, **extra}


def _behaviour(request: ActivityRequest) -> Behaviour:
    document = request.input if isinstance(request.input, dict) else {}
    key = undo_key(request.step) if request.compensation else request.step
    return Behaviour(**document.get("script", {}).get(key, {}))


def _append(record: dict[str, Any]) -> None:
    """Append one line; O_APPEND keeps lines of concurrent processes whole."""
    path = os.environ.get(EFFECTS_ENV)
    if not path:
        return
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(record, sort_keys=True) + "\n").encode())
    finally:
        os.close(fd)


def _record(request: ActivityRequest, event: str, outcome: str) -> None:
    _append({"event": event, "outcome": outcome, **attempt_fields(request), "at": time.time()})


async def scripted(request: ActivityRequest) -> Any:
    """Do what the instance input scripts for this step; async so it can be cancelled."""
    behaviour = _behaviour(request)
    if request.attempt <= behaviour.fail:
        _record(request, "call", "failed")
        raise ActivityFailure(SCRIPTED_FAILURE, f"{request.step} fails attempt {request.attempt}")
    if behaviour.no_code:
        _record(request, "call", "failed")
        raise ActivityFailure("", f"{request.step} gives no code")
    if behaviour.terminal:
        _record(request, "call", "failed")
        details = {"log": "x" * behaviour.detail} if behaviour.detail else None
        raise ActivityFailure(
            SCRIPTED_TERMINAL, f"{request.step} cannot succeed", retryable=False, details=details
        )
    _record(request, "call", "effect")
    try:
        while behaviour.block and not Path(behaviour.block).exists():
            await asyncio.sleep(BLOCK_POLL_SECONDS)
        await asyncio.sleep(behaviour.sleep)
    except asyncio.CancelledError:
        _record(request, "cancelled", "effect")
        raise
    if behaviour.unknown:
        return UnknownOutcome(SCRIPTED_UNKNOWN)
    return {"step": request.step, "attempt": request.attempt, "key": request.idempotency_key}


app.register(ACTIVITY_TARGET, scripted)
app.register(UNDO_TARGET, scripted)


def read_records(path: Path) -> list[dict[str, Any]]:
    """Every line of an effects file (none when no handler ran yet)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]
