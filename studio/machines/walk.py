"""The way an execution walked its machine, folded from history beside the replay.

The replayed Instance keeps where a machine stands (``MachineProgress``): its state,
its fields, what it has used up. Its page also shows the way there: how often each
allowed edge was taken, and every failed advance with its code and when the next
attempt was due. This fold reads the same events replay does, in the same pass
(``studio.instances.replays``), so the studio never reads history twice. An edge is
counted from the state the machine was in before the event, which replay knows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from engine.model.events import Event, EventKind
from engine.model.instance import Instance
from engine.modes.machines.fold import progress_of

KEEP_FAILURES = 50
"""Failed advances kept (the newest); older ones stay in the history view."""


@dataclass(frozen=True)
class Failure:
    """One failed advance of a state."""

    state: str
    attempt: int
    code: str
    at: datetime
    retry_at: datetime | None
    """When the next attempt was due; None after the last one."""
    sequence: int


@dataclass(frozen=True)
class Walk:
    taken: dict[tuple[str, str], int] = field(default_factory=dict)
    """How often each edge (source, target) was taken."""
    failures: tuple[Failure, ...] = ()
    last: tuple[str, str] | None = None
    """The edge taken most recently (into the current state)."""


EMPTY = Walk()


def fold(walk: Walk, before: Instance | None, event: Event) -> Walk:
    """``walk`` after ``event``, which replay applied to ``before``."""
    if event.kind is EventKind.STATE_ENTERED and before is not None:
        edge = (progress_of(before).state, event.step)
        taken = {**walk.taken, edge: walk.taken.get(edge, 0) + 1}
        return Walk(taken, walk.failures, edge)
    if event.kind is EventKind.ADVANCE_FAILED:
        failure = Failure(
            event.step, event.attempt, event.code, event.occurred_at, event.due_at, event.sequence
        )
        return Walk(walk.taken, (*walk.failures, failure)[-KEEP_FAILURES:], walk.last)
    return walk
