"""Operator commands: the audited actions a person can take on an instance.

Each command is one transition whose id is the command id: the audit event
(``operator_command_recorded``, carrying action, actor and reason) immediately
followed by its one effect. Replay rejects an audit without its effect, an effect that
needs an audit without one, and an audit followed by another action's effect.
"""

from __future__ import annotations

import json
from enum import StrEnum

from engine.errors import ReplayRejected
from engine.events import Event, EventKind
from engine.instance import AuditEntry


class Action(StrEnum):
    PAUSE = "pause"
    RESUME = "resume"
    CANCEL = "cancel"
    TERMINATE = "terminate"
    RETRY_ACTIVITY = "retry_activity"
    COMPENSATE = "compensate"
    RESOLVE_COMPENSATION = "resolve_compensation"
    APPROVE = "approve"
    RESOLVE_ACTIVITY = "resolve_activity"
    MIGRATE = "migrate"


ACTION_EFFECTS: dict[str, EventKind] = {
    Action.PAUSE: EventKind.PAUSED,
    Action.RESUME: EventKind.RESUMED,
    Action.CANCEL: EventKind.CANCELLATION_REQUESTED,
    Action.TERMINATE: EventKind.TERMINATED,
    Action.RETRY_ACTIVITY: EventKind.RETRY_SCHEDULED,
    Action.COMPENSATE: EventKind.COMPENSATION_SCHEDULED,
    Action.RESOLVE_COMPENSATION: EventKind.COMPENSATION_MANUALLY_RESOLVED,
    Action.APPROVE: EventKind.SIGNAL_RECEIVED,
    Action.RESOLVE_ACTIVITY: EventKind.ACTIVITY_RESOLVED,
    Action.MIGRATE: EventKind.DEFINITION_MIGRATED,
}

OPERATOR_ONLY_KINDS = frozenset(
    {
        EventKind.PAUSED,
        EventKind.RESUMED,
        EventKind.CANCELLATION_REQUESTED,
        EventKind.TERMINATED,
        EventKind.COMPENSATION_MANUALLY_RESOLVED,
        EventKind.ACTIVITY_RESOLVED,
        EventKind.DEFINITION_MIGRATED,
    }
)
"""Effects that only an operator command may cause."""


def audit_from_event(event: Event) -> AuditEntry:
    """The audit entry an ``operator_command_recorded`` event carries."""
    record = json.loads(event.data or "{}")
    try:
        action = Action(record["action"])
    except ValueError:
        allowed = ", ".join(a.value for a in Action)
        raise ReplayRejected(
            event.sequence, f"unknown operator action; allowed: {allowed}"
        ) from None
    return AuditEntry(
        command_id=event.idempotency_key,
        action=action.value,
        actor=record["actor"],
        reason=record["reason"],
        occurred_at=event.occurred_at,
        sequence=event.sequence,
    )
