"""A code-first workflow for the drill plan pages' tests, under a name of its own each
session (a name belongs to the team that first published it): it reserves, races
``paid`` against ``cancelled``, charges twice (so a pin may name ``charge.2``) and
waits for ``shipped``."""

from __future__ import annotations

import uuid
from typing import Any

from engine import ActivityRegistry
from engine.modes.code.context import Context

app = ActivityRegistry()
NAME = f"plan-saga-{uuid.uuid4().hex[:6]}"


async def plan_saga(ctx: Context, order: dict[str, Any]) -> dict[str, Any]:
    await ctx.step("reserve", lambda: {"held": order["sku"]})
    _, which = await ctx.race("paid", "cancelled")
    await ctx.step("charge", lambda: {"key": ctx.step_id})
    charged = await ctx.step("charge", lambda: {"key": ctx.step_id})
    await ctx.wait_signal("shipped")
    return {"which": which, "charge": charged["key"]}


app.workflow(NAME, version="1")(plan_saga)
