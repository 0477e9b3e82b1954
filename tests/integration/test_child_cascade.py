"""Cancelling or terminating a parent ends the children it started, in its transaction
(``engine.decide.child_cascade``), against a real PostgreSQL on a manual clock.

Before, only a code-first run's cancel reached its spawned runs: a step list's cancelled
order left its child step's instance running (its signal still awaited, its work still
due), and a terminated parent of either mode left every child running, though nothing
would ever read what they did."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

import pytest

from engine.api.client import Client
from engine.cli import main as cli_main
from engine.decide.child_cascade import child_command_id
from engine.decide.child_starts import CHILD_ID_TAKEN, CHILD_PARENT_NOT_RUNNING
from engine.decide.operator_actions import Action
from engine.model.definitions import DefinitionRef
from engine.model.description import describe_instance
from engine.model.instance import ChildStatus, InstanceStatus
from engine.model.limits import MAX_IDENTIFIER_LENGTH
from engine.model.registry import Registry
from engine.model.validation import parse_definition
from engine.modes.code.context import Context as RunContext
from engine.store import reads
from engine.store.errors import InstanceNotFound
from engine.store.store import Store
from engine.worker.activities import ActivityRegistry
from engine.worker.instance_cache import RegistrySource
from engine.worker.leased_commits import Context
from tests.integration.code_runs import settle

T0 = datetime(2031, 6, 7, 8, 0, tzinfo=UTC)
S = InstanceStatus

APP = ActivityRegistry()
APP.register("cascade.work", lambda request: {"done": request.step})


@APP.workflow("cascade-line", version="1")
async def line(ctx: RunContext, item: Any) -> Any:
    await ctx.wait_signal("go")
    if item == "bad":
        raise ValueError("no such item")
    return item


@APP.workflow("cascade-order", version="1")
async def order(ctx: RunContext, items: list) -> list:
    return await ctx.all(*[ctx.spawn("cascade-line", item) for item in items])


@APP.workflow("cascade-errand", version="1")
async def errand(ctx: RunContext, item: Any) -> Any:
    await ctx.race(ctx.spawn("cascade-line", item), "enough")  # whichever comes first
    return item


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
LINE = {
    "name": "line",
    "kind": "child",
    "target": CHILD.ref.name,
    "timeout": "1m",
    "child_definition": CHILD.ref.to_json(),
}
PARENT = _steps("cascade.parent", _activity("charge"), LINE, _activity("notify"))


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


class _CommandWhileCreating(RegistrySource):
    """The catalog a worker reads while it creates a child, and the moment an operator
    gives the parent a command (cancel, terminate, pause): after the worker recorded its
    start attempt, before the child's creation commits."""

    def __init__(self, store: Store, client: Client, action: Action) -> None:
        super().__init__(store)
        self.client, self.action, self.fired = client, action, False

    async def holding(self, ref: DefinitionRef) -> Registry:
        if ref == CHILD.ref and not self.fired:
            self.fired = True
            await self.client.command("order-1", self.action, "ann", "customer left")
        return await super().holding(ref)


async def _commanded_while_creating(
    client: Client, store: Store, action: Action, parent: Any = PARENT
) -> Context:
    """Start ``parent``'s ``order-1`` and run it while ``action`` lands as its worker
    creates the child; no child exists afterwards. The worker's context, to go on with."""
    for definition in (CHILD, parent):
        await client.publish(definition, "tests")
    await client.start(parent.ref.name, "order-1", {"sku": "mug"})
    registries = _CommandWhileCreating(store, client, action)
    ctx = Context(store, APP, registries)
    await settle(ctx)
    assert registries.fired, "the worker never created the child"
    with pytest.raises(InstanceNotFound):
        await client.inspect("order-1/line")
    return ctx


@pytest.mark.parametrize("action", [Action.CANCEL, Action.TERMINATE])
async def test_a_parent_ended_while_its_child_is_being_created_never_starts_it(
    client: Client, store: Store, action: Action
) -> None:
    """The child's creation committed apart from the parent's news of it, so a parent
    ended between its worker's start attempt and the creation (the cascade could not see
    a child that did not exist yet) left the child running for an order that no longer
    existed. The creation now commits with ``child_started`` or not at all."""
    await _commanded_while_creating(client, store, action)
    parent = await client.inspect("order-1")
    assert parent.status.terminal, parent.status
    line = parent.children["line"]
    assert line.status is not ChildStatus.ACTIVE, line
    assert await _open_work(store, "order-1") == []


async def test_a_child_whose_parent_paused_while_creating_it_starts_on_resume(
    client: Client, store: Store
) -> None:
    """A pause between the start attempt and the creation holds the creation back (a
    paused parent makes no progress); resumed, the same attempt creates the child."""
    ctx = await _commanded_while_creating(client, store, Action.PAUSE)
    await client.command("order-1", Action.RESUME, "ann", "go on")
    await settle(ctx)
    line = (await client.inspect("order-1")).children["line"]
    assert (line.status, line.attempt) == (ChildStatus.ACTIVE, 1), line
    assert (await client.inspect("order-1/line")).status is S.RUNNING


