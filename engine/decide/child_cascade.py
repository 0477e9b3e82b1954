"""Cancelling or terminating an instance does the same to every child it started, in
the same transaction.

The seed says cancel propagates to every run a run spawned, and a parent's end is the
end of what it asked its children to do: a step list's child step and a code-first
run's ``ctx.spawn`` alike. When a transition asks for an instance's cancellation (an
operator's audited ``cancel``), each child still going gets its own audited cancel; when
it terminates the instance (``terminate``: stop now, undo nothing), each child still
going is terminated too. Each child's command is by the same actor with the same reason
(its command id derived from the parent's: ``<id>/<step>``), with the decision that
follows it (its own unwinding, and its own children's cancellation or termination,
recursively). All of them commit with the parent's transition or none does. A child
that ends at once is reported to the parent in the parent's own transition
(``child_failed``), unless the parent has ended.

Without this a cancelled or terminated order left its children running: a line item's
child went on picking, waiting and charging for an order that no longer existed, and
nothing but its own page said so.

A child whose start is still to come never starts: its start is obsolete once the parent
no longer runs. One whose start a worker is making at this moment (attempted, not yet
created) is passed over here: its creation commits with the parent's ``child_started``,
so it either committed before this command (and is found) or builds again after it on
a parent that no longer runs, and is not created (``engine.decide.child_starts``).
"""

from __future__ import annotations

from engine import modes
from engine.decide.decisions import record_child_outcome
from engine.decide.operator_actions import Action
from engine.decide.operator_commands import record_command
from engine.model.canonical import digest
from engine.model.events import EventKind
from engine.model.instance import ChildStatus, InstanceStatus
from engine.model.limits import MAX_IDENTIFIER_LENGTH
from engine.model.transitions import Draft, Transition
from engine.modes import follow
from engine.store.errors import InstanceNotFound
from engine.worker.instance_cache import InstanceCache, RegistrySource

S = InstanceStatus
GOING = frozenset({ChildStatus.START_RUNNING, ChildStatus.ACTIVE, ChildStatus.START_UNKNOWN})
CASCADES = {
    EventKind.CANCELLATION_REQUESTED: (Action.CANCEL, frozenset({S.RUNNING, S.PAUSED})),
    EventKind.TERMINATED: (
        Action.TERMINATE,
        frozenset({S.RUNNING, S.PAUSED, S.CANCELLING, S.FAILING}),
    ),
}
"""The parent's event that cascades: the action its children get, and the statuses of a
child that action applies to."""


async def end_children(
    cache: InstanceCache, registries: RegistrySource, draft: Draft
) -> list[Transition]:
    """The transitions cancelling (or terminating) the children ``draft``'s instance
    started, when ``draft`` asks for its cancellation (or terminates it); built, not
    committed (see the module)."""
    state = draft.state
    assert state is not None
    kinds = {e.kind for e in draft.events}
    cascade = next((CASCADES[kind] for kind in CASCADES if kind in kinds), None)
    if cascade is None or not state.audit:
        return []
    action, applies = cascade
    command = state.audit[-1]
    out: list[Transition] = []
    for child in state.children.values():
        if child.status not in GOING:
            continue
        try:
            started = await cache.load(child.child_id)
        except InstanceNotFound:  # its start is under way: that start finds us ended
            continue
        if started.status not in applies or started.parent_id != state.instance_id:
            continue
        child_draft = Draft(await registries.get(), started, max(draft.now, started.updated_at))
        command_id = child_command_id(command.command_id, child.step)
        record_command(child_draft, command_id, action, command.actor, command.reason)
        follow(child_draft)
        propagate = modes.of(started.spec).propagate  # a child of any mode
        nested = await propagate(cache, registries, child_draft) if propagate else []
        out += [child_draft.build("command", command_id), *nested]
        ended = child_draft.state
        if ended is not None and ended.status.terminal and not draft.state.status.terminal:
            record_child_outcome(draft, child, False, code=f"child-{ended.status.label}")
    return out


def child_command_id(command_id: str, step: str) -> str:
    """The id of a child's command, derived from its parent's (``<id>/<step>``), so a
    repeat of the parent's command repeats the child's. One that would be longer than an
    id may be (a long parent id, a long step name, or a cascade several levels deep) is
    the SHA-256 of that text instead: still derived, and within the limit."""
    joined = f"{command_id}/{step}"
    return joined if len(joined) <= MAX_IDENTIFIER_LENGTH else digest(joined)
