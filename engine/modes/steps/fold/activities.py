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

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

from engine.model.deferred import with_entry
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
    check_backoff,
    check_start,
    reject,
    require_first,
    require_size,
    require_status,
    require_step,
    started,
)

A = AttemptStatus
K = EventKind
S = InstanceStatus
RESOLUTIONS = {"succeeded", "failed", "absent"}
"""Codes of ``activity_resolved``: what an operator established about the effect."""


class Limits(Protocol):
    """What bounds a track's attempts: an activity step, or its compensation."""

    timeout: timedelta | None
    result_limit: int
    retry: RetryPolicy | None


@dataclass(frozen=True)
class Track:
    """Activities, or the compensations of activities: one attempt machine for both."""

    field: str
    """The Instance field holding the track's progress by step."""
    statuses: tuple[InstanceStatus, ...]
    """While an attempt may start, and a policy retry be scheduled."""
    limits: Callable[[Instance, Event], Limits]
    """The step's limits, checking the event names a step that has this track."""

    def progress(self, state: Instance, event: Event) -> AttemptProgress:
        progress = getattr(state, self.field).get(event.step)
        if progress is None:
            raise reject(event, f"{event.step!r} has not been scheduled")
        return progress

    def put(self, state: Instance, event: Event, progress: AttemptProgress) -> Instance:
        track = with_entry(getattr(state, self.field), event.step, progress)
        return evolve(state, **{self.field: track})

    def schedule(self, state: Instance, event: Event, input_limit: int, what: str) -> Instance:
        """The track's first attempt at ``event.step``, once its input (``what``) is
        within ``input_limit``; the caller has checked that the step may be scheduled."""
        require_size(event, input_limit, what)
        return self.put(state, event, _first_attempt(event))

    def start(
        self, state: Instance, event: Event, registry: Registry, command: AuditEntry | None
    ) -> Instance:
        require_status(state, event, *self.statuses)
        limits = self.limits(state, event)
        assert limits.timeout is not None and limits.retry is not None
        new = _start(self.progress(state, event), event, limits.timeout, limits.retry)
        return self.put(state, event, new)

    def outcome(
        self, state: Instance, event: Event, registry: Registry, command: AuditEntry | None
    ) -> Instance:
        limits = self.limits(state, event)
        return self.put(
            state, event, _outcome(self.progress(state, event), event, limits.result_limit)
        )


def _activity_step(state: Instance, event: Event) -> Step:
    return require_step(state, event, StepKind.ACTIVITY)


def _compensated_step(state: Instance, event: Event) -> Step:
    step = require_step(state, event, StepKind.ACTIVITY)
    if step.compensation is None:
        raise reject(event, f"activity {event.step!r} declares no compensation")
    return step


def _compensation(state: Instance, event: Event) -> Limits:
    return _compensated_step(state, event).compensation  # type: ignore[return-value]


ACTIVITIES = Track("activities", (S.RUNNING,), _activity_step)
COMPENSATIONS = Track("compensations", (S.RUNNING, S.CANCELLING, S.FAILING), _compensation)


def schedule_activity(
    state: Instance, event: Event, registry: Registry, command: AuditEntry | None
) -> Instance:
    step = require_first(state, event, StepKind.ACTIVITY, state.activities)
    return ACTIVITIES.schedule(state, event, step.input_limit, "activity input")


def retry_activity(
    state: Instance, event: Event, registry: Registry, command: AuditEntry | None
) -> Instance:
    require_status(state, event, *ACTIVITIES.statuses)
    step = _activity_step(state, event)
    assert step.retry is not None
    if command is None:
        return _retried_by_policy(ACTIVITIES, state, event, step.retry, step.on_unknown)
    new = _operator_retry(ACTIVITIES.progress(state, event), event)
    return ACTIVITIES.put(state, event, new)


def resolve_activity(
    state: Instance, event: Event, registry: Registry, command: AuditEntry | None
) -> Instance:
    step = _activity_step(state, event)
    progress = ACTIVITIES.progress(state, event)
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
    return ACTIVITIES.put(state, event, new)


def schedule_compensation(
    state: Instance, event: Event, registry: Registry, command: AuditEntry | None
) -> Instance:
    require_status(state, event, *COMPENSATIONS.statuses)
    step = _compensated_step(state, event)
    activity = state.activities.get(event.step)
    if activity is None or activity.status is not A.SUCCEEDED:
        raise reject(event, f"activity {event.step!r} has not succeeded; nothing to compensate")
    if event.step in state.compensations:
        raise reject(event, f"compensation of {event.step!r} is already scheduled")
    return COMPENSATIONS.schedule(state, event, step.input_limit, "compensation input")


def retry_compensation(
    state: Instance, event: Event, registry: Registry, command: AuditEntry | None
) -> Instance:
    require_status(state, event, *COMPENSATIONS.statuses)
    retry = _compensation(state, event).retry
    assert retry is not None
    return _retried_by_policy(COMPENSATIONS, state, event, retry, UnknownPolicy.HOLD)


def resolve_compensation(
    state: Instance, event: Event, registry: Registry, command: AuditEntry | None
) -> Instance:
    require_size(event, _compensation(state, event).result_limit, "resolution evidence")
    progress = COMPENSATIONS.progress(state, event)
    if progress.status not in (A.FAILED, A.UNKNOWN):
        raise reject(
            event,
            f"compensation of {event.step!r} is {progress.status.label}; only "
            "a failed or unknown compensation can be resolved by hand",
        )
    new = evolve(progress, status=A.MANUALLY_RESOLVED, code=event.code, result=event.data)
    return COMPENSATIONS.put(state, event, new)


def _first_attempt(event: Event) -> AttemptProgress:
    """A scheduled activity or compensation: ready, with the input it was given and the
    key its first attempt must use (histories written before the key was recorded with
    the schedule carry none, and their first start is not checked)."""
    return AttemptProgress(
        event.step, A.READY, event.sequence, input=event.data, next_key=event.idempotency_key
    )


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
    check_start(event, timeout, progress.retry_at, progress.next_key)
    return started(progress, event, A.RUNNING, started_at=event.occurred_at, result=None)


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


def _retried_by_policy(
    track: Track, state: Instance, event: Event, retry: RetryPolicy, on_unknown: UnknownPolicy
) -> Instance:
    """The state with the track's last attempt retried as its policy allows."""
    new = _policy_retry(track.progress(state, event), event, retry, on_unknown)
    return track.put(state, event, new)


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
    check_backoff(event, retry, progress.attempt)
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
    K.ATTEMPT_STARTED: ACTIVITIES.start,
    K.ATTEMPT_SUCCEEDED: ACTIVITIES.outcome,
    K.ATTEMPT_FAILED: ACTIVITIES.outcome,
    K.ATTEMPT_UNKNOWN: ACTIVITIES.outcome,
    K.RETRY_SCHEDULED: retry_activity,
    K.ACTIVITY_RESOLVED: resolve_activity,
    K.COMPENSATION_SCHEDULED: schedule_compensation,
    K.COMPENSATION_ATTEMPT_STARTED: COMPENSATIONS.start,
    K.COMPENSATION_SUCCEEDED: COMPENSATIONS.outcome,
    K.COMPENSATION_FAILED: COMPENSATIONS.outcome,
    K.COMPENSATION_UNKNOWN: COMPENSATIONS.outcome,
    K.COMPENSATION_RETRY_SCHEDULED: retry_compensation,
    K.COMPENSATION_MANUALLY_RESOLVED: resolve_compensation,
}
