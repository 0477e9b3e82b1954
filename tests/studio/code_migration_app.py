"""A code workflow with two versions, for the studio's code-run migration tests: each
waits for ``go``, so a run started on version 1 replays against version 2's code."""

from __future__ import annotations

from typing import Any

from engine import ActivityRegistry
from engine.modes.code.context import Context

app = ActivityRegistry()


async def moving_v1(ctx: Context, _: Any) -> str:
    await ctx.wait_signal("go")
    return "moved"


async def moving_v2(ctx: Context, _: Any) -> str:
    await ctx.wait_signal("go")
    return "moved, on version 2"


app.workflow("moving", version="1")(moving_v1)
app.workflow("moving", version="2")(moving_v2)
