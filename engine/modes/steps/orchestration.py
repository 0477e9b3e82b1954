"""The orchestration decision: what an instance does next, computed from its state.

``decide(draft)`` walks the definition's steps in order and appends to the draft the
next decisions (possibly several: a race winner and the step after it, or every branch
of a parallel) until the instance must wait or ends. Branch steps are handled by the
parallel or race that owns them. A known terminal failure, or a cancellation, unwinds:
in-flight attempts settle first, then the succeeded activities that declare a
compensation are compensated one at a time in reverse completion order, and only when
every compensation has settled does the instance become Failed or Cancelled. An
activity is scheduled, and a child instance started, with the instance input (a handler
also sees the results of the activities before it); an input larger than the step's
``input_limit`` fails the instance with ``input-too-large``. An unknown activity outcome
under the ``hold`` policy, and a failed or unknown compensation, wait for an operator;
the reason says so.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TypeVar

from engine.decide import decisions, lifecycle
from engine.model.definitions import Step, StepKind, UnknownPolicy
from engine.model.instance import AttemptProgress, AttemptStatus, ChildStatus, Instance
from engine.model.instance import InstanceStatus as S
from engine.model.transitions import Draft
from engine.modes import Decision, Outcome
from engine.modes.steps import step_kinds
from engine.modes.steps.fold.waits import race_winner

A = AttemptStatus
P = TypeVar("P")
INPUT_TOO_LARGE = "input-too-large"
"""Failure code when the instance input exceeds an activity's input_limit."""


class _Stop(Exception):
    """Raised inside the walk to end it with a decision."""

    def __init__(self, decision: Decision) -> None:
        self.decision = decision


def decide(draft: Draft) -> Decision:
    """Append the next decisions to ``draft`` and say where the instance stands."""
    while True:
        decision = _decide_once(draft)
        if decision.outcome is not Outcome.RECORDED:
            return decision


def _decide_once(draft: Draft) -> Decision:
    by_status = decided_by_status(draft, "instance")
    if by_status is not None:
        return by_status
    try:
        _walk(draft)
    except _Stop as stop:
        return stop.decision
    lifecycle.complete(draft, _final_result(draft.state))
    return Decision(Outcome.COMPLETED)


def _walk(draft: Draft) -> None:
    spec = draft.state.spec  # type: ignore[union-attr]
    for step in spec.steps:
        if step.name in spec.owners:
            continue
        _STEP_DECIDERS[step.kind](draft, step)


def _first(
    draft: Draft, step: Step, track: Mapping[str, P], schedule: Callable[[Draft, str], object]
) -> P:
    """The step's progress in ``track``; the first time, schedule it and stop the walk."""
    progress = track.get(step.name)
    if progress is None:
        schedule(draft, step.name)
        raise _Stop(Decision(Outcome.SCHEDULED, f"{step.kind.value} {step.name}"))
    return progress


def _activity(draft: Draft, step: Step) -> None:
    progress = _first(draft, step, draft.state.activities, _schedule)  # type: ignore[union-attr]
    if _advance_activity(draft, step, progress):
        raise _Stop(Decision(Outcome.SCHEDULED, f"retry of {step.name}"))
    if progress.status is not A.SUCCEEDED:
        raise _Stop(Decision(Outcome.WAITING, _waiting_reason(step.name, progress)))


def _schedule(draft: Draft, name: str) -> None:
    """Schedule an activity with the instance input (``_with_input``)."""
    _with_input(draft, name, decisions.schedule_activity)


def _schedule_child(draft: Draft, name: str) -> None:
    """Schedule a child instance started with the instance input (``_with_input``)."""
    _with_input(draft, name, decisions.schedule_child)


def _with_input(draft: Draft, name: str, schedule: Callable[[Draft, str, object], object]) -> None:
    """Schedule step ``name`` with the instance input; fail cleanly when the input is
    larger than the step's ``input_limit`` (the replay rules refuse such an event)."""
    state = draft.state
    assert state is not None and state.spec is not None
    size = 0 if state.input is None else len(state.input.encode())
    if size > state.spec.step(name).input_limit:  # type: ignore[union-attr]
        _fail(draft, name, INPUT_TOO_LARGE)
    schedule(draft, name, state.value("input"))


