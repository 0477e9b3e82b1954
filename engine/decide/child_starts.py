"""Starting a child instance: attempt recorded first, then created with its report.

The child lives in the same database, so whether it exists is never a guess: its start
transition has a fixed id (``<child>#start``). The parent records
``child_start_attempted`` first; the child's start then commits in the same transaction
as the parent's ``child_started``, fenced by the parent's lease, so the child exists
exactly when its parent knows it does, and the parent's sequence orders its creation
against a cancel or terminate: one committed first makes the report build again on a
parent that no longer runs, which records the start failed (``child-parent-not-running``)
instead of creating it; one committed after sees the child and ends it too
(``engine.decide.child_cascade``). A child id already taken by an unrelated instance is
a known, non-retryable start failure. So is a child version the parent's team did not
publish: the child would run under the parent's team, and another team's graph and
targets are not its to run (publishing refuses such a pin; this catches versions
published before that check, or written around it). A child created by a release that
committed it apart from its report is found and reported (``_whose``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from engine.decide import decisions, lifecycle
from engine.model.errors import InputRefused
from engine.model.events import EventKind
from engine.model.instance import ChildProgress, ChildStatus, Instance, InstanceStatus
from engine.model.transitions import Transition
from engine.modes import decide
from engine.store import catalog, reads
from engine.store.errors import ActiveExecutionExists, DuplicateTransition, InstanceExists
from engine.worker.leased_commits import (
    Context,
    Dispatch,
    LeaseHolder,
    Obsolete,
    Park,
    commit,
    dispatch_of,
    redelivered,
)

if TYPE_CHECKING:
    from engine.model.transitions import Draft
    from engine.store.leases import Lease

C = ChildStatus
S = InstanceStatus
CHILD_ID_TAKEN = "child-id-taken"
CHILD_DEFINITION_NOT_FOUND = "child-definition-not-found"
CHILD_INPUT_REFUSED = "child-input-refused"
CHILD_PARENT_BUSY = "child-parent-busy"
"""A child machine whose parent already has an active execution of it."""
CHILD_PARENT_NOT_RUNNING = "child-parent-not-running"
"""The parent stopped running (cancelled, failing) before its child was created."""


async def process_child(ctx: Context, current: LeaseHolder) -> None:
    """Start the child that ``current``'s work names (see the module)."""
    dispatch = dispatch_of(current.lease)
    if dispatch is None:
        await ctx.dead_letter(current.lease, "invalid-child-dispatch")
        return
    await _start_child(ctx, current.lease, dispatch)


async def _start_child(ctx: Context, lease: Lease, dispatch: Dispatch) -> None:
    def attempt(draft: Draft) -> None:
        state = draft.state
        child = state.children.get(dispatch.step)
        startable = (C.SCHEDULED, C.RETRY_WAITING)
        if redelivered(state, child, dispatch.attempt, C.START_RUNNING, startable):
            return  # the creation below is idempotent: look again
        decisions.start_child_attempt(draft, child, dispatch.attempt, dispatch.key)

    state = await commit(ctx, lease, attempt, finish=False)
    child = None if state is None else state.children.get(dispatch.step)
    if child is None or child.status is not C.START_RUNNING:
        return
    prepared = await _prepare(ctx, state, child)
    try:
        await _report(ctx, lease, dispatch.step, prepared)
    except ActiveExecutionExists:
        await _report(ctx, lease, dispatch.step, CHILD_PARENT_BUSY)
    except (InstanceExists, DuplicateTransition):  # the id was taken meanwhile
        await _report(ctx, lease, dispatch.step, await _whose(ctx, state, child))


async def _report(ctx: Context, lease: Lease, step: str, prepared: Transition | str | None) -> None:
    """Record how the child's start went: ``prepared`` is the child's start (committed
    in the same transaction as ``child_started``), a failure code, or None (the child
    exists already: ``_whose``). A cancel made meanwhile moves the parent's sequence,
    so this commit builds again on a parent that no longer runs and does not start the
    child."""

    def report(draft: Draft) -> None:
        current = draft.state.children.get(step)
        if draft.state.status.terminal or current is None or current.status is not C.START_RUNNING:
            raise Obsolete
        if draft.state.status is S.PAUSED:
            raise Park  # resumed, the start is made then
        code = prepared if isinstance(prepared, str) else None
        if code is None and draft.state.status is not S.RUNNING:
            code = CHILD_PARENT_NOT_RUNNING
        if code is None:
            decisions.record_child_start(draft, current, EventKind.CHILD_STARTED)
        else:
            decisions.record_child_start(
                draft, current, EventKind.CHILD_START_FAILED, code=code, retryable=False
            )

    def companions(draft: Draft) -> tuple[Transition, ...]:
        created = any(e.kind is EventKind.CHILD_STARTED for e in draft.events)
        return (prepared,) if created and isinstance(prepared, Transition) else ()

    await commit(ctx, lease, report, companions=companions)


async def _prepare(ctx: Context, parent: Instance, child: ChildProgress) -> Transition | str:
    """The child's start, ready to commit with its parent's news of it; a failure code
    when the pinned version is another team's or the child cannot start (its input
    refused)."""
    owner = await reads.get_instance(ctx.store, parent.instance_id)
    if not await catalog.owns(ctx.store, child.definition, owner.tenant_id):
        return CHILD_DEFINITION_NOT_FOUND
    registry = await ctx.registries.holding(child.definition)
    definition = registry.resolve(child.definition)
    now = max(ctx.store.now(), parent.updated_at)
    try:
        draft = lifecycle.start_draft(
            registry,
            definition,
            child.child_id,
            now,
            _value(child.input),
            (parent.instance_id, child.step),
            parent.trace_context,  # a child's spans join its parent's trace
        )
    except InputRefused:  # e.g. a machine's start without a parent: never startable
        return CHILD_INPUT_REFUSED
    decide(draft)
    return draft.build("start")


async def _whose(ctx: Context, parent: Instance, child: ChildProgress) -> str | None:
    """None when the instance with the child's id is this parent's child (its start
    committed before its report could be); ``CHILD_ID_TAKEN`` when another's."""
    registry = await ctx.registries.holding(child.definition)
    existing = await reads.inspect(ctx.store, registry, child.child_id)
    if (existing.parent_id, existing.parent_step) != (parent.instance_id, child.step):
        return CHILD_ID_TAKEN
    return None


def _value(text: str | None) -> object:
    return None if text is None else json.loads(text)
