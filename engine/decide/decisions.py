"""Builders for every engine decision, each appending to a Draft.

A builder adds the events of one decision (and the work they create) to a Draft,
which applies them to the replayed state as they are added; several decisions can go
into one transition (an outcome and the next step, or all branches of a parallel).
Identities are derived, never random: an attempt's idempotency key is
``<instance>/<step>/<attempt>`` (``/compensate/`` and ``/child/`` for the other tracks)
and work ids join the instance, creating sequence, kind and step with ``#``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from engine.model.canonical import canonical_json
from engine.model.definitions import DefinitionRef, Step
from engine.model.events import Event, EventKind, json_data
from engine.model.identifiers import step_id_problem
from engine.model.instance import Attempted, AttemptProgress, ChildProgress
from engine.model.limits import MAX_IDENTIFIER_LENGTH, WORK_CLAIM_WINDOW
from engine.model.transitions import Draft, WorkKind

K = EventKind
ACTIVITY_OUTCOME_UNKNOWN = "activity-outcome-unknown"
COMPENSATION_OUTCOME_UNKNOWN = "compensation-outcome-unknown"


def attempt_key(instance_id: str, step: str, attempt: int, track: str = "") -> str:
    """The idempotency key of one semantic attempt."""
    middle = f"/{track}" if track else ""
    return f"{instance_id}/{step}{middle}/{attempt}"


def next_key(instance_id: str, progress: AttemptProgress) -> str:
    """The key of the attempt after a known failure: a new effect, so a new key. A code
    step's key is its ``step_id``, whose try grows by one (``charge#1.1`` ->
    ``charge#1.2``); any other is the next attempt's ``attempt_key``."""
    key = progress.idempotency_key
    if key and step_id_problem(key) is None:
        head, _, tried = key.rpartition(".")
        return f"{head}.{int(tried) + 1}"
    return attempt_key(instance_id, progress.step, progress.attempt + 1)


def child_instance_id(parent_id: str, step: str) -> str:
    """The child's instance id: readable when short, a digest when it would be too long."""
    readable = f"{parent_id}/{step}"
    if len(readable) <= MAX_IDENTIFIER_LENGTH:
        return readable
    from engine.model.canonical import digest

    return f"child-{digest([parent_id, step])[:40]}"


def _step(draft: Draft, name: str) -> Step:
    assert draft.state is not None
    step = draft.state.step(name)
    assert step is not None, name
    return step


def _dispatch_work(
    draft: Draft,
    event: Event,
    kind: WorkKind,
    step: str,
    attempt: int,
    key: str,
    timeout: timedelta,
    available_at: datetime,
    extra: dict[str, Any] | None = None,
) -> None:
    payload = {"step": step, "attempt": attempt, "key": key, **(extra or {})}
    work_id = "#".join([draft.instance_id, str(event.sequence), kind.label, step])
    deadline = available_at + timeout + WORK_CLAIM_WINDOW
    draft.add_work(
        work_id, kind, event, available_at, deadline, payload, _target(draft, kind, step)
    )


def _target(draft: Draft, kind: WorkKind, name: str) -> str:
    """The handler a worker needs for this work: the activity's or its compensation's."""
    step = _step(draft, name)
    if kind is WorkKind.ACTIVITY:
        return step.target
    if kind is WorkKind.COMPENSATION and step.compensation is not None:
        return step.compensation.target
    return ""


# Activities ---------------------------------------------------------------------------


def schedule_activity(draft: Draft, name: str, input: Any = None, key: str = "") -> Event:
    """Schedule an activity's first attempt: the event and its due work, now; ``key`` is
    its idempotency key when the caller names one (a code step's ``step_id``)."""
    key = key or attempt_key(draft.instance_id, name, 1)
    event = draft.add(K.ACTIVITY_SCHEDULED, step=name, data=json_data(input), idempotency_key=key)
    step = _step(draft, name)
    assert step.timeout is not None
    _dispatch_work(draft, event, WorkKind.ACTIVITY, name, 1, key, step.timeout, draft.now)
    return event


