"""What a code-first run does next without running its code: the engine's pure part.

Only a worker that has the code can replay it (``engine.modes.code.processor``); the
rest is decided here from the draft's events, by whoever commits them (a worker, the
client), in the same transaction:

- a step attempt that failed is retried by its options: after a known failure with a
  new ``step_id`` (its try grows), after an unknown outcome only under
  ``on_unknown="retry_same_key"`` and with the same ``step_id``; otherwise an unknown
  outcome waits for an operator, like every unknown outcome in Wayline;
- waits resolve from the inbox and from spawned runs that ended (``waits``), and time
  out when due;
- once the command the code is blocked on is resolved, a ``DECISION`` work item asks a
  worker with the code to replay it (only then: deciding twice schedules nothing twice);
  a wait with a timeout gets one due when it times out;
- a cancelled or failing run unwinds its compensations in reverse completion order
  (shared with step lists: ``orchestration.decided_by_status``).
"""

from __future__ import annotations

from datetime import datetime

from engine.decide import decisions
from engine.model.instance import AttemptStatus, Instance, InstanceStatus
from engine.model.limits import WORK_CLAIM_WINDOW
from engine.model.transitions import Draft, WorkKind
from engine.modes import Decision, Outcome, Said
from engine.modes.code import records, waits
from engine.modes.code.fold import entries
from engine.modes.code.journal import BLOCKING, EntryState
from engine.modes.steps.orchestration import decided_by_status

A = AttemptStatus
S = InstanceStatus
UNKNOWN_HELD = "step {step} outcome is unknown: waiting for an operator to resolve it"
WAKE = "wake"
"""The payload field of a DECISION due at a wait's timeout: the wait's key."""


def decide(draft: Draft) -> Decision:
    """Append what follows the draft's events (see the module)."""
    by_status = decided_by_status(draft, "run")
    if by_status is not None:
        return by_status
    retried = _retry_steps(draft)
    more = waits.resolve(draft)
    _wake_at_timeouts(draft)
    if more or code_pending(draft.state) not in (None, code_pending(draft.base)):
        if not _decision_scheduled(draft):
            decision_work(draft, draft.now, "now")
        return Decision(Outcome.SCHEDULED, "the code runs next")
    if retried:
        return Decision(Outcome.SCHEDULED, f"retry of {', '.join(retried)}")
    return Decision.waiting(*_waiting_reason(draft.state))


def code_pending(state: Instance | None) -> str | None:
    """The key of the command the code is past once it runs again: its last blocking
    command when that is resolved ('' before its first), None when the code is blocked
    (or the run does not run). A change of it is what makes the code run again."""
    if state is None or state.status is not S.RUNNING:
        return None
    blocking = [e for e in entries(state) if e.verb in BLOCKING]
    if not blocking:
        return ""
    last = blocking[-1]
    return None if last.state is EntryState.OPEN else last.key


def _decision_scheduled(draft: Draft) -> bool:
    """Whether the draft already asks for the code to run now (it was decided before)."""
    return any(w.kind is WorkKind.DECISION and w.available_at <= draft.now for w in draft.work)


def decision_work(draft: Draft, due: datetime, label: str, wake: str = "") -> None:
    """A DECISION work item, due at ``due``, for a worker that has the run's code;
    ``wake`` names the wait whose timeout it is for (its payload says so)."""
    state = draft.state
    assert state is not None
    event = draft.events[-1]
    work_id = "#".join([draft.instance_id, str(event.sequence), WorkKind.DECISION.label, label])
    target = records.target_of(state.definition)
    payload = {WAKE: wake} if wake else None
    deadline = due + WORK_CLAIM_WINDOW
    draft.add_work(work_id, WorkKind.DECISION, event, due, deadline, payload, target)


def _retry_steps(draft: Draft) -> list[str]:
    """Retry the steps whose options retry them (see the module); their keys."""
    state = draft.state
    assert state is not None
    retried = []
    for progress in list(state.activities.values()):
        step = state.step(progress.step)
        assert step is not None and step.retry is not None
        left = progress.attempt < step.retry.max_attempts
        if progress.status is A.FAILED and progress.retryable and left:
            decisions.schedule_activity_retry(draft, progress, same_key=False)
        elif progress.status is A.UNKNOWN and step.on_unknown.value == "retry_same_key" and left:
            decisions.schedule_activity_retry(draft, progress, same_key=True)
        else:
            continue
        retried.append(progress.step)
    return retried


def _wake_at_timeouts(draft: Draft) -> None:
    """A DECISION due when each wait this draft started (or moved on) times out."""
    state, base, work = draft.state, draft.base, draft.work
    assert state is not None
    for key, wait in state.waits.items():
        before = base.waits.get(key) if base is not None else None
        if wait.due_at is None or (before is not None and before.due_at == wait.due_at):
            continue
        due = [w.available_at for w in work if w.kind is WorkKind.DECISION]
        if wait.due_at not in due:  # not already asked for by an earlier decide
            decision_work(draft, wait.due_at, f"due-{key}", wake=key)


IN_FLIGHT = (A.READY, A.RUNNING, A.RETRY_WAITING)
"""A step whose outcome is still to come: the run waits for it."""


def _waiting_reason(state: Instance) -> Said:
    for progress in state.activities.values():
        if progress.status is A.UNKNOWN:
            return (UNKNOWN_HELD.format(step=progress.step),)
    pending: list[Said] = [
        (f"step {p.step}",) for p in state.activities.values() if p.status in IN_FLIGHT
    ]
    pending += [(w.key,) for w in state.waits.values() if not w.done]
    pending += [
        (f"{key} until ", timer.due_at)
        for key, timer in state.timers.items()
        if timer.fired_at is None
    ]
    if not pending:  # nothing recorded is open: the code itself runs next (its decision is due)
        return (CODE_RUNS_NEXT.format(target=records.target_of(state.definition)),)
    listed = [part for n, item in enumerate(pending) for part in ((", ",) if n else ()) + item]
    return ("waiting for ", *listed)


CODE_RUNS_NEXT = "waiting for a worker that runs {target} to run its code"
"""Where a code run stands when no step, wait or timer of it is open: named by the
target its app registers (``workflow:order-saga@1``), as a worker's log lists it."""
