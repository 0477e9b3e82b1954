"""The code-first workflow the end-to-end crash test runs in real worker processes
(``wayline worker --app tests.e2e.code_app:app``).

``crashy`` charges once, deduplicating by ``ctx.step_id`` as a payment gateway would:
every run of the body appends a ``call`` line with its step_id to the effects file
(``WAYLINE_EFFECTS_FILE``), and an ``effect`` line only when no effect with that key
exists yet. After the effect it waits for the file its input names (``block``), which
is the window in which a test kills the worker.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from engine.modes.code.context import Context
from engine.worker.activities import ActivityRegistry
from examples.orders import EFFECTS_ENV

app = ActivityRegistry()
BLOCK_POLL_SECONDS = 0.02


def _append(record: dict[str, Any]) -> None:
    fd = os.open(os.environ[EFFECTS_ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(record, sort_keys=True) + "\n").encode())
    finally:
        os.close(fd)


def _effects() -> list[dict[str, Any]]:
    path = Path(os.environ[EFFECTS_ENV])
    lines = path.read_text().splitlines() if path.exists() else []
    return [json.loads(line) for line in lines if line]


def charge(key: str, block: str) -> str:
    _append({"event": "call", "key": key, "pid": os.getpid()})
    if not any(r["event"] == "effect" and r["key"] == key for r in _effects()):
        _append({"event": "effect", "key": key, "pid": os.getpid()})
    while not Path(block).exists():  # the crash window: the effect is done, unrecorded
        time.sleep(BLOCK_POLL_SECONDS)
    return key


@app.workflow("crashy", version="1")
async def crashy(ctx: Context, input: dict) -> str:
    return await ctx.step(
        "charge",
        lambda: charge(ctx.step_id, input["block"]),
        retries=3,
        backoff=0,
        on_unknown="retry_same_key",
    )
