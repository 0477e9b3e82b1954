"""Replay of activity and compensation attempts, including unknown outcomes.

Both follow one attempt machine: ready -> running -> succeeded | failed | unknown,
failed -> retry_waiting -> running. An attempt starts only from ready or
retry_waiting, numbered previous + 1, due exactly its timeout after the start, never
before its retry time, and with the idempotency key fixed when the retry was
scheduled. Outcomes are accepted in any non-terminal status (the attempt was already
in flight). Whatever an outcome carries (a result or a failure's detail), and the
evidence of a compensation resolved by hand, fits the step's ``result_limit`` (the
compensation's, for a compensation). Unknown never turns into anything by itself: only
a policy retry that keeps the key (``retry_same_key``), an operator retry, or an
operator resolution moves it on.
"""

from __future__ import annotations

from datetime import timedelta

from engine.model.definitions import RetryPolicy, Step, StepKind, UnknownPolicy
from engine.model.events import Event, EventKind
from engine.model.frozen import evolve
from engine.model.instance import (
    AttemptProgress,
    AttemptStatus,
    AuditEntry,
    Instance,
    InstanceStatus,
)
from engine.model.registry import Registry
from engine.replay.rules import (
    reject,
    require_first,
    require_size,
    require_status,
    require_step,
)

A = AttemptStatus
K = EventKind
S = InstanceStatus
ADVANCING = (S.RUNNING,)
COMPENSATING = (S.RUNNING, S.CANCELLING, S.FAILING)
RESOLUTIONS = {"succeeded", "failed", "absent"}
"""Codes of ``activity_resolved``: what an operator established about the effect."""


def schedule_activity(
    state: Instance, event: Event, registry: Registry, command: AuditEntry | None
) -> Instance:
    already = f"activity {event.step!r} is already scheduled"
    step = require_first(state, event, StepKind.ACTIVITY, state.activities, already)
    require_size(event, step.input_limit, "activity input")
    return _with_activity(state, event, _first_attempt(event))


def start_activity(
    state: Instance, event: Event, registry: Registry, command: AuditEntry | None
) -> Instance:
    require_status(state, event, *ADVANCING)
    step = require_step(state, event, StepKind.ACTIVITY)
    assert step.retry is not None and step.timeout is not None
    progress = _progress(state.activities, event)
    new = _start(progress, event, step.timeout, step.retry)
    return _with_activity(state, event, new)


def activity_outcome(
    state: Instance, event: Event, registry: Registry, command: AuditEntry | None
) -> Instance:
    step = require_step(state, event, StepKind.ACTIVITY)
    new = _outcome(_progress(state.activities, event), event, step.result_limit)
    return _with_activity(state, event, new)


def retry_activity(
    state: Instance, event: Event, registry: Registry, command: AuditEntry | None
) -> Instance:
    require_status(state, event, *ADVANCING)
    step = require_step(state, event, StepKind.ACTIVITY)
    assert step.retry is not None
    progress = _progress(state.activities, event)
    if command is not None:
        new = _operator_retry(progress, event)
    else:
        new = _policy_retry(progress, event, step.retry, step.on_unknown)
    return _with_activity(state, event, new)


def resolve_activity(
    state: Instance, event: Event, registry: Registry, command: AuditEntry | None
) -> Instance:
    step = require_step(state, event, StepKind.ACTIVITY)
    progress = _progress(state.activities, event)
    if progress.status is not A.UNKNOWN or event.attempt != progress.attempt:
        raise reject(event, f"activity {event.step!r} attempt {event.attempt} is not unknown")
    if event.code not in RESOLUTIONS:
        raise reject(event, "resolution must be one of: absent, failed, succeeded")
    if event.code == "succeeded":
        require_size(event, step.result_limit, "activity result")
        new = evolve(
            progress,
            status=A.SUCCEEDED,
            result=event.data,
            code="",
            completed_sequence=event.sequence,
        )
    else:
        if event.data is not None:
            raise reject(event, "only a 'succeeded' resolution carries a result")
        retryable = event.code == "absent"
        code = "known-absent" if retryable else "resolved-failed"
        new = evolve(progress, status=A.FAILED, code=code, retryable=retryable)
    return _with_activity(state, event, new)


