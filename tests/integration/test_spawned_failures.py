"""A spawned run that does not complete raises into the code that awaits it
(``ctx.all``, ``ctx.race``), against a real PostgreSQL on a manual clock.

Before, ``ctx.all`` gave ``None`` for a spawned run that failed, was cancelled or was
terminated, exactly as for a timeout, and ``ctx.race`` gave ``(None, handle)``: an order
whose line item's run failed completed as if every line had been packed, and nothing in
its result or history said a line was missing."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from engine.api.client import Client
from engine.decide.operator_actions import Action
from engine.model.instance import InstanceStatus
from engine.modes.code.context import Context as RunContext
from engine.modes.code.failures import StepFailed, StepFailure
from engine.worker.activities import ActivityRegistry
from engine.worker.leased_commits import Context
from tests.integration.code_runs import settle

T0 = datetime(2031, 6, 7, 8, 0, tzinfo=UTC)
S = InstanceStatus
APP = ActivityRegistry()


def _pack(item: dict[str, Any]) -> str:
    if item.get("broken"):
        raise StepFailure("no stock")
    return item["sku"]


@APP.workflow("fan-line", version="1")
async def line(ctx: RunContext, item: dict) -> str:
    packed = await ctx.step("pack", lambda: _pack(item))
    if item.get("wait"):
        await ctx.wait_signal("go")
    return packed


@APP.workflow("fan-order", version="1")
async def order(ctx: RunContext, items: list) -> Any:
    return await ctx.all(*[ctx.spawn("fan-line", item) for item in items])


@APP.workflow("fan-careful", version="1")
async def careful(ctx: RunContext, items: list) -> Any:
    try:
        return await ctx.all(*[ctx.spawn("fan-line", item) for item in items])
    except StepFailed as failed:
        return {"short": str(failed)}


@APP.workflow("fan-first", version="1")
async def first(ctx: RunContext, items: list) -> Any:
    payload, _ = await ctx.race(*[ctx.spawn("fan-line", item) for item in items])
    return payload


@pytest.fixture
def code_app() -> ActivityRegistry:
    return APP


async def test_an_all_over_a_failed_spawned_run_fails_the_order(
    client: Client, ctx: Context
) -> None:
    run, _ = await client.start_run(
        "fan-order", [{"sku": "a"}, {"sku": "b", "broken": True}], id="o-1"
    )
    await settle(ctx)
    state = await client.inspect(run)
    assert state.status is S.FAILED, (state.status, state.result)
    assert state.failure_code == "step-failed"
    assert "spawned run 'spawn.2' (fan-line) did not complete: child-failed" in (state.result or "")


async def test_the_code_may_catch_a_spawned_run_that_was_cancelled(
    client: Client, ctx: Context
) -> None:
    run, _ = await client.start_run(
        "fan-careful", [{"sku": "a"}, {"sku": "b", "wait": True}], id="o-1"
    )
    await settle(ctx)
    await client.command(f"{run}/spawn.2", Action.CANCEL, "ann", "line withdrawn")
    await settle(ctx)
    state = await client.inspect(run)
    assert state.status is S.COMPLETED, state.status
    assert state.value("result") == {
        "short": "spawned run 'spawn.2' (fan-line) did not complete: child-cancelled"
    }


async def test_a_race_won_by_a_failed_spawned_run_raises(client: Client, ctx: Context) -> None:
    run, _ = await client.start_run(
        "fan-first", [{"sku": "a", "broken": True}, {"sku": "b", "wait": True}], id="o-1"
    )
    await settle(ctx)
    state = await client.inspect(run)
    assert state.status is S.FAILED, (state.status, state.result)
    assert "spawned run 'spawn.1' (fan-line) did not complete: child-failed" in (state.result or "")