def _advance_activity(draft: Draft, step: Step, progress: AttemptProgress) -> bool:
    """Retry or fail a settled-but-unsuccessful activity; True when a retry was scheduled."""
    assert step.retry is not None
    attempts_left = progress.attempt < step.retry.max_attempts
    if progress.status is A.FAILED:
        if _retryable(step, progress):
            decisions.schedule_activity_retry(draft, progress, same_key=False)
            return True
        _fail(draft, step.name, progress.code or "activity-failed")
    if (
        progress.status is A.UNKNOWN
        and step.on_unknown is UnknownPolicy.RETRY_SAME_KEY
        and attempts_left
    ):
        decisions.schedule_activity_retry(draft, progress, same_key=True)
        return True
    return False


def _retryable(step: Step, progress: AttemptProgress) -> bool:
    """A failed activity the policy retries: retryable, with attempts left."""
    assert step.retry is not None
    return progress.retryable and progress.attempt < step.retry.max_attempts


def _waiting_reason(name: str, progress: AttemptProgress) -> str:
    if progress.status is A.UNKNOWN:
        return f"activity {name} outcome is unknown: waiting for an operator to resolve it"
    return f"activity {name} is {progress.status.label}"


def _fail(draft: Draft, step: str, code: str) -> None:
    """End with a failure: unwind first when there is anything to compensate."""
    if compensable(draft.state):  # type: ignore[arg-type]
        lifecycle.begin_failing(draft, step, code)
        raise _Stop(Decision(Outcome.RECORDED, f"{step} failed: compensating"))
    lifecycle.fail(draft, step, code)
    raise _Stop(Decision(Outcome.FAILED, f"{step} failed: {code}"))


def _timer(draft: Draft, step: Step) -> None:
    timer = _first(draft, step, draft.state.timers, decisions.schedule_timer)  # type: ignore
    if timer.fired_at is None:
        raise _Stop(Decision.waiting(f"timer {step.name} is due at ", timer.due_at))


def _signal(draft: Draft, step: Step) -> None:
    if step.name not in draft.state.signals:  # type: ignore[union-attr]
        raise _Stop(Decision(Outcome.WAITING, f"waiting for {step.kind.value} {step.name}"))


def _child(draft: Draft, step: Step) -> None:
    child = _first(draft, step, draft.state.children, _schedule_child)  # type: ignore
    if child.status is ChildStatus.SUCCEEDED:
        return
    if child.status is ChildStatus.FAILED:
        _fail(draft, step.name, child.code or "child-failed")
    if child.status is ChildStatus.START_FAILED:
        assert step.retry is not None
        if child.retryable and child.attempt < step.retry.max_attempts:
            decisions.schedule_child_retry(draft, child)
            raise _Stop(Decision(Outcome.SCHEDULED, f"retry of child {step.name}"))
        _fail(draft, step.name, child.code or "child-start-failed")
    raise _Stop(Decision(Outcome.WAITING, f"child {step.name} is {child.status.label}"))


def _parallel(draft: Draft, step: Step) -> None:
    spec = draft.state.spec  # type: ignore[union-attr]
    missing = [b for b in step.branches if b not in draft.state.activities]  # type: ignore
    if missing:
        # All of them, in one transition; only some when a state is read between that
        # transition's events (the replay checker decides after every event).
        for branch in missing:
            _schedule(draft, branch)
        raise _Stop(Decision(Outcome.SCHEDULED, f"{len(missing)} branches of {step.name}"))
    branches = [(spec.step(b), draft.state.activities[b]) for b in step.branches]  # type: ignore
    for branch, progress in branches:  # a terminal failure first: no retry beside it
        if progress.status is A.FAILED and not _retryable(branch, progress):
            _fail(draft, branch.name, progress.code or "activity-failed")
    retried = False
    for branch, progress in branches:
        retried |= _advance_activity(draft, branch, progress)
    if retried:
        raise _Stop(Decision(Outcome.SCHEDULED, f"retries in {step.name}"))


def _join(draft: Draft, step: Step) -> None:
    activities = draft.state.activities  # type: ignore[union-attr]
    pending = [b for b in step.branches if activities[b].status is not A.SUCCEEDED]
    for branch in pending:  # a branch held on an unknown outcome needs an operator: say so
        if activities[branch].status is A.UNKNOWN:
            raise _Stop(Decision(Outcome.WAITING, _waiting_reason(branch, activities[branch])))
    if pending:
        raise _Stop(Decision(Outcome.WAITING, f"{step.name} waits for {', '.join(pending)}"))