def schedule_compensation(
    state: Instance, event: Event, registry: Registry, command: AuditEntry | None
) -> Instance:
    require_status(state, event, *COMPENSATING)
    step = _compensated_step(state, event)
    activity = state.activities.get(event.step)
    if activity is None or activity.status is not A.SUCCEEDED:
        raise reject(event, f"activity {event.step!r} has not succeeded; nothing to compensate")
    if event.step in state.compensations:
        raise reject(event, f"compensation of {event.step!r} is already scheduled")
    require_size(event, step.input_limit, "compensation input")
    return _with_compensation(state, event, _first_attempt(event))


def start_compensation(
    state: Instance, event: Event, registry: Registry, command: AuditEntry | None
) -> Instance:
    require_status(state, event, *COMPENSATING)
    spec = _compensated_step(state, event).compensation
    assert spec is not None
    new = _start(_progress(state.compensations, event), event, spec.timeout, spec.retry)
    return _with_compensation(state, event, new)


def compensation_outcome(
    state: Instance, event: Event, registry: Registry, command: AuditEntry | None
) -> Instance:
    spec = _compensated_step(state, event).compensation
    assert spec is not None
    new = _outcome(_progress(state.compensations, event), event, spec.result_limit)
    return _with_compensation(state, event, new)


def retry_compensation(
    state: Instance, event: Event, registry: Registry, command: AuditEntry | None
) -> Instance:
    require_status(state, event, *COMPENSATING)
    spec = _compensated_step(state, event).compensation
    assert spec is not None
    progress = _progress(state.compensations, event)
    new = _policy_retry(progress, event, spec.retry, UnknownPolicy.HOLD)
    return _with_compensation(state, event, new)


def resolve_compensation(
    state: Instance, event: Event, registry: Registry, command: AuditEntry | None
) -> Instance:
    spec = _compensated_step(state, event).compensation
    assert spec is not None
    require_size(event, spec.result_limit, "resolution evidence")
    progress = _progress(state.compensations, event)
    if progress.status not in (A.FAILED, A.UNKNOWN):
        raise reject(
            event,
            f"compensation of {event.step!r} is {progress.status.label}; only "
            "a failed or unknown compensation can be resolved by hand",
        )
    new = evolve(progress, status=A.MANUALLY_RESOLVED, code=event.code, result=event.data)
    return _with_compensation(state, event, new)


def _first_attempt(event: Event) -> AttemptProgress:
    """A scheduled activity or compensation: ready, with the input it was given."""
    return AttemptProgress(event.step, A.READY, event.sequence, input=event.data)


def _with_activity(state: Instance, event: Event, progress: AttemptProgress) -> Instance:
    return evolve(state, activities={**state.activities, event.step: progress})


def _with_compensation(state: Instance, event: Event, progress: AttemptProgress) -> Instance:
    return evolve(state, compensations={**state.compensations, event.step: progress})


def _compensated_step(state: Instance, event: Event) -> Step:
    step = require_step(state, event, StepKind.ACTIVITY)
    if step.compensation is None:
        raise reject(event, f"activity {event.step!r} declares no compensation")
    return step


def _progress(track: dict[str, AttemptProgress] | object, event: Event) -> AttemptProgress:
    progress = track.get(event.step)  # type: ignore[attr-defined]
    if progress is None:
        raise reject(event, f"{event.step!r} has not been scheduled")
    return progress


def _start(
    progress: AttemptProgress, event: Event, timeout: timedelta, retry: RetryPolicy
) -> AttemptProgress:
    if progress.status not in (A.READY, A.RETRY_WAITING):
        raise reject(
            event,
            f"{event.step!r} is {progress.status.label}; an attempt starts "
            "only when ready or waiting to retry",
        )
    if event.attempt != progress.attempt + 1:
        raise reject(event, f"attempt must be {progress.attempt + 1}")
    if event.attempt > max(retry.max_attempts, progress.granted_attempt):
        raise reject(event, f"attempt {event.attempt} exceeds max_attempts {retry.max_attempts}")
    if event.due_at != event.occurred_at + timeout:
        raise reject(event, "due_at must be the start time plus the step timeout")
    if progress.retry_at is not None and event.occurred_at < progress.retry_at:
        raise reject(event, "attempt starts before its retry time")
    if progress.next_key and event.idempotency_key != progress.next_key:
        raise reject(event, "attempt must use the idempotency key fixed by its retry")
    return evolve(
        progress,
        status=A.RUNNING,
        attempt=event.attempt,
        idempotency_key=event.idempotency_key,
        started_at=event.occurred_at,
        due_at=event.due_at,
        retry_at=None,
        next_key="",
        result=None,
        code="",
        retryable=False,
    )


