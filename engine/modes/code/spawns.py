"""Cancelling a code-first run cancels every run it spawned, in the same transaction.

The seed says cancel propagates to every run a run spawned. When a transition asks
for a run's cancellation (an operator's audited ``cancel``), each spawned run still
going gets its own audited cancel, by the same actor with the same reason (its command
id derived from the parent's), with the decision that follows it (its own unwinding,
and its own spawned runs' cancellation, recursively). All of them commit with the
parent's transition or none does. A spawned run that ends at once is reported to the
parent in the parent's own transition (``child_failed``), unless the parent has ended.

A spawned run whose start is still to come never starts: its start is obsolete once the
parent no longer runs (``engine.decide.child_starts``).
"""

from __future__ import annotations

from engine import modes
from engine.decide.decisions import record_child_outcome
from engine.decide.operator_actions import Action
from engine.decide.operator_commands import record_command
from engine.model.events import EventKind
from engine.model.instance import ChildStatus, InstanceStatus
from engine.model.transitions import Draft, Transition
from engine.modes import follow
from engine.worker.instance_cache import InstanceCache, RegistrySource

S = InstanceStatus
CANCELLABLE = frozenset({S.RUNNING, S.PAUSED})
GOING = frozenset({ChildStatus.START_RUNNING, ChildStatus.ACTIVE, ChildStatus.START_UNKNOWN})


async def cancel_spawned(
    cache: InstanceCache, registries: RegistrySource, draft: Draft
) -> list[Transition]:
    """The transitions cancelling the runs ``draft``'s run spawned, when ``draft`` asks
    for its cancellation (see the module); built, not committed."""
    state = draft.state
    assert state is not None
    if EventKind.CANCELLATION_REQUESTED not in {e.kind for e in draft.events}:
        return []
    command = state.audit[-1]
    out: list[Transition] = []
    for child in state.children.values():
        if child.status not in GOING:
            continue
        spawned = await cache.load(child.child_id)
        if spawned.status not in CANCELLABLE or spawned.parent_id != state.instance_id:
            continue
        child_draft = Draft(await registries.get(), spawned, max(draft.now, spawned.updated_at))
        command_id = f"{command.command_id}/{child.step}"
        record_command(child_draft, command_id, Action.CANCEL, command.actor, command.reason)
        follow(child_draft)
        propagate = modes.of(spawned.spec).propagate  # a spawned run of any mode
        nested = await propagate(cache, registries, child_draft) if propagate else []
        out += [child_draft.build("command", command_id), *nested]
        ended = child_draft.state
        if ended is not None and ended.status.terminal and not draft.state.status.terminal:
            record_child_outcome(draft, child, False, code=f"child-{ended.status.label}")
    return out
