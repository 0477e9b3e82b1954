"""Long histories for the snapshot tests (issue 23), made the way workers make them.

Every step of a step list is started and finished in transitions of its own, built by
the engine's pure core (a Draft on the replayed state, ``decide`` after each outcome),
a millisecond apart, and committed through the store a chunk at a time: the store then
writes the snapshots of the transitions that cross an interval, as it would for workers.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from engine.decide import decisions, lifecycle
from engine.model.definitions import Definition
from engine.model.events import EventKind
from engine.model.registry import Registry
from engine.model.transitions import Draft, Transition
from engine.modes import decide
from engine.store.store import Store

COMMIT_CHUNK = 100
"""Transitions per commit: what keeps building a long history quick."""


def long_history(
    definition: Definition,
    instance_id: str,
    now: datetime,
    input: Any = None,
    run_last: bool = True,
) -> list[Transition]:
    """The transitions of an instance whose steps all succeed in order, from ``now`` on;
    without ``run_last``, it stops with its last step scheduled (its work is due)."""
    registry = Registry([definition])
    draft = lifecycle.start_draft(registry, definition, instance_id, now, input)
    decide(draft)
    transitions = [draft.build("start")]
    steps = definition.steps if run_last else definition.steps[:-1]
    for step in steps:
        now += timedelta(milliseconds=1)
        draft = Draft(registry, draft.state, now)
        key = decisions.attempt_key(instance_id, step.name, 1)
        decisions.start_activity_attempt(draft, step.name, 1, key)
        transitions.append(draft.build())
        now += timedelta(milliseconds=1)
        draft = Draft(registry, draft.state, now)
        decisions.record_outcome(draft, step.name, 1, EventKind.ATTEMPT_SUCCEEDED)
        decide(draft)
        transitions.append(draft.build())
    return transitions


async def commit_history(store: Store, transitions: list[Transition]) -> None:
    for k in range(0, len(transitions), COMMIT_CHUNK):
        await store.commit_all(transitions[k : k + COMMIT_CHUNK])
