"""The code-first workflows the dead-letter command-line test runs in a worker process
(``wayline worker --app tests.e2e.ghost_app:app``).

``ghostly`` spawns ``ghost`` and waits for it to end. A test publishes ``ghostly``
alone first: its decision cannot start the unpublished ``ghost`` and becomes a dead
letter (``spawn-definition-not-found``), a real one made the way a deploy that forgot a
workflow makes it. Once ``ghost`` is published, retrying the dead letter lets the run
go on to the end.
"""

from __future__ import annotations

from typing import Any

from engine.modes.code.context import Context
from engine.worker.activities import ActivityRegistry

app = ActivityRegistry()
GHOSTLY = "ghostly"
GHOST_RESULT = "boo"


@app.workflow(GHOSTLY, version="1")
async def ghostly(ctx: Context, input: Any) -> Any:
    payload, _ = await ctx.race(ctx.spawn("ghost", None))
    return payload


@app.workflow("ghost", version="1")
async def ghost(ctx: Context, input: Any) -> str:
    return GHOST_RESULT
