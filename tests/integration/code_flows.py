"""Small code-first workflows for the engine's integration tests, each showing one rule.

Module state (``CALLS``, ``SCRIPT``) lets a test script a body's behaviour and count
how often it ran, with the ``step_id`` it ran under: the in-process stand-in for an
external system.
"""

from __future__ import annotations

import time
from typing import Any

from engine.modes.code.context import Context
from engine.modes.code.failures import StepFailure
from engine.modes.code.records import STEP_RESULT_LIMIT
from engine.worker.activities import ActivityRegistry

app = ActivityRegistry()
CALLS: list[tuple[str, str]] = []
"""(what ran, the step_id or compensation it ran under), in order."""
SCRIPT: dict[str, Any] = {}
"""``raise``: how many runs of ``flaky`` raise RuntimeError (an unknown outcome);
``fail``: how many runs of ``pay`` fail (a known failure); ``second``: the name
``diverging`` gives its second step (changed to diverge)."""


def reset() -> None:
    CALLS.clear()
    SCRIPT.clear()
    SCRIPT.update({"raise": 0, "second": "second", "fail": 0})


def ran(what: str, ctx: Context) -> str:
    CALLS.append((what, ctx.step_id))
    return what


def fails_first(what: str, ctx: Context, times: str, error: Exception) -> None:
    """Record a run of ``what``; its first ``SCRIPT[times]`` runs raise ``error``."""
    ran(what, ctx)
    if sum(1 for done, _ in CALLS if done == what) <= SCRIPT[times]:
        raise error


def flaky(ctx: Context) -> str:
    fails_first("flaky", ctx, "raise", RuntimeError("connection reset"))
    return "ok"


@app.workflow("unknowns", version="1")
async def unknowns(ctx: Context, input: dict) -> dict:
    """One step whose body may raise (unknown): held, or retried with the same key."""
    value = await ctx.step(
        "flaky", lambda: flaky(ctx), retries=3, on_unknown=input.get("on_unknown", "hold")
    )
    return {"flaky": value}


@app.workflow("diverging", version="1")
async def diverging(ctx: Context, input: Any) -> str:
    """Its second step's name comes from outside the function (``SCRIPT``): changing it
    keeps the fingerprint and diverges from the journal."""
    await ctx.step("first", lambda: ran("first", ctx))
    await ctx.step(SCRIPT["second"], lambda: ran("second", ctx))
    await ctx.wait_signal("go")
    return "done"


def failing(ctx: Context) -> str:
    fails_first("pay", ctx, "fail", StepFailure("declined"))
    return "paid"


@app.workflow("compensating", version="1")
async def compensating(ctx: Context, input: Any) -> str:
    """Two compensated steps, then one that fails for good (its retries are known
    failures): the run unwinds both in reverse order, then fails."""
    await ctx.step("book", lambda: ran("book", ctx), compensate=lambda _: ran("unbook", ctx))
    await ctx.step("hold", lambda: ran("hold", ctx), compensate=lambda _: ran("unhold", ctx))
    await ctx.step("pay", lambda: failing(ctx), retries=2, backoff=0)
    return "done"


@app.workflow("parent", version="1")
async def parent(ctx: Context, input: Any) -> Any:
    """Spawns a child and waits for it (or for ``stop``); cancelling it cancels both."""
    await ctx.step("book", lambda: ran("book", ctx), compensate=lambda _: ran("unbook", ctx))
    child = ctx.spawn("child", {"from": ctx.run_id})
    payload, which = await ctx.race(child, "stop")
    return [payload, which if isinstance(which, str) else which.key]


@app.workflow("ghostly", version="1")
async def ghostly(ctx: Context, input: Any) -> Any:
    """Spawns a workflow nobody published: its decision is parked as a dead letter."""
    payload, _ = await ctx.race(ctx.spawn("ghost", None))
    return payload


@app.workflow("top", version="1")
async def top(ctx: Context, input: Any) -> Any:
    """Spawns ``parent`` (which spawns ``child``) and waits for it, or for ``give-up``."""
    spawned = ctx.spawn("parent", None)
    payload, _ = await ctx.race(spawned, "give-up", timeout="1h")
    return payload


@app.workflow("child", version="1")
async def child(ctx: Context, input: Any) -> Any:
    return await ctx.wait_signal("never")


@app.workflow("clocks", version="1")
async def clocks(ctx: Context, input: Any) -> list:
    """Journaled values and an all whose entries time out in turn."""
    first = ctx.now().isoformat()
    pick = ctx.random()
    ident = str(ctx.uuid4())
    got = await ctx.all("a", "b", timeout="10s")
    return [first, pick, ident, got]


@app.workflow("clock-reader", version="1")
async def clock_reader(ctx: Context, input: Any) -> float:
    """Reads the wall clock in workflow code: replay could not reproduce it."""
    await ctx.step("first", lambda: ran("first", ctx))
    return time.time()


@app.workflow("slow", version="1")
async def slow(ctx: Context, input: Any) -> None:
    """A body that outlives its step's timeout."""
    await ctx.step("slow", lambda: time.sleep(0.3), timeout=0.05)


@app.workflow("oversized", version="1")
async def oversized(ctx: Context, input: Any) -> str:
    """A body whose result is one byte past what a step's outcome may record."""
    return await ctx.step("big", lambda: big(ctx))


def big(ctx: Context) -> str:
    ran("big", ctx)
    return "x" * (STEP_RESULT_LIMIT - 1)  # with its quotes, STEP_RESULT_LIMIT + 1 bytes


@app.workflow("unpaired", version="1")
async def unpaired(ctx: Context, input: Any) -> str:
    """A body whose result holds a lone surrogate: JSON encodes it, UTF-8 cannot."""
    return await ctx.step("odd", lambda: odd(ctx))


def odd(ctx: Context) -> str:
    ran("odd", ctx)
    return "\ud800"


@app.workflow("many", version="1")
async def many(ctx: Context, input: Any) -> list:
    """More commands and wait entries than one transition may record."""
    picks = [ctx.random() for _ in range(100)]
    await ctx.wait_signal("go")
    got = await ctx.all(*[f"s{number}" for number in range(60)])
    return [len(picks), got]


reset()
