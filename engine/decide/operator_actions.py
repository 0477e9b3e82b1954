"""Operator commands: the audited actions a person can take on an instance.

Each command is one transition whose id is the command id: the audit event
(``operator_command_recorded``, carrying action, actor and reason) immediately
followed by its one effect. Replay rejects an audit without its effect, an effect that
needs an audit without one, and an audit followed by another action's effect.

``EFFECTS`` is the one table of what each action does: replay checks the pairing with
it and ``engine.decide.operator_commands`` writes the effect from it. It lives here,
apart from the builders, because replay needs it and the builders need the decisions,
which are built on replay.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from engine.decide.audit import Action
from engine.model.events import Event, EventKind
from engine.model.instance import AuditEntry

K = EventKind


@dataclass(frozen=True)
class Effect:
    """The one event that follows an action's audit."""

    kind: EventKind
    engine_decides_too: bool = False
    """Whether the engine also makes this event on its own (a retry, a compensation, an
    arriving signal); when it does not, the event needs an operator command before it."""


EFFECTS: dict[Action, Effect] = {
    Action.PAUSE: Effect(K.PAUSED),
    Action.RESUME: Effect(K.RESUMED),
    Action.CANCEL: Effect(K.CANCELLATION_REQUESTED),
    Action.TERMINATE: Effect(K.TERMINATED),
    Action.RETRY_ACTIVITY: Effect(K.RETRY_SCHEDULED, engine_decides_too=True),
    Action.COMPENSATE: Effect(K.COMPENSATION_SCHEDULED, engine_decides_too=True),
    Action.RESOLVE_COMPENSATION: Effect(K.COMPENSATION_MANUALLY_RESOLVED),
    Action.APPROVE: Effect(K.SIGNAL_RECEIVED, engine_decides_too=True),
    Action.SIGNAL: Effect(K.SIGNAL_RECEIVED, engine_decides_too=True),
    Action.RESOLVE_ACTIVITY: Effect(K.ACTIVITY_RESOLVED),
    Action.MIGRATE: Effect(K.DEFINITION_MIGRATED),
}

OPERATOR_ONLY_KINDS = frozenset(
    effect.kind for effect in EFFECTS.values() if not effect.engine_decides_too
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
