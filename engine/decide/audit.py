"""The audit of an operator command: the actions, and the one rule its fields follow.

``audit_problem`` is the only check of an audit record. The event check applies it to
every ``operator_command_recorded`` event however it was built (a history read back,
an imported one, a builder's), and ``record_command`` applies it before it adds one, so
an audit the engine writes is exactly one that the event check and replay accept. Its
actor and reason rules are the ones dead-letter resolutions follow too. It lives apart
from ``engine.decide.operator_actions`` because the event check needs it and that module needs
the events.
"""

from __future__ import annotations

from enum import StrEnum

from engine.model.canonical import canonical_json
from engine.model.identifiers import id_problem
from engine.model.limits import MAX_OPERATOR_AUDIT_BYTES, MAX_REASON_LENGTH


class Action(StrEnum):
    PAUSE = "pause"
    RESUME = "resume"
    CANCEL = "cancel"
    TERMINATE = "terminate"
    RETRY_ACTIVITY = "retry_activity"
    COMPENSATE = "compensate"
    RESOLVE_COMPENSATION = "resolve_compensation"
    APPROVE = "approve"
    SIGNAL = "signal"
    RESOLVE_ACTIVITY = "resolve_activity"
    MIGRATE = "migrate"


DANGEROUS = frozenset({Action.CANCEL, Action.TERMINATE, Action.COMPENSATE})
"""Actions that end or unwind what an instance did, past undoing: wherever they are
offered (one instance or many) they are marked as dangerous."""

LIFECYCLE: dict[Action, str] = {
    Action.PAUSE: "Pause",
    Action.RESUME: "Resume",
    Action.CANCEL: "Cancel",
    Action.TERMINATE: "Terminate",
}
"""The actions on a whole instance (they take no step), in the order they are offered
(one instance or many), with the label every offer of them shows."""

AUDIT_KEYS = frozenset({"action", "actor", "reason"})
ACTIONS = frozenset(Action)
REASON_RULE = f"a reason of 1 to {MAX_REASON_LENGTH} characters, not only spaces, is required"


def audit_problem(record: object) -> str | None:
    """Why ``record`` is not a valid audit record, or None when it is: a known action,
    ``actor_problem`` and ``reason_problem``, and at most MAX_OPERATOR_AUDIT_BYTES of
    canonical JSON."""
    if not isinstance(record, dict) or set(record) != AUDIT_KEYS:
        return "audit record must be an object with exactly action, actor and reason"
    action = record["action"]
    if not isinstance(action, str) or action not in ACTIONS:
        return f"audit record: action must be one of: {', '.join(a.value for a in Action)}"
    if problem := actor_problem(record["actor"]) or reason_problem(record["reason"]):
        return f"audit record: {problem}"
    size = len(canonical_json(record).encode())
    if size > MAX_OPERATOR_AUDIT_BYTES:
        return f"audit record is {size} bytes; at most {MAX_OPERATOR_AUDIT_BYTES} allowed"
    return None


COMMAND_LINE_ACTOR = "cli"
"""Who the command line acts as when it is not told (``wayline start``, ``definition
publish``; ``--actor`` names someone else) and what the studio's members audit names it
(``wayline user create``): one name wherever the command line is an actor. An id, as
every actor the engine records must be (a phrase such as ``command line`` is not one);
the studio keeps it from being anybody's username, so it names no person."""


def actor_problem(actor: object) -> str | None:
    """Why ``actor`` cannot be recorded as who acted, or None: it is an id (an
    authenticated principal, so no surrounding spaces), as for every audited command."""
    problem = id_problem(actor)
    return f"actor {problem}" if problem else None


def reason_problem(reason: object) -> str | None:
    """Why ``reason`` cannot be recorded as why, or None: free text a person typed, so
    only that it says something and its length are checked."""
    if not isinstance(reason, str) or not reason.strip() or len(reason) > MAX_REASON_LENGTH:
        return REASON_RULE
    return None
