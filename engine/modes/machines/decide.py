"""What a state machine does next, after the events of a draft: the runtime's part.

The application's ``advance`` decides which state comes next; everything around it is
decided here, from the events the draft just added, so deciding twice never schedules
twice:

- a start, or a state entered that is not terminal, schedules the state's advance:
  at once, or for a timer state when its timer is due (``timer_scheduled`` and the
  work, due then);
- a terminal state entered completes the execution;
- a failed advance schedules the next attempt at its ``due_at``; the last one failed
  (no ``due_at``) ends the execution dead (``dead-attempts-exhausted``);
- a cancellation runs the manifest's compensation, or cancels at once without one; a
  compensation that succeeded cancels.

The work (``WorkKind.ADVANCE``) names the machine's version as its target
(``machine:<name>@<version>``, ``engine.model.pinned_code``), so only a worker that has
that version's code claims it, and its payload
names the attempt and the state it is for (by the transitions used when it was made):
a redelivery after that state was left finds it obsolete. An advance's payload also
names that state as its ``step``: the worker's fault points count hits per step
(``engine.worker.faults``), so a drill plan can pin a fault on one state's advance.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from engine.decide import lifecycle
from engine.model.events import Event, EventKind
from engine.model.limits import WORK_CLAIM_WINDOW
from engine.model.pinned_code import MACHINE_PREFIX, pinned_target
from engine.model.transitions import Draft, WorkKind
from engine.modes import Decision, Outcome
from engine.modes.machines.fold import manifest_of, progress_of
from engine.modes.machines.standing import waiting_for

K = EventKind
DEAD_ATTEMPTS_EXHAUSTED = "dead-attempts-exhausted"
DEAD_TRANSITIONS_EXHAUSTED = "dead-transitions-exhausted"
DEAD_ILLEGAL_TRANSITION = "dead-illegal-transition"
DEAD_CORRUPT_STATE = "dead-corrupt-state"
DEAD_AUTHORIZATION = "dead-authorization"
DEAD_GRANT_DENIED = "dead-grant-denied"
"""How an execution that cannot go on ends: ``failed`` with one of these codes and no
data (the seed's redacted dead execution)."""


def decide(draft: Draft) -> Decision:
    """Append what follows the draft's events (see the module)."""
    state = draft.state
    assert state is not None
    if state.status.terminal:
        return Decision(Outcome.ENDED)
    kinds = {event.kind for event in draft.events}
    if K.COMPENSATION_SUCCEEDED in kinds:
        lifecycle.cancelled(draft)
        return Decision(Outcome.CANCELLED)
    if K.CANCELLATION_REQUESTED in kinds:
        return _cancel(draft)
    if K.ADVANCE_FAILED in kinds:
        return _after_failure(draft)
    if kinds & {K.INSTANCE_STARTED, K.STATE_ENTERED}:
        return _after_entering(draft)
    return Decision.waiting(*waiting_for(state, draft.now))


def dead(draft: Draft, code: str) -> None:
    """End the execution dead with ``code`` in its current state (no data)."""
    assert draft.state is not None
    lifecycle.fail(draft, progress_of(draft.state).state, code)


def _after_entering(draft: Draft) -> Decision:
    assert draft.state is not None
    manifest, now = manifest_of(draft.state), progress_of(draft.state)
    if manifest.is_terminal(now.state):
        lifecycle.complete(draft)
        return Decision(Outcome.COMPLETED)
    seconds = manifest.timer(now.state)
    if seconds is None:
        _advance_work(draft, draft.events[-1], draft.now, 1)
        return Decision(Outcome.SCHEDULED)
    due = draft.now + timedelta(seconds=seconds)
    event = draft.add(K.TIMER_SCHEDULED, step=now.state, due_at=due)
    _advance_work(draft, event, due, 1)
    return Decision(Outcome.SCHEDULED, f"{now.state} waits for its timer")


def _after_failure(draft: Draft) -> Decision:
    assert draft.state is not None
    now = progress_of(draft.state)
    if now.retry_at is None:
        dead(draft, DEAD_ATTEMPTS_EXHAUSTED)
        return Decision(Outcome.FAILED, DEAD_ATTEMPTS_EXHAUSTED)
    _advance_work(draft, draft.events[-1], now.retry_at, now.attempts + 1)
    return Decision(Outcome.SCHEDULED, f"attempt {now.attempts + 1} of {now.state}")


def _cancel(draft: Draft) -> Decision:
    assert draft.state is not None
    if manifest_of(draft.state).compensation is None:
        lifecycle.cancelled(draft)
        return Decision(Outcome.CANCELLED)
    _advance_work(draft, draft.events[-1], draft.now, 1, compensate=True)
    return Decision(Outcome.SCHEDULED, "compensation")


def _advance_work(
    draft: Draft, event: Event, due: datetime, attempt: int, compensate: bool = False
) -> None:
    """The work that runs the advance (or the compensation), due at ``due``."""
    assert draft.state is not None
    target = pinned_target(MACHINE_PREFIX, draft.state.definition)
    now = progress_of(draft.state)
    payload: dict[str, Any] = {"attempt": attempt, "transitions": now.transitions}
    payload |= {"compensate": True} if compensate else {"compensate": False, "step": now.state}
    work_id = "#".join([draft.instance_id, str(event.sequence), WorkKind.ADVANCE.label])
    draft.add_work(work_id, WorkKind.ADVANCE, event, due, due + WORK_CLAIM_WINDOW, payload, target)
