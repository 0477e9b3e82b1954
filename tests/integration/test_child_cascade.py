"""Cancelling or terminating a parent ends the children it started, in its transaction
(``engine.decide.child_cascade``), against a real PostgreSQL on a manual clock.

Before, only a code-first run's cancel reached its spawned runs: a step list's cancelled
order left its child step's instance running (its signal still awaited, its work still
due), and a terminated parent of either mode left every child running, though nothing
would ever read what they did."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from engine.api.client import Client
from engine.decide.child_cascade import child_command_id
from engine.decide.operator_actions import Action
from engine.model.description import describe_instance
from engine.model.instance import ChildStatus, InstanceStatus
from engine.model.limits import MAX_IDENTIFIER_LENGTH
from engine.model.validation import parse_definition
from engine.modes.code.context import Context as RunContext
from engine.store.store import Store
from engine.worker.activities import ActivityRegistry
from engine.worker.leased_commits import Context
from tests.integration.code_runs import settle

T0 = datetime(2031, 6, 7, 8, 0, tzinfo=UTC)
S = InstanceStatus

APP = ActivityRegistry()
APP.register("cascade.work", lambda request: {"done": request.step})


@APP.workflow("cascade-line", version="1")
async def line(ctx: RunContext, item: Any) -> Any:
    await ctx.wait_signal("go")
    return item


@APP.workflow("cascade-order", version="1")
async def order(ctx: RunContext, items: list) -> list:
    return await ctx.all(*[ctx.spawn("cascade-line", item) for item in items])


@pytest.fixture
def code_app() -> ActivityRegistry:
    return APP


def _steps(name: str, *steps: dict[str, Any]) -> Any:
    return parse_definition({"name": name, "version": "1", "steps": list(steps)})


def _activity(name: str) -> dict[str, Any]:
    return {"name": name, "kind": "activity", "target": "cascade.work", "timeout": "30s"}


CHILD = _steps(
    "cascade.child",
    _activity("pick"),
    {"name": "go", "kind": "signal", "target": "cascade.go", "timeout": "1h"},
)
PARENT = _steps(
    "cascade.parent",
    _activity("charge"),
    {
        "name": "line",
        "kind": "child",
        "target": CHILD.ref.name,
        "timeout": "1m",
        "child_definition": CHILD.ref.to_json(),
    },
    _activity("notify"),
)


async def _parent_waiting_on_its_child(client: Client, ctx: Context) -> None:
    for definition in (CHILD, PARENT):
        await client.publish(definition, "tests")
    await client.start(PARENT.ref.name, "order-1", {"sku": "mug"})
    await settle(ctx)
    state = await client.inspect("order-1")
    assert state.children["line"].status is ChildStatus.ACTIVE, state.children
    assert (await client.inspect("order-1/line")).status is S.RUNNING


async def _open_work(store: Store, prefix: str) -> list[str]:
    async with store.pool.connection() as conn:
        rows = await conn.execute(
            "SELECT work_id FROM work WHERE instance_id LIKE %s AND state IN (1, 2, 5)",
            (prefix + "%",),
        )
        return [row[0] for row in await rows.fetchall()]


async def test_cancelling_a_step_list_cancels_its_running_child(
    client: Client, ctx: Context, store: Store
) -> None:
    await _parent_waiting_on_its_child(client, ctx)
    command = await client.command("order-1", Action.CANCEL, "ann", "customer left")
    await settle(ctx)
    child = await client.inspect("order-1/line")
    assert child.status is S.CANCELLED, child.status
    (audit,) = child.audit
    assert (audit.action, audit.actor, audit.reason) == ("cancel", "ann", "customer left")
    assert audit.command_id == f"{command.audit[-1].command_id}/line"
    parent = await client.inspect("order-1")
    assert parent.status is S.CANCELLED
    assert await _open_work(store, "order-1") == []


async def test_terminating_a_step_list_terminates_its_running_child(
    client: Client, ctx: Context, store: Store
) -> None:
    await _parent_waiting_on_its_child(client, ctx)
    await client.command("order-1", Action.TERMINATE, "ann", "stuck")
    await settle(ctx)
    assert (await client.inspect("order-1")).status is S.TERMINATED
    child = await client.inspect("order-1/line")
    assert child.status is S.TERMINATED, child.status
    assert [a.action for a in child.audit] == ["terminate"]
    assert await _open_work(store, "order-1") == []


async def test_terminating_a_code_run_terminates_the_runs_it_spawned(
    client: Client, ctx: Context, store: Store
) -> None:
    run, _ = await client.start_run("cascade-order", ["a", "b"], id="o-1")
    await settle(ctx)
    spawned = [f"{run}/spawn.1", f"{run}/spawn.2"]
    assert [(await client.inspect(s)).status for s in spawned] == [S.RUNNING, S.RUNNING]
    await client.command(run, Action.TERMINATE, "ann", "stuck")
    await settle(ctx)
    assert [(await client.inspect(s)).status for s in spawned] == [S.TERMINATED] * 2
    assert await _open_work(store, run) == []


async def test_inspect_of_a_child_names_its_parent(client: Client, ctx: Context) -> None:
    """``wayline inspect`` of a child said nothing of its parent (the studio's page links
    it): from the child alone nobody could tell whose line item it was."""
    await _parent_waiting_on_its_child(client, ctx)
    lines = describe_instance(await client.inspect("order-1/line")).splitlines()
    assert "parent order-1 (its step line)" in lines, lines
    assert not any(
        line.startswith("parent")
        for line in describe_instance(await client.inspect("order-1")).splitlines()
    )


async def test_a_cancel_under_the_longest_command_id_still_cancels_the_children(
    client: Client, ctx: Context
) -> None:
    """A child's command id is the parent's with the step after it: a parent's command
    id of the longest length allowed made the child's too long, and the parent's cancel
    was refused as a whole."""
    await _parent_waiting_on_its_child(client, ctx)
    longest = "c" * MAX_IDENTIFIER_LENGTH
    await client.command("order-1", Action.CANCEL, "ann", "customer left", longest)
    await settle(ctx)
    child = await client.inspect("order-1/line")
    assert child.status is S.CANCELLED, child.status
    (audit,) = child.audit
    assert len(audit.command_id) <= MAX_IDENTIFIER_LENGTH
    assert audit.command_id == child_command_id(longest, "line"), "derived, so a repeat is one"
