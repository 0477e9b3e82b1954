"""Reporting a child's end to its parent, in the same PostgreSQL transaction.

When a transition ends a child instance, whoever commits it (a worker or a client
command) also builds the parent's ``child_completed`` / ``child_failed`` transition,
with the parent's next decision, and commits both together. No window exists in
which the child is over and its parent does not know. It recurses: a parent that ends
because of it reports to its own parent.
"""

from __future__ import annotations

from engine.decide.decisions import record_child_outcome
from engine.model.instance import ChildStatus, Instance, InstanceStatus
from engine.model.transitions import Draft, Transition
from engine.modes import follow
from engine.worker.instance_cache import InstanceCache, RegistrySource

REPORTABLE = frozenset({ChildStatus.START_RUNNING, ChildStatus.ACTIVE, ChildStatus.START_UNKNOWN})
"""Child states in which the parent can still learn the outcome (it proves existence)."""


async def parent_transitions(
    cache: InstanceCache, registries: RegistrySource, draft: Draft
) -> list[Transition]:
    """The parent's transitions that report ``draft``'s ending, if it ends a child."""
    child = draft.state
    ended_now = (
        child is not None
        and child.status.terminal
        and (draft.base is None or not draft.base.status.terminal)
    )
    if not ended_now or not child.parent_id:
        return []
    parent = await cache.load(child.parent_id)
    progress = parent.children.get(child.parent_step)
    if (
        progress is None
        or progress.child_id != child.instance_id
        or progress.status not in REPORTABLE
        or parent.status.terminal
    ):
        return []
    parent_draft = Draft(await registries.get(), parent, max(draft.now, parent.updated_at))
    _report(parent_draft, parent, child)
    follow(parent_draft)
    return [parent_draft.build(), *await parent_transitions(cache, registries, parent_draft)]


def _report(draft: Draft, parent: Instance, child: Instance) -> None:
    progress = parent.children[child.parent_step]
    limit = parent.step(child.parent_step).result_limit
    size = 0 if child.result is None else len(child.result.encode())
    if child.status is InstanceStatus.COMPLETED and size <= limit:
        record_child_outcome(draft, progress, True, child.value("result"))
        return
    code = (
        "child-result-too-large"
        if child.status is InstanceStatus.COMPLETED
        else f"child-{child.status.label.replace('_', '-')}"
    )
    record_child_outcome(draft, progress, False, code=code)
