"""Code workflows for the studio's page tests.

``pages-saga`` reserves, races ``paid`` against ``cancelled``, charges under its step
id and waits for ``shipped`` (so a second click on "paid" finds it still running).
``pages-switch`` takes the name of its first step from ``ROUTE``, which a test flips
while a run waits for ``go``: the same published code then reaches another step on
replay, as a deploy of different code would, and the run must park, not guess.
``pages-unknown`` charges, after ``go``, with a body that dies mid-effect: its outcome
is unknown and held for an operator, after which the run waits for ``done``.
``pages-raises`` raises from the workflow's own code: the run fails ``workflow-error``.
``pages-ghostly`` spawns a workflow nobody published: its decision is parked.
``pages-parcel`` spawns ``pages-leg`` (which waits for ``picked-up``) and waits for all
of that run and a ``received`` signal.
``pages-renewal`` continues as new until its input reaches 2, then returns it.
"""

from __future__ import annotations

from typing import Any

from engine import ActivityRegistry
from engine.modes.code.context import Context

app = ActivityRegistry()
ROUTE = {"first": "prepare"}


async def pages_saga(ctx: Context, order: dict[str, Any]) -> dict[str, Any]:
    await ctx.step("reserve", lambda: {"held": order["sku"]})
    _, which = await ctx.race("paid", "cancelled")
    charged = await ctx.step("charge", lambda: {"key": ctx.step_id})
    await ctx.wait_signal("shipped")
    return {"which": which, "charge": charged["key"]}


async def pages_switch(ctx: Context, _: Any) -> str:
    await ctx.step(ROUTE["first"], lambda: "prepared")
    await ctx.wait_signal("go")
    return await ctx.step("finish", lambda: "finished")


async def pages_unknown(ctx: Context, _: Any) -> Any:
    await ctx.wait_signal("go")
    charged = await ctx.step("charge", lost_connection)
    await ctx.wait_signal("done")
    return charged


async def pages_raises(ctx: Context, order: dict[str, Any]) -> None:
    raise LookupError(f"no such order: {order['id']}")


async def pages_ghostly(ctx: Context, _: Any) -> Any:
    payload, _ = await ctx.race(ctx.spawn("pages-ghost", None))
    return payload


async def pages_parcel(ctx: Context, _: Any) -> Any:
    leg = ctx.spawn("pages-leg", None)
    return await ctx.all(leg, "received")


async def pages_leg(ctx: Context, _: Any) -> Any:
    return await ctx.wait_signal("picked-up")


async def pages_renewal(ctx: Context, n: int) -> int:
    if n < 2:
        ctx.continue_as_new(n + 1)
    return n


def lost_connection() -> None:
    """A body whose effect may or may not have happened: not a declared failure."""
    raise ConnectionError("the gateway hung up after the request was sent")


app.workflow("pages-saga", version="1")(pages_saga)
app.workflow("pages-switch", version="1")(pages_switch)
app.workflow("pages-unknown", version="1")(pages_unknown)
app.workflow("pages-raises", version="1")(pages_raises)
app.workflow("pages-ghostly", version="1")(pages_ghostly)
app.workflow("pages-parcel", version="1")(pages_parcel)
app.workflow("pages-leg", version="1")(pages_leg)
app.workflow("pages-renewal", version="1")(pages_renewal)