def _outcome(progress: AttemptProgress, event: Event, result_limit: int) -> AttemptProgress:
    if progress.status is not A.RUNNING or event.attempt != progress.attempt:
        raise reject(event, f"{event.step!r} has no attempt {event.attempt} in flight")
    if event.kind in (K.ATTEMPT_SUCCEEDED, K.COMPENSATION_SUCCEEDED):
        require_size(event, result_limit, "result")
        return evolve(
            progress, status=A.SUCCEEDED, result=event.data, completed_sequence=event.sequence
        )
    require_size(event, result_limit, "failure detail")
    status = A.FAILED if event.kind in (K.ATTEMPT_FAILED, K.COMPENSATION_FAILED) else A.UNKNOWN
    return evolve(
        progress, status=status, code=event.code, retryable=event.retryable, result=event.data
    )


def _policy_retry(
    progress: AttemptProgress, event: Event, retry: RetryPolicy, on_unknown: UnknownPolicy
) -> AttemptProgress:
    if event.attempt != progress.attempt:
        raise reject(event, f"retry must name the last attempt, {progress.attempt}")
    if progress.status is A.FAILED and progress.retryable:
        same_key = False
    elif progress.status is A.UNKNOWN and on_unknown is UnknownPolicy.RETRY_SAME_KEY:
        same_key = True
    else:
        raise reject(
            event, f"{event.step!r} is {progress.status.label} and may not be retried by policy"
        )
    if progress.attempt >= retry.max_attempts:
        raise reject(event, f"all {retry.max_attempts} attempts are used")
    if event.due_at != event.occurred_at + retry.backoff(progress.attempt):
        raise reject(event, "retry due_at must be the time plus the backoff delay")
    return _waiting(progress, event, same_key, progress.granted_attempt)


def _operator_retry(progress: AttemptProgress, event: Event) -> AttemptProgress:
    if progress.status not in (A.FAILED, A.UNKNOWN) or event.attempt != progress.attempt:
        raise reject(event, f"{event.step!r} attempt {event.attempt} is neither failed nor unknown")
    if event.due_at != event.occurred_at:
        raise reject(event, "an operator retry is due at once")
    return _waiting(progress, event, progress.status is A.UNKNOWN, progress.attempt + 1)


def _waiting(
    progress: AttemptProgress, event: Event, same_key: bool, granted: int
) -> AttemptProgress:
    if same_key != (event.idempotency_key == progress.idempotency_key):
        rule = "reuse" if same_key else "not reuse"
        raise reject(event, f"the retry must {rule} the previous idempotency key")
    return evolve(
        progress,
        status=A.RETRY_WAITING,
        retry_at=event.due_at,
        next_key=event.idempotency_key,
        granted_attempt=granted,
    )


RULES = {
    K.ACTIVITY_SCHEDULED: schedule_activity,
    K.ATTEMPT_STARTED: start_activity,
    K.ATTEMPT_SUCCEEDED: activity_outcome,
    K.ATTEMPT_FAILED: activity_outcome,
    K.ATTEMPT_UNKNOWN: activity_outcome,
    K.RETRY_SCHEDULED: retry_activity,
    K.ACTIVITY_RESOLVED: resolve_activity,
    K.COMPENSATION_SCHEDULED: schedule_compensation,
    K.COMPENSATION_ATTEMPT_STARTED: start_compensation,
    K.COMPENSATION_SUCCEEDED: compensation_outcome,
    K.COMPENSATION_FAILED: compensation_outcome,
    K.COMPENSATION_UNKNOWN: compensation_outcome,
    K.COMPENSATION_RETRY_SCHEDULED: retry_compensation,
    K.COMPENSATION_MANUALLY_RESOLVED: resolve_compensation,
}
