"""Operator commands: the audited actions a person can take on an instance.

Each command is one transition whose id is the command id: the audit event
(``operator_command_recorded``, carrying action, actor and reason) immediately
followed by its one effect. Replay rejects an audit without its effect, an effect that
needs an audit without one, and an audit followed by another action's effect.
"""

from __future__ import annotations

import json

from engine.decide.audit import Action
from engine.model.events import Event, EventKind
from engine.model.instance import AuditEntry

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
    """The audit entry an ``operator_command_recorded`` event carries (its record was
    checked with the event: ``engine.decide.audit``)."""
    record = json.loads(event.data or "{}")
    return AuditEntry(
        command_id=event.idempotency_key,
        action=Action(record["action"]).value,
        actor=record["actor"],
        reason=record["reason"],
        occurred_at=event.occurred_at,
        sequence=event.sequence,
    )
