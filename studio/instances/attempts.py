"""Every attempt of every activity and compensation, folded from history.

The replayed Instance keeps only the latest attempt of each step (that is all the
engine needs to decide). An operator asking "why is this failing?" needs each attempt:
when it started, which idempotency key it used, how it ended (including *unknown*:
the handler may or may not have taken effect), with which code, and when the next
attempt was due. This fold reads the same events replay does, alongside it, so the
studio never reads history twice. It keeps the newest ``KEEP_PER_STEP`` attempts per
step; older ones stay in the history view.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from engine.model.events import Event, EventKind

K = EventKind
KEEP_PER_STEP = 25

ACTIVITY, COMPENSATION = "activity", "compensation"
STARTS = {K.ATTEMPT_STARTED: ACTIVITY, K.COMPENSATION_ATTEMPT_STARTED: COMPENSATION}
OUTCOMES = {
    K.ATTEMPT_SUCCEEDED: (ACTIVITY, "succeeded"),
    K.ATTEMPT_FAILED: (ACTIVITY, "failed"),
    K.ATTEMPT_UNKNOWN: (ACTIVITY, "unknown"),
    K.COMPENSATION_SUCCEEDED: (COMPENSATION, "succeeded"),
    K.COMPENSATION_FAILED: (COMPENSATION, "failed"),
    K.COMPENSATION_UNKNOWN: (COMPENSATION, "unknown"),
}
RETRIES = {K.RETRY_SCHEDULED: ACTIVITY, K.COMPENSATION_RETRY_SCHEDULED: COMPENSATION}


@dataclass(frozen=True)
class AttemptIdentity:
    """Which attempt: what history and the work row carrying it both name it by, so the
    table can show an attempt that only one of them knows yet."""

    track: str
    """``activity`` or ``compensation``."""
    step: str
    attempt: int
    key: str
    """The attempt's idempotency key (what an activity sees)."""


@dataclass(frozen=True)
class AttemptRecord(AttemptIdentity):
    """One attempt as history tells it."""

    started_at: datetime
    timeout_at: datetime | None
    started_sequence: int
    outcome: str = "running"
    """running, succeeded, failed, unknown, or ``resolved: <resolution>`` by an operator."""
    code: str = ""
    retryable: bool = False
    ended_at: datetime | None = None
    ended_sequence: int = 0
    next_attempt_at: datetime | None = None
    """When the retry after this attempt was (or is) due; None when none was scheduled."""
    next_key: str = ""

    @property
    def in_doubt(self) -> bool:
        return self.outcome == "unknown"


Key = tuple[str, str]
"""(track, step)"""


@dataclass(frozen=True)
class AttemptLog:
    """Attempts per (track, step), oldest first; immutable like the Instance beside it."""

    by_step: dict[Key, tuple[AttemptRecord, ...]]

    def of(self, track: str, step: str) -> tuple[AttemptRecord, ...]:
        return self.by_step.get((track, step), ())

    def last(self, track: str, step: str) -> AttemptRecord | None:
        found = self.of(track, step)
        return found[-1] if found else None


EMPTY = AttemptLog({})


def fold(log: AttemptLog, event: Event) -> AttemptLog:
    """The log after ``event`` (unchanged for events about anything else)."""
    kind = event.kind
    if kind in STARTS:
        record = AttemptRecord(
            STARTS[kind],
            event.step,
            event.attempt,
            event.idempotency_key,
            event.occurred_at,
            event.due_at,
            event.sequence,
        )
        return _append(log, record)
    if kind in OUTCOMES:
        track, outcome = OUTCOMES[kind]
        return _update(log, track, event, outcome=outcome, code=event.code, ended=True)
    if kind in RETRIES:
        return _update(
            log, RETRIES[kind], event, next_attempt_at=event.due_at, next_key=event.idempotency_key
        )
    if kind is K.ACTIVITY_RESOLVED:
        return _update(log, ACTIVITY, event, outcome=f"resolved: {event.code}", ended=True)
    if kind is K.COMPENSATION_MANUALLY_RESOLVED:
        latest = log.last(COMPENSATION, event.step)
        if latest is None:
            return log
        event = replace(event, attempt=latest.attempt)
        return _update(log, COMPENSATION, event, outcome=f"resolved: {event.code}", ended=True)
    return log


def _append(log: AttemptLog, record: AttemptRecord) -> AttemptLog:
    key = (record.track, record.step)
    kept = (*log.of(*key), record)[-KEEP_PER_STEP:]
    return AttemptLog({**log.by_step, key: kept})


def _update(
    log: AttemptLog,
    track: str,
    event: Event,
    *,
    ended: bool = False,
    **changes: object,
) -> AttemptLog:
    """Change the record of ``event.attempt`` (the newest with that number)."""
    records = list(log.of(track, event.step))
    for position in range(len(records) - 1, -1, -1):
        if records[position].attempt == event.attempt:
            if ended:
                changes |= {"ended_at": event.occurred_at, "ended_sequence": event.sequence}
                changes["retryable"] = event.retryable
            records[position] = replace(records[position], **changes)  # type: ignore[arg-type]
            return AttemptLog({**log.by_step, (track, event.step): tuple(records)})
    return log
