"""Replay of child workflows: scheduling, start attempts and the child's outcome.

A child is pinned to the exact (name, version, fingerprint) its step declares. Its
start follows the attempt pattern (start attempted before the child is created; a
retry only after a known-absent retryable failure, with a new key). The child's
terminal outcome is accepted while its start is running, unknown or done, because a
durably observed outcome proves that the child exists. The step's ``result_limit``
bounds the child's result and any failure's detail.
"""

from __future__ import annotations

from engine.model.deferred import with_entry
from engine.model.definitions import Step, StepKind
from engine.model.events import Event, EventKind
from engine.model.frozen import evolve
from engine.model.instance import AuditEntry, ChildProgress, ChildStatus, Instance, InstanceStatus
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

C = ChildStatus
K = EventKind
S = InstanceStatus


def schedule_child(
    state: Instance, event: Event, registry: Registry, command: AuditEntry | None
) -> Instance:
    step = require_first(state, event, StepKind.CHILD, state.children)
    if event.definition != step.child_definition:
        raise reject(event, f"child {event.step!r} must use the pinned child definition")
    require_size(event, step.input_limit, "child input")
    assert event.definition is not None
    progress = ChildProgress(
        event.step,
        C.SCHEDULED,
        event.successor_id,
        event.definition,
        input=event.data,
        next_key=event.idempotency_key,
    )
    return _put(state, progress)


def start_child(
    state: Instance, event: Event, registry: Registry, command: AuditEntry | None
) -> Instance:
    require_status(state, event, S.RUNNING)
    step, child = _child(state, event)
    assert step.retry is not None and step.timeout is not None
    if child.status not in (C.SCHEDULED, C.RETRY_WAITING):
        raise reject(
            event,
            f"child {event.step!r} is {child.status.label}; a start attempt "
            "needs it scheduled or waiting to retry",
        )
    if event.attempt != child.attempt + 1 or event.attempt > step.retry.max_attempts:
        raise reject(
            event,
            f"start attempt must be {child.attempt + 1} and at most {step.retry.max_attempts}",
        )
    check_start(event, step.timeout, child.retry_at, child.next_key)
    return _put(state, started(child, event, C.START_RUNNING))


def start_outcome(
    state: Instance, event: Event, registry: Registry, command: AuditEntry | None
) -> Instance:
    step, child = _child(state, event)
    if child.status is not C.START_RUNNING or event.attempt != child.attempt:
        raise reject(event, f"child {event.step!r} has no start attempt {event.attempt} in flight")
    require_size(event, step.result_limit, "child failure detail")  # started carries none
    status = {
        K.CHILD_STARTED: C.ACTIVE,
        K.CHILD_START_FAILED: C.START_FAILED,
        K.CHILD_START_UNKNOWN: C.START_UNKNOWN,
    }[event.kind]
    return _put(state, evolve(child, status=status, code=event.code, retryable=event.retryable))


def retry_child(
    state: Instance, event: Event, registry: Registry, command: AuditEntry | None
) -> Instance:
    require_status(state, event, S.RUNNING)
    step, child = _child(state, event)
    assert step.retry is not None
    if child.status is not C.START_FAILED or not child.retryable:
        raise reject(
            event,
            f"child {event.step!r} start is retried only after a retryable known-absent failure",
        )
    if event.attempt != child.attempt or child.attempt >= step.retry.max_attempts:
        raise reject(event, "retry must name the last attempt, with attempts left")
    check_backoff(event, step.retry, child.attempt)
    if event.idempotency_key == child.idempotency_key:
        raise reject(event, "a start retry after a known-absent failure uses a new key")
    return _put(
        state,
        evolve(
            child, status=C.RETRY_WAITING, retry_at=event.due_at, next_key=event.idempotency_key
        ),
    )


def child_outcome(
    state: Instance, event: Event, registry: Registry, command: AuditEntry | None
) -> Instance:
    step, child = _child(state, event)
    if child.status not in (C.START_RUNNING, C.ACTIVE, C.START_UNKNOWN):
        raise reject(event, f"child {event.step!r} is {child.status.label}; no outcome can arrive")
    if event.kind is K.CHILD_COMPLETED:
        require_size(event, step.result_limit, "child result")
        return _put(state, evolve(child, status=C.SUCCEEDED, result=event.data, code=""))
    require_size(event, step.result_limit, "child failure detail")
    return _put(state, evolve(child, status=C.FAILED, code=event.code, result=event.data))


def _child(state: Instance, event: Event) -> tuple[Step, ChildProgress]:
    step = require_step(state, event, StepKind.CHILD)
    child = state.children.get(event.step)
    if child is None:
        raise reject(event, f"child {event.step!r} was never scheduled")
    if event.successor_id and event.successor_id != child.child_id:
        raise reject(event, f"child {event.step!r} is instance {child.child_id!r}")
    return step, child


def _put(state: Instance, child: ChildProgress) -> Instance:
    return evolve(state, children=with_entry(state.children, child.step, child))


RULES = {
    K.CHILD_SCHEDULED: schedule_child,
    K.CHILD_START_ATTEMPTED: start_child,
    K.CHILD_STARTED: start_outcome,
    K.CHILD_START_FAILED: start_outcome,
    K.CHILD_START_UNKNOWN: start_outcome,
    K.CHILD_START_RETRY_SCHEDULED: retry_child,
    K.CHILD_COMPLETED: child_outcome,
    K.CHILD_FAILED: child_outcome,
}
