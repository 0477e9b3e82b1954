"""Converting events and work between engine values and table rows."""

from __future__ import annotations

import json
from enum import IntEnum
from typing import Any

from engine.model.definitions import DefinitionRef
from engine.model.errors import EventInvalid
from engine.model.events import Event, EventKind, make_event
from engine.model.instance import InstanceStatus
from engine.model.transitions import Transition, WorkItem, WorkKind
from engine.store.errors import CorruptStore


class WorkState(IntEnum):
    """A work row's ``state`` column: the one place its numbers are named. Statements
    interpolate the members (an IntEnum renders as its number), so the SQL text, and with
    it the partial indexes it matches, is the same as the migrations' literals."""

    AVAILABLE = 1
    LEASED = 2
    COMPLETED = 3
    DEAD_LETTERED = 4
    HELD = 5
    """Parked by an incident hold (``engine.store.holds``): due again once released."""

    @property
    def label(self) -> str:
        return self.name.lower().replace("_", "-")


HISTORY_FIELDS = (
    *("instance_id", "sequence", "kind", "occurred_at", "definition_name"),
    *("definition_version", "definition_fingerprint", "successor_id", "step_name"),
    *("attempt", "idempotency_key", "due_at", "code", "retryable", "data", "trace_context"),
    "started_by",
)
"""The history table's columns, in ``event_row`` order."""
WORK_FIELDS = (
    *("work_id", "kind", "instance_id", "sequence", "available_at", "deadline", "payload"),
    *("tenant_id", "correlation_id", "target"),
)
"""The work table's columns a transition writes, in ``work_row`` order."""
HISTORY_COLUMNS = ", ".join(HISTORY_FIELDS)


STATUS_AFTER = {
    EventKind.INSTANCE_STARTED: InstanceStatus.RUNNING,
    EventKind.PAUSED: InstanceStatus.PAUSED,
    EventKind.RESUMED: InstanceStatus.RUNNING,
    EventKind.CANCELLATION_REQUESTED: InstanceStatus.CANCELLING,
    EventKind.INSTANCE_FAILING: InstanceStatus.FAILING,
    EventKind.CANCELLED: InstanceStatus.CANCELLED,
    EventKind.COMPLETED: InstanceStatus.COMPLETED,
    EventKind.FAILED: InstanceStatus.FAILED,
    EventKind.TERMINATED: InstanceStatus.TERMINATED,
    EventKind.CONTINUED_AS_NEW: InstanceStatus.CONTINUED_AS_NEW,
}
"""The instance status each lifecycle event leads to (kept in the instances row for lists)."""


def event_row(event: Event) -> tuple[Any, ...]:
    ref = event.definition
    return (
        event.instance_id,
        event.sequence,
        int(event.kind),
        event.occurred_at,
        ref.name if ref else "",
        ref.version if ref else "",
        ref.fingerprint if ref else "",
        event.successor_id,
        event.step,
        event.attempt,
        event.idempotency_key,
        event.due_at,
        event.code,
        event.retryable,
        bytea_text(event.data),
        event.trace_context or None,
        event.started_by or None,
    )


def bytea_text(text: str | None) -> str | None:
    """``text``'s UTF-8 bytes in bytea's hex input form, as a row sent in JSON carries
    them (JSON has no bytes; the server reads this into the bytea column)."""
    return None if text is None else "\\x" + text.encode().hex()


def event_from_row(row: tuple[Any, ...]) -> Event:
    """Decode a history row; rows that break the model are CorruptStore, never guessed."""
    (
        instance_id,
        sequence,
        kind,
        occurred_at,
        d_name,
        d_version,
        d_fp,
        successor_id,
        step,
        attempt,
        key,
        due_at,
        code,
        retryable,
        data,
        trace_context,
        started_by,
    ) = row
    try:
        return make_event(
            sequence=sequence,
            instance_id=instance_id,
            kind=EventKind(kind),
            occurred_at=occurred_at,
            definition=DefinitionRef(d_name, d_version, d_fp) if d_name else None,
            successor_id=successor_id,
            step=step,
            attempt=attempt,
            idempotency_key=key,
            due_at=due_at,
            code=code,
            retryable=retryable,
            data=None if data is None else bytes(data).decode(),
            trace_context=trace_context or "",
            started_by=started_by or "",
        )
    except (EventInvalid, ValueError, UnicodeDecodeError) as exc:
        raise CorruptStore(f"history row {sequence} of an instance is not a valid event") from exc


def work_kind(number: int) -> WorkKind | int:
    """The WorkKind of a stored number, or the number itself when this build lacks it."""
    try:
        return WorkKind(number)
    except ValueError:
        return number


def payload_text(raw: bytes | None) -> str | None:
    """A work row's payload as text; bytes that are not UTF-8 are replaced, never fatal
    (the payload's reader rejects it, for that one row)."""
    return None if raw is None else bytes(raw).decode(errors="replace")


def payload_fields(raw: bytes | str | None) -> dict[str, Any]:
    """A work row's dispatch payload as a dict ({} when absent or not a JSON object: a
    view of a poison payload must still show its row)."""
    if raw is None:
        return {}
    try:
        value = json.loads(raw if isinstance(raw, str) else bytes(raw).decode())
    except (ValueError, UnicodeDecodeError):
        return {}
    return value if isinstance(value, dict) else {}


def work_row(item: WorkItem) -> tuple[Any, ...]:
    return (
        item.work_id,
        int(item.kind),
        item.instance_id,
        item.sequence,
        item.available_at,
        item.deadline,
        bytea_text(item.payload),
        item.tenant_id,
        item.correlation_id,
        item.target,
    )


def status_after(transition: Transition) -> InstanceStatus | None:
    """The instance status after the transition, or None when it does not change."""
    status = None
    for event in transition.events:
        status = STATUS_AFTER.get(event.kind, status)
    return status