def start_activity_attempt(draft: Draft, name: str, attempt: int, key: str) -> Event:
    """Record that an attempt starts; must be durable before the handler runs."""
    timeout = _step(draft, name).timeout
    assert timeout is not None
    return _attempt_event(draft, K.ATTEMPT_STARTED, name, attempt, key, draft.now + timeout)


def record_outcome(
    draft: Draft,
    name: str,
    attempt: int,
    kind: EventKind,
    result: Any = None,
    code: str = "",
    retryable: bool = False,
    *,
    data: str | None = None,
) -> Event:
    """Record succeeded / failed / unknown for an attempt in flight (``kind`` names the
    track: ``attempt_*`` for activities, ``compensation_*`` for compensations).
    ``data``: ``result``'s canonical JSON, when the caller has encoded it already."""
    text = json_data(result) if data is None else data
    return draft.add(kind, step=name, attempt=attempt, data=text, code=code, retryable=retryable)


def schedule_activity_retry(
    draft: Draft, progress: AttemptProgress, same_key: bool, operator: bool = False
) -> Event:
    """A new attempt after a failure (new key) or an unknown outcome (same key)."""
    step = _step(draft, progress.step)
    assert step.retry is not None and step.timeout is not None
    key = progress.idempotency_key if same_key else next_key(draft.instance_id, progress)
    due = draft.now if operator else draft.now + step.retry.backoff(progress.attempt)
    return _schedule_retry(draft, WorkKind.ACTIVITY, progress, key, due, step.timeout)


def _attempt_event(
    draft: Draft, kind: EventKind, name: str, attempt: int, key: str, due: datetime
) -> Event:
    """An attempt's start or its retry's schedule, on any track: the attempt, its
    idempotency key and when it is due."""
    return draft.add(kind, step=name, attempt=attempt, idempotency_key=key, due_at=due)


RETRY_KINDS = {
    WorkKind.ACTIVITY: K.RETRY_SCHEDULED,
    WorkKind.COMPENSATION: K.COMPENSATION_RETRY_SCHEDULED,
    WorkKind.CHILD: K.CHILD_START_RETRY_SCHEDULED,
}
"""The event that schedules a retry on each track, named by the work that runs it."""


def _schedule_retry(
    draft: Draft,
    work: WorkKind,
    progress: Attempted,
    key: str,
    due: datetime,
    timeout: timedelta,
    extra: dict[str, Any] | None = None,
) -> Event:
    """A retry on any track: the event naming the last attempt, and the ``work`` that
    runs the next one under ``key`` once it is due."""
    step, nxt = progress.step, progress.attempt + 1
    event = _attempt_event(draft, RETRY_KINDS[work], step, progress.attempt, key, due)
    _dispatch_work(draft, event, work, step, nxt, key, timeout, due, extra)
    return event


# Compensations ------------------------------------------------------------------------


def schedule_compensation(draft: Draft, name: str) -> Event:
    """Schedule the compensation of a succeeded activity, with the activity's input."""
    assert draft.state is not None
    spec = _step(draft, name).compensation
    assert spec is not None
    key = attempt_key(draft.instance_id, name, 1, "compensate")
    input = draft.state.activities[name].input
    event = draft.add(K.COMPENSATION_SCHEDULED, step=name, data=input, idempotency_key=key)
    _dispatch_work(draft, event, WorkKind.COMPENSATION, name, 1, key, spec.timeout, draft.now)
    return event


def start_compensation_attempt(draft: Draft, name: str, attempt: int, key: str) -> Event:
    spec = _step(draft, name).compensation
    assert spec is not None
    due = draft.now + spec.timeout
    return _attempt_event(draft, K.COMPENSATION_ATTEMPT_STARTED, name, attempt, key, due)


def schedule_compensation_retry(draft: Draft, progress: AttemptProgress) -> Event:
    spec = _step(draft, progress.step).compensation
    assert spec is not None
    key = attempt_key(draft.instance_id, progress.step, progress.attempt + 1, "compensate")
    due = draft.now + spec.retry.backoff(progress.attempt)
    return _schedule_retry(draft, WorkKind.COMPENSATION, progress, key, due, spec.timeout)


