"""Starting a child instance: attempt recorded first, creation idempotent, then reported.

The child lives in the same database, so whether it exists is never a guess: its start
transition has a fixed id (``<child>#start``), and a redelivered start simply looks
again. The parent records ``child_start_attempted`` before creating the child and
``child_started`` after; a child id already taken by an unrelated instance is a known,
non-retryable start failure. So is a child version the parent's team did not publish:
the child would run under the parent's team, and another team's graph and targets are
not its to run (publishing refuses such a pin; this catches versions published before
that check, or written around it).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from engine.decide import decisions, lifecycle
from engine.model.errors import InputRefused
from engine.model.events import EventKind
from engine.model.instance import ChildStatus
from engine.modes import decide
from engine.store import catalog, reads
from engine.store.errors import ActiveExecutionExists, DuplicateTransition, InstanceExists
from engine.worker.leased_commits import (
    Context,
    Dispatch,
    LeaseHolder,
    Obsolete,
    commit,
    dispatch_of,
    redelivered,
)

if TYPE_CHECKING:
    from engine.model.transitions import Draft
    from engine.store.leases import Lease

C = ChildStatus
CHILD_ID_TAKEN = "child-id-taken"
CHILD_DEFINITION_NOT_FOUND = "child-definition-not-found"
CHILD_INPUT_REFUSED = "child-input-refused"
CHILD_PARENT_BUSY = "child-parent-busy"
"""A child machine whose parent already has an active execution of it."""


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
    outcome = await _create(ctx, state, child)

    def report(draft: Draft) -> None:
        current = draft.state.children.get(dispatch.step)
        if current is None or current.status is not C.START_RUNNING:
            raise Obsolete
        if outcome is None:
            decisions.record_child_start(draft, current, EventKind.CHILD_STARTED)
        else:
            decisions.record_child_start(
                draft, current, EventKind.CHILD_START_FAILED, code=outcome, retryable=False
            )

    await commit(ctx, lease, report)


async def _create(ctx: Context, parent, child) -> str | None:
    """Create the child (or find it); a failure code when the id belongs to another, the
    pinned version to another team, or the child cannot start (its input refused, or a
    machine whose parent has an active execution already)."""
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
    try:
        await ctx.store.commit(draft.build("start"), owner.tenant_id)
    except ActiveExecutionExists:
        return CHILD_PARENT_BUSY
    except (InstanceExists, DuplicateTransition):
        existing = await reads.inspect(ctx.store, registry, child.child_id)
        if (existing.parent_id, existing.parent_step) != (parent.instance_id, child.step):
            return CHILD_ID_TAKEN
    return None


def _value(text: str | None) -> object:
    return None if text is None else json.loads(text)
