"""Small checks shared by the replay handlers, each raising ReplayRejected."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from enum import Enum
from typing import Any, TypeVar

from engine.model.definitions import RetryPolicy, Step, StepKind
from engine.model.errors import ReplayRejected
from engine.model.events import Event
from engine.model.frozen import evolve
from engine.model.instance import Attempted, Instance, InstanceStatus
from engine.model.words import with_article

P = TypeVar("P", bound=Attempted)


def reject(event: Event, message: str) -> ReplayRejected:
    """The error for ``event`` breaking a rule (raise the result)."""
    return ReplayRejected(event.sequence, message)


def require_status(state: Instance, event: Event, *allowed: InstanceStatus) -> None:
    if state.status not in allowed:
        names = " or ".join(s.label for s in allowed)
        raise reject(
            event, f"{event.kind.label} needs the instance {names}, not {state.status.label}"
        )


def require_step(state: Instance, event: Event, *kinds: StepKind) -> Step:
    """The definition step the event names, which must be one of ``kinds``."""
    step = state.step(event.step)
    if step is None:
        raise reject(event, f"step {event.step!r} is not in {state.definition}")
    if step.kind not in kinds:
        raise reject(event, f"step {event.step!r} is {with_article(step.kind.value)} step")
    return step


def require_first(
    state: Instance,
    event: Event,
    kind: StepKind,
    taken: Mapping[str, object],
    already: str = "is already scheduled",
) -> Step:
    """The step of ``kind`` a running instance acts on for the first time (an activity,
    child or timer scheduled, a race won); ``already`` says why a second time is refused."""
    require_status(state, event, InstanceStatus.RUNNING)
    step = require_step(state, event, kind)
    if event.step in taken:
        raise reject(event, f"{kind.value} {event.step!r} {already}")
    return step


def check_start(event: Event, timeout: timedelta, retry_at: datetime | None, next_key: str) -> None:
    """The rules every attempt's start shares (an activity's, a compensation's, a child's):
    due exactly its timeout after it starts, never before its retry time, and with the
    idempotency key its schedule or retry fixed."""
    if event.due_at != event.occurred_at + timeout:
        raise reject(event, "due_at must be the start time plus the step timeout")
    if retry_at is not None and event.occurred_at < retry_at:
        raise reject(event, "attempt starts before its retry time")
    if next_key and event.idempotency_key != next_key:
        raise reject(event, "attempt must use the idempotency key its schedule or retry fixed")


def check_backoff(event: Event, retry: RetryPolicy, attempt: int) -> None:
    """A policy retry of ``attempt`` (an activity's, a compensation's, a child start's)
    is due exactly its backoff delay after it is scheduled."""
    if event.due_at != event.occurred_at + retry.backoff(attempt):
        raise reject(event, "retry due_at must be the time plus the backoff delay")


def started(progress: P, event: Event, status: Enum, **fields: Any) -> P:
    """``progress`` (of any attempt machine) once ``event`` started an attempt:
    numbered and keyed by it, due when it says, with the last outcome and retry cleared."""
    return evolve(
        progress,
        status=status,
        attempt=event.attempt,
        idempotency_key=event.idempotency_key,
        due_at=event.due_at,
        retry_at=None,
        next_key="",
        code="",
        retryable=False,
        **fields,
    )


def require_size(event: Event, limit: int, what: str) -> None:
    size = 0 if event.data is None else len(event.data.encode())
    if size > limit:
        raise reject(event, f"{what} is {size} bytes; the step allows at most {limit}")