# Timers, signals, races ---------------------------------------------------------------


def schedule_timer(draft: Draft, name: str) -> Event:
    """The timer event and its work, available exactly when the timer is due."""
    timeout = _step(draft, name).timeout
    assert timeout is not None
    due = draft.now + timeout
    event = draft.add(K.TIMER_SCHEDULED, step=name, due_at=due)
    work_id = "#".join([draft.instance_id, str(event.sequence), WorkKind.TIMER.label, name])
    draft.add_work(work_id, WorkKind.TIMER, event, due, due + WORK_CLAIM_WINDOW, {"step": name})
    return event


def fire_timer(draft: Draft, name: str) -> Event:
    return draft.add(K.TIMER_FIRED, step=name)


def accept_signal(draft: Draft, name: str, signal_id: str, payload: Any = None) -> Event:
    """Record a signal; the transition's id should be derived from ``signal_id``."""
    return draft.add(
        K.SIGNAL_RECEIVED, step=name, idempotency_key=signal_id, data=json_data(payload)
    )


def record_race_winner(draft: Draft, race: str, winner: str) -> Event:
    return draft.add(K.RACE_WON, step=race, data=canonical_json(winner))


# Children -----------------------------------------------------------------------------


def schedule_child(
    draft: Draft, name: str, input: Any = None, definition: DefinitionRef | None = None
) -> Event:
    """Pin and schedule a child instance, and the work that will start it; a code-first
    run's spawn names the ``definition`` it pinned (its step is made by the event)."""
    pinned = definition or _step(draft, name).child_definition
    child_id = child_instance_id(draft.instance_id, name)
    key = attempt_key(draft.instance_id, name, 1, "child")
    event = draft.add(
        K.CHILD_SCHEDULED,
        step=name,
        definition=pinned,
        successor_id=child_id,
        data=json_data(input),
        idempotency_key=key,
    )
    step = _step(draft, name)
    assert step.child_definition is not None and step.timeout is not None
    _dispatch_work(
        draft,
        event,
        WorkKind.CHILD,
        name,
        1,
        key,
        step.timeout,
        draft.now,
        _child_dispatch(child_id, step.child_definition),
    )
    return event


def start_child_attempt(draft: Draft, child: ChildProgress, attempt: int, key: str) -> Event:
    timeout = _step(draft, child.step).timeout
    assert timeout is not None
    return draft.add(
        K.CHILD_START_ATTEMPTED,
        step=child.step,
        attempt=attempt,
        idempotency_key=key,
        successor_id=child.child_id,
        due_at=draft.now + timeout,
    )


def record_child_start(
    draft: Draft, child: ChildProgress, kind: EventKind, code: str = "", retryable: bool = False
) -> Event:
    """CHILD_STARTED (it exists), CHILD_START_FAILED (known absent) or _UNKNOWN."""
    successor = child.child_id if kind is K.CHILD_STARTED else ""
    return draft.add(
        kind,
        step=child.step,
        attempt=child.attempt,
        successor_id=successor,
        code=code,
        retryable=retryable,
    )


def schedule_child_retry(draft: Draft, child: ChildProgress) -> Event:
    step = _step(draft, child.step)
    assert step.retry is not None and step.timeout is not None
    key = attempt_key(draft.instance_id, child.step, child.attempt + 1, "child")
    due = draft.now + step.retry.backoff(child.attempt)
    extra = _child_dispatch(child.child_id, child.definition)
    return _schedule_retry(draft, WorkKind.CHILD, child, key, due, step.timeout, extra)


def record_child_outcome(
    draft: Draft, child: ChildProgress, completed: bool, result: Any = None, code: str = ""
) -> Event:
    kind = K.CHILD_COMPLETED if completed else K.CHILD_FAILED
    return draft.add(
        kind, step=child.step, successor_id=child.child_id, data=json_data(result), code=code
    )


def _child_dispatch(child_id: str, ref: DefinitionRef) -> dict[str, Any]:
    """What a child's start work carries beyond the attempt: the child and its pin."""
    return {"child_id": child_id, "definition": ref.to_json()}