async def test_a_parent_unwinding_when_its_child_would_be_created_records_it_not_started(
    client: Client, store: Store
) -> None:
    """A cancel that unwinds (its charge is refunded) leaves the parent cancelling, not
    ended, while its worker creates the child: the start is recorded failed, known
    absent (``child-parent-not-running``), and the parent finishes its unwinding."""
    refunded = _steps(
        "cascade.refunded",
        {**_activity("charge"), "compensation": {"target": "cascade.work", "timeout": "30s"}},
        LINE,
    )
    await _commanded_while_creating(client, store, Action.CANCEL, refunded)
    parent = await client.inspect("order-1")
    assert parent.status is S.CANCELLED, parent.status
    line = parent.children["line"]
    assert (line.status, line.code) == (ChildStatus.START_FAILED, CHILD_PARENT_NOT_RUNNING)
    assert await _open_work(store, "order-1") == []


async def _described(client: Client, instance_id: str) -> list[str]:
    """``wayline inspect``'s lines for the instance, its children read as it reads them."""
    state = await client.inspect(instance_id)
    children = await reads.fan_out(client.store, state)
    return describe_instance(state, fan_out=children).splitlines()


@pytest.mark.parametrize(
    ("action", "ended"), [(Action.CANCEL, "cancelled"), (Action.TERMINATE, "terminated")]
)
async def test_a_parent_ended_with_its_child_says_the_child_ended_with_it(
    client: Client, ctx: Context, action: Action, ended: str
) -> None:
    """The cascade ends a parent's children in its own transaction, yet ``inspect`` of
    the parent called the child "no longer awaited (the instance was cancelled)", as if
    it ran on unwatched: it says what happened to it, and counts it."""
    await _parent_waiting_on_its_child(client, ctx)
    await client.command("order-1", action, "ann", "customer left")
    await settle(ctx)
    lines = await _described(client, "order-1")
    assert f"  child line: {ended} with its parent instance order-1/line" in lines, lines
    assert f"  children: 1 of 1 done (1 {ended})" in lines, lines
    alone = describe_instance(await client.inspect("order-1")).splitlines()
    assert f"  child line: {ended} with its parent instance order-1/line" in alone, (
        "the parent's history alone says so too (the studio's steps table reads it)"
    )


async def test_a_fan_out_is_counted_by_outcome(client: Client, ctx: Context) -> None:
    """Three runs spawned, one completed, one failed, one still running: the count says
    where the fan-out got, by outcome."""
    run, _ = await client.start_run("cascade-order", ["a", "bad", "c"], id="o-1")
    await settle(ctx)
    for n in (1, 2):
        await client.signal(f"{run}/spawn.{n}", "go", f"go-{n}", None)
        await settle(ctx)
    lines = await _described(client, run)
    assert "  children: 2 of 3 done (1 failed), 1 running" in lines, lines
    assert f"  child spawn.1: completed instance {run}/spawn.1" in lines, lines
    assert f"  child spawn.2: failed instance {run}/spawn.2" in lines, lines
    assert f"  child spawn.3: running instance {run}/spawn.3" in lines, lines


async def test_a_run_that_returned_before_its_spawned_run_ended_no_longer_awaits_it(
    client: Client, ctx: Context
) -> None:
    """A run may return before a run it spawned ends (a race another branch won);
    nothing cancels that run, so "no longer awaited" is what is true of it, with where
    it is now."""
    run, _ = await client.start_run("cascade-errand", "x", id="e-1")
    await settle(ctx)
    await client.signal(run, "enough", "enough-1", None)
    await settle(ctx)
    assert (await client.inspect(run)).status is S.COMPLETED
    lines = await _described(client, run)
    said = "no longer awaited (the instance completed), now running"
    assert f"  child spawn.1: {said} instance {run}/spawn.1" in lines, lines
    assert "  children: 0 of 1 done, 1 running" in lines, lines


async def test_inspect_on_the_command_line_counts_the_children(
    client: Client, ctx: Context, pg_dsn: str, schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``wayline inspect`` reads the children as the studio does: the count, each
    child's end, and the same count in its JSON."""
    await _parent_waiting_on_its_child(client, ctx)
    await client.command("order-1", Action.TERMINATE, "ann", "stuck")
    store_options = ["--dsn", pg_dsn, "--schema", schema]
    assert await asyncio.to_thread(cli_main.main, ["inspect", "order-1", *store_options]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "  children: 1 of 1 done (1 terminated)" in lines, lines
    assert "  child line: terminated with its parent instance order-1/line" in lines, lines
    argv = ["inspect", "order-1", "--json", *store_options]
    assert await asyncio.to_thread(cli_main.main, argv) == 0
    progress = json.loads(capsys.readouterr().out)["children_progress"]
    assert progress == {
        "total": 1,
        "done": 1,
        "counts": {"terminated": 1},
        "summary": "children: 1 of 1 done (1 terminated)",
    }


async def test_a_child_id_another_instance_holds_fails_the_start_and_creates_nothing(
    client: Client, ctx: Context
) -> None:
    """The child's start commits with its parent's report: an id already taken by an
    instance that is not this parent's child fails that transaction, and the start is
    recorded failed (``child-id-taken``), known absent, the other instance untouched."""
    for definition in (CHILD, PARENT):
        await client.publish(definition, "tests")
    await client.start(CHILD.ref.name, "order-1/line", {"sku": "someone else's"})
    await client.start(PARENT.ref.name, "order-1", {"sku": "mug"})
    await settle(ctx)
    line = (await client.inspect("order-1")).children["line"]
    assert (line.status, line.code) == (ChildStatus.START_FAILED, CHILD_ID_TAKEN), line
    other = await client.inspect("order-1/line")
    assert (other.parent_id, other.value("input")) == ("", {"sku": "someone else's"})