def _race(draft: Draft, step: Step) -> None:
    state = draft.state
    assert state is not None and state.spec is not None
    if step.name in state.race_winners:
        return
    winner = race_winner(state, step)
    if winner is not None:
        decisions.record_race_winner(draft, step.name, winner)
        raise _Stop(Decision(Outcome.RECORDED, f"{winner} won {step.name}"))
    timers = [
        b
        for b in step.branches
        if state.spec.step(b).kind is StepKind.TIMER and b not in state.timers
    ]
    for branch in timers:
        decisions.schedule_timer(draft, branch)
    if timers:
        raise _Stop(Decision(Outcome.SCHEDULED, f"timers of {step.name}"))
    raise _Stop(Decision(Outcome.WAITING, f"race {step.name} has no winner yet"))


_STEP_DECIDERS = step_kinds.table(
    activity=_activity, timer=_timer, wait=_signal, child=_child,
    parallel=_parallel, join=_join, race=_race,
)  # fmt: skip


def compensable(state: Instance) -> list[AttemptProgress]:
    """Succeeded activities that declare a compensation, latest completion first: the
    order unwinding compensates them in (the studio shows the same order)."""
    done = [
        p
        for p in state.activities.values()
        if p.status is A.SUCCEEDED and state.step(p.step).compensation is not None
    ]
    return sorted(done, key=lambda p: p.completed_sequence, reverse=True)


def decided_by_status(draft: Draft, noun: str) -> Decision | None:
    """What the status alone decides, before any step is looked at: an ended instance
    adds nothing, a paused one waits, a cancelling or failing one unwinds. None when the
    status leaves it to the mode (every mode with compensated activities shares this;
    ``noun`` names the instance as the mode's reason does: instance, run)."""
    state = draft.state
    assert state is not None
    if state.status.terminal:
        return Decision(Outcome.ENDED, f"{noun} is {state.status.label}")
    if state.status is S.PAUSED:
        return Decision(Outcome.WAITING, "paused")
    if state.status in (S.CANCELLING, S.FAILING):
        return unwind(draft)
    return None


def unwind(draft: Draft) -> Decision:
    """Unwind a cancelling or failing instance (see the module): every mode whose steps
    are activities with compensations (step lists, code-first runs) shares it."""
    state = draft.state
    assert state is not None and state.spec is not None
    for progress in state.activities.values():
        if progress.status is A.RUNNING:
            return Decision(Outcome.WAITING, f"activity {progress.step} is still in flight")
        if progress.status is A.UNKNOWN and state.step(progress.step).compensation:
            return Decision(
                Outcome.WAITING,
                f"activity {progress.step} outcome is unknown: resolve it before compensating",
            )
    for activity in compensable(state):
        decision = _compensate(draft, activity.step)
        if decision is not None:
            return decision
    if state.status is S.CANCELLING:
        lifecycle.cancelled(draft)
        return Decision(Outcome.CANCELLED)
    # the failure's recorded message (a code run's) is kept past the unwinding
    lifecycle.fail(draft, state.failure_step, state.failure_code, state.result)
    return Decision(Outcome.FAILED, f"{state.failure_step} failed: {state.failure_code}")


def _compensate(draft: Draft, name: str) -> Decision | None:
    """Drive one compensation; None once it has settled."""
    state = draft.state
    assert state is not None and state.spec is not None
    progress = state.compensations.get(name)
    if progress is None:
        decisions.schedule_compensation(draft, name)
        return Decision(Outcome.SCHEDULED, f"compensation of {name}")
    if progress.status in (A.SUCCEEDED, A.MANUALLY_RESOLVED):
        return None
    spec = state.step(name).compensation  # type: ignore[union-attr]
    if (
        progress.status is A.FAILED
        and progress.retryable
        and progress.attempt < spec.retry.max_attempts
    ):
        decisions.schedule_compensation_retry(draft, progress)
        return Decision(Outcome.SCHEDULED, f"retry of compensation of {name}")
    if progress.status in (A.FAILED, A.UNKNOWN):
        return Decision(
            Outcome.WAITING,
            f"compensation of {name} is {progress.status.label}: "
            "waiting for an operator to resolve it",
        )
    return Decision(Outcome.WAITING, f"compensation of {name} is {progress.status.label}")


def _final_result(state: Instance | None) -> object:
    """The instance result: the result of the activity that succeeded last."""
    assert state is not None
    done = [p for p in state.activities.values() if p.status is A.SUCCEEDED]
    if not done:
        return None
    last = max(done, key=lambda p: p.completed_sequence)
    return None if last.result is None else json.loads(last.result)
