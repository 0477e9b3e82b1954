"""History events: the append-only record every instance is replayed from.

An event is one flat record (the same columns for every kind, as stored in
PostgreSQL), and each kind admits only its own fields: ``make_event`` refuses an event
that lacks a field its kind needs or carries one it does not allow, before anything
is fingerprinted or written. Instants are UTC with microsecond precision; ``data`` is
canonical JSON text (or None) so an event round-trips exactly through JSON and SQL.

Kinds 1-36 follow the reference model; ``instance_started`` of a child also names its
parent in ``successor_id`` and the parent's step in ``step``. Two kinds are ours:
``activity_resolved`` (an operator settles an unknown activity outcome) and
``instance_failing`` (a known terminal failure starts compensating before the
instance fails). Two belong to state machines (``engine.modes.machines``):
``state_entered`` (an advance's attempt moved the machine into the state its ``step``
names, with the state's fields as ``data``) and ``advance_failed`` (an attempt failed
with ``code``; ``due_at`` is when the next one is due, absent when none is left).
Three belong to code-first workflows (``engine.modes.code``): ``wait_started`` (the
code awaits signals or spawned runs: ``wait_signal``, ``race`` or ``all``, named by
its journal key in ``step``; ``due_at`` when its first entry times out),
``wait_resolved`` (an entry of that wait resolved, by a signal, a spawned run's end or
its timeout; ``due_at`` when the next entry of an ``all`` times out) and
``value_recorded`` (the value ``ctx.now()``, ``ctx.random()`` or ``ctx.uuid4()``
returned, replayed identically). A code step's attempts use ``step_id`` values as
idempotency keys (``identifiers.STEP_ID_PATTERN``: ``<run>/<step>#<occ>.<try>``).

An ``instance_started`` may carry ``trace_context``: the W3C ``traceparent`` of the
caller's span that started it, so that the spans of every worker that runs a step join
the caller's trace (``engine.worker.tracing``). It is an observation, not a fact of the
run: replay, the transition's fingerprint and the exchange form leave it out, so a
start retried from another trace is the same start, and old histories replay as before.

An ``instance_started`` may carry ``started_by``: who started the instance (an actor
as audit records name one: a studio user, ``token:<id>`` for an API token, the command
line's ``--actor``). It too is an observation: replay and the transition's fingerprint
leave it out (a start retried by another caller joins the instance the first one made,
as before), but the exchange form keeps it (``event_to_json``), so ``wayline history
--json`` and a retention export say who started what.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from engine.decide.audit import actor_problem, audit_problem
from engine.model.canonical import canonical_json, format_instant, parse_instant, utc
from engine.model.definitions import DefinitionRef
from engine.model.errors import EventInvalid
from engine.model.identifiers import id_problem, key_problem, name_problem, step_id_problem
from engine.model.labelled import Labelled
from engine.model.limits import MAX_ATTEMPT, MAX_CODE_LENGTH, MAX_PAYLOAD_BYTES, MAX_SEQUENCE


class EventKind(Labelled):
    INSTANCE_STARTED = 1
    PAUSED = 2
    RESUMED = 3
    CANCELLATION_REQUESTED = 4
    CANCELLED = 5
    COMPLETED = 6
    FAILED = 7
    TERMINATED = 8
    DEFINITION_MIGRATED = 9
    CONTINUED_AS_NEW = 10
    ACTIVITY_SCHEDULED = 11
    ATTEMPT_STARTED = 12
    ATTEMPT_SUCCEEDED = 13
    ATTEMPT_FAILED = 14
    ATTEMPT_UNKNOWN = 15
    RETRY_SCHEDULED = 16
    TIMER_SCHEDULED = 17
    TIMER_FIRED = 18
    SIGNAL_RECEIVED = 19
    COMPENSATION_SCHEDULED = 20
    COMPENSATION_ATTEMPT_STARTED = 21
    COMPENSATION_SUCCEEDED = 22
    COMPENSATION_FAILED = 23
    COMPENSATION_UNKNOWN = 24
    COMPENSATION_RETRY_SCHEDULED = 25
    COMPENSATION_MANUALLY_RESOLVED = 26
    OPERATOR_COMMAND_RECORDED = 27
    RACE_WON = 28
    CHILD_SCHEDULED = 29
    CHILD_COMPLETED = 30
    CHILD_FAILED = 31
    CHILD_START_ATTEMPTED = 32
    CHILD_STARTED = 33
    CHILD_START_FAILED = 34
    CHILD_START_UNKNOWN = 35
    CHILD_START_RETRY_SCHEDULED = 36
    ACTIVITY_RESOLVED = 37
    INSTANCE_FAILING = 38
    STATE_ENTERED = 39
    ADVANCE_FAILED = 40
    WAIT_STARTED = 41
    WAIT_RESOLVED = 42
    VALUE_RECORDED = 43


K = EventKind
TERMINAL_KINDS = frozenset({K.CANCELLED, K.COMPLETED, K.FAILED, K.TERMINATED, K.CONTINUED_AS_NEW})

# (required, optional) fields per kind, beyond sequence, instance_id, kind, occurred_at.
_ATTEMPT = frozenset({"step", "attempt"})
_START = frozenset({"step", "attempt", "idempotency_key", "due_at"})
_RETRY = frozenset({"step", "attempt", "idempotency_key", "due_at"})
_FAILURE = frozenset({"step", "attempt", "code"})
_Rules = tuple[frozenset[str], frozenset[str]]


def _attempts(
    *, scheduled: K, started: K, succeeded: K, failed: K, unknown: K, retry: K
) -> dict[K, _Rules]:
    """The kinds of one attempt machine, from its scheduling on: activities and
    compensations follow the same."""
    return {
        scheduled: (frozenset({"step"}), frozenset({"data", "idempotency_key"})),
        started: (_START, frozenset()),
        succeeded: (_ATTEMPT, frozenset({"data"})),
        failed: (_FAILURE, frozenset({"retryable", "data"})),
        unknown: (_FAILURE, frozenset({"data"})),
        retry: (_RETRY, frozenset()),
    }


FIELD_RULES: dict[EventKind, _Rules] = {
    K.INSTANCE_STARTED: (frozenset({"definition"}), frozenset({"data", "successor_id", "step"})),
    K.PAUSED: (frozenset(), frozenset()),
    K.RESUMED: (frozenset(), frozenset()),
    K.CANCELLATION_REQUESTED: (frozenset(), frozenset()),
    K.CANCELLED: (frozenset(), frozenset()),
    K.COMPLETED: (frozenset(), frozenset({"data"})),
    K.FAILED: (frozenset({"code"}), frozenset({"step", "data"})),
    K.TERMINATED: (frozenset(), frozenset()),
    K.DEFINITION_MIGRATED: (frozenset({"definition"}), frozenset({"data"})),
    K.CONTINUED_AS_NEW: (frozenset({"definition", "successor_id"}), frozenset({"data"})),
    **_attempts(
        scheduled=K.ACTIVITY_SCHEDULED,
        started=K.ATTEMPT_STARTED,
        succeeded=K.ATTEMPT_SUCCEEDED,
        failed=K.ATTEMPT_FAILED,
        unknown=K.ATTEMPT_UNKNOWN,
        retry=K.RETRY_SCHEDULED,
    ),
    K.TIMER_SCHEDULED: (frozenset({"step", "due_at"}), frozenset()),
    K.TIMER_FIRED: (frozenset({"step"}), frozenset()),
    K.SIGNAL_RECEIVED: (frozenset({"step", "idempotency_key"}), frozenset({"data"})),
    **_attempts(
        scheduled=K.COMPENSATION_SCHEDULED,
        started=K.COMPENSATION_ATTEMPT_STARTED,
        succeeded=K.COMPENSATION_SUCCEEDED,
        failed=K.COMPENSATION_FAILED,
        unknown=K.COMPENSATION_UNKNOWN,
        retry=K.COMPENSATION_RETRY_SCHEDULED,
    ),
    K.COMPENSATION_MANUALLY_RESOLVED: (frozenset({"step", "code"}), frozenset({"data"})),
    K.OPERATOR_COMMAND_RECORDED: (frozenset({"idempotency_key", "data"}), frozenset()),
    K.RACE_WON: (frozenset({"step", "data"}), frozenset()),
    K.CHILD_SCHEDULED: (
        frozenset({"step", "definition", "successor_id"}),
        frozenset({"data", "idempotency_key"}),
    ),
    K.CHILD_COMPLETED: (frozenset({"step", "successor_id"}), frozenset({"data"})),
    K.CHILD_FAILED: (frozenset({"step", "successor_id", "code"}), frozenset({"data"})),
    K.CHILD_START_ATTEMPTED: (_START | {"successor_id"}, frozenset()),
    K.CHILD_STARTED: (_ATTEMPT | {"successor_id"}, frozenset()),
    K.CHILD_START_FAILED: (_FAILURE, frozenset({"retryable", "data"})),
    K.CHILD_START_UNKNOWN: (_FAILURE, frozenset({"data"})),
    K.CHILD_START_RETRY_SCHEDULED: (_RETRY, frozenset()),
    K.ACTIVITY_RESOLVED: (_ATTEMPT | {"code"}, frozenset({"data"})),
    K.INSTANCE_FAILING: (frozenset({"step", "code"}), frozenset({"data"})),
    K.STATE_ENTERED: (_ATTEMPT, frozenset({"data"})),
    K.ADVANCE_FAILED: (_FAILURE, frozenset({"due_at"})),
    K.WAIT_STARTED: (frozenset({"step", "data"}), frozenset({"due_at"})),
    K.WAIT_RESOLVED: (frozenset({"step", "data"}), frozenset({"due_at"})),
    K.VALUE_RECORDED: (frozenset({"step", "data"}), frozenset()),
}
OPTIONAL_FIELDS = (
    "definition",
    "successor_id",
    "step",
    "attempt",
    "idempotency_key",
    "due_at",
    "code",
    "retryable",
    "data",
)
DUE_AFTER_KINDS = frozenset(
    {
        K.ATTEMPT_STARTED,
        K.COMPENSATION_ATTEMPT_STARTED,
        K.CHILD_START_ATTEMPTED,
        K.TIMER_SCHEDULED,
        K.COMPENSATION_RETRY_SCHEDULED,
        K.CHILD_START_RETRY_SCHEDULED,
        K.ADVANCE_FAILED,
    }
)
"""Kinds due strictly later than they occur: an attempt's timeout, a timer's duration and
a policy retry's backoff (an advance's too) are all more than 0. An activity retry
(``retry_scheduled``) may be due at once (an operator retry), but no kind is ever due
before it occurs."""


TRACE_CONTEXT_PATTERN = re.compile(r"00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")
"""A W3C ``traceparent`` of version 00 (55 characters), the only trace context kept."""


@dataclass(frozen=True)
class Event:
    """One history event. Build with ``make_event`` so the kind's rules are checked."""

    sequence: int
    instance_id: str
    kind: EventKind
    occurred_at: datetime
    definition: DefinitionRef | None = None
    successor_id: str = ""
    step: str = ""
    attempt: int = 0
    idempotency_key: str = ""
    due_at: datetime | None = None
    code: str = ""
    retryable: bool = False
    data: str | None = None
    trace_context: str = ""
    """The starting caller's ``traceparent`` (``instance_started`` only; see the module)."""
    started_by: str = ""
    """Who started the instance (``instance_started`` only; see the module)."""

    def value(self) -> Any:
        """``data`` decoded from JSON (None when absent)."""
        return None if self.data is None else json.loads(self.data)


def make_event(**fields: Any) -> Event:
    """Build and validate an event; instants are normalised to UTC first."""
    try:
        fields["occurred_at"] = utc(fields["occurred_at"])
        if fields.get("due_at") is not None:
            fields["due_at"] = utc(fields["due_at"])
        fields["kind"] = EventKind(fields["kind"])
        event = Event(**fields)
    except (KeyError, ValueError, TypeError) as exc:
        raise EventInvalid(f"event is malformed: {exc}") from None
    validate_event(event)
    return event


def json_data(value: Any) -> str | None:
    """The canonical JSON text stored as event data for a JSON value (None stays None)."""
    return None if value is None else canonical_json(value)


def validate_event(event: Event) -> None:
    """Raise EventInvalid unless ``event`` has exactly the fields its kind admits."""
    required, optional = FIELD_RULES[event.kind]
    where = f"{event.kind.label} event {event.sequence}"
    if not 1 <= event.sequence <= MAX_SEQUENCE:
        raise EventInvalid(f"{where}: sequence must be from 1 to {MAX_SEQUENCE}")
    if id_problem(event.instance_id):
        raise EventInvalid(f"{where}: instance id {id_problem(event.instance_id)}")
    # Unset is the field's default (None, "", 0, False): the only falsy values these
    # fields' types have, so truth says "set" (cheaply: this runs for every event).
    present = {name for name in OPTIONAL_FIELDS if getattr(event, name)}
    if extra := present - required - optional:
        raise EventInvalid(f"{where}: may not carry {', '.join(sorted(extra))}")
    if missing := required - present:
        raise EventInvalid(f"{where}: needs {', '.join(sorted(missing))}")
    _check_values(event, where)


def _check_values(event: Event, where: str) -> None:
    if event.step and name_problem(event.step):
        raise EventInvalid(f"{where}: step {name_problem(event.step)}")
    if not isinstance(event.code, str):
        raise EventInvalid(f"{where}: code must be a str, not {type(event.code).__name__}")
    if len(event.code) > MAX_CODE_LENGTH:
        raise EventInvalid(f"{where}: code is longer than {MAX_CODE_LENGTH} characters")
    if not isinstance(event.retryable, bool):
        raise EventInvalid(f"{where}: retryable must be true or false")
    if not 0 <= event.attempt <= MAX_ATTEMPT:
        raise EventInvalid(f"{where}: attempt must be from 1 to {MAX_ATTEMPT}")
    if event.successor_id and (problem := key_problem(event.successor_id)):
        raise EventInvalid(f"{where}: successor id {problem}")
    key = event.idempotency_key
    if key and (problem := key_problem(key)) and step_id_problem(key) is not None:
        raise EventInvalid(f"{where}: idempotency key {problem}")
    if event.due_at is not None:
        _check_due(event, event.due_at, where)
    if event.data is not None:
        _check_data(event, where)
    if event.trace_context:
        _check_trace_context(event, where)
    if event.started_by:
        if event.kind is not K.INSTANCE_STARTED:
            raise EventInvalid(f"{where}: may not carry started_by")
        if problem := actor_problem(event.started_by):
            raise EventInvalid(f"{where}: started_by: {problem}")


def _check_trace_context(event: Event, where: str) -> None:
    if event.kind is not K.INSTANCE_STARTED:
        raise EventInvalid(f"{where}: may not carry trace_context")
    if not TRACE_CONTEXT_PATTERN.fullmatch(event.trace_context):
        raise EventInvalid(
            f"{where}: trace_context must be a W3C traceparent (00-trace-span-flags)"
        )


def _check_due(event: Event, due_at: datetime, where: str) -> None:
    if event.kind in DUE_AFTER_KINDS and due_at <= event.occurred_at:
        raise EventInvalid(f"{where}: due_at must be after occurred_at")
    if due_at < event.occurred_at:
        raise EventInvalid(f"{where}: due_at may not be before occurred_at")


def _check_data(event: Event, where: str) -> None:
    size = len(event.data.encode())
    if size > MAX_PAYLOAD_BYTES:
        raise EventInvalid(f"{where}: data is {size} bytes; at most {MAX_PAYLOAD_BYTES} allowed")
    try:
        value = json.loads(event.data)
        canonical = canonical_json(value)  # NaN and Infinity parse but are not JSON
    except ValueError:
        raise EventInvalid(f"{where}: data must be JSON") from None
    if canonical != event.data:
        raise EventInvalid(f"{where}: data must be canonical JSON")
    if event.kind is K.OPERATOR_COMMAND_RECORDED and (problem := audit_problem(value)):
        raise EventInvalid(f"{where}: {problem}")
    if event.kind is K.RACE_WON and (not isinstance(value, str) or name_problem(value)):
        raise EventInvalid(f"{where}: data must name the winning branch step")
    if event.kind is K.STATE_ENTERED and not isinstance(value, dict):
        raise EventInvalid(f"{where}: data must be a JSON object of the state's fields")


def event_to_json(
    event: Event, data: Callable[[str], Any] = json.loads, observations: bool = True
) -> dict[str, Any]:
    """The exchange form: fields that are set, instants as ISO text, data as JSON (as
    ``data`` reads the event's canonical text: the fingerprint keeps the text itself).
    ``observations``: with ``started_by`` when set (the fingerprint leaves it out)."""
    out: dict[str, Any] = {
        "sequence": event.sequence,
        "instance_id": event.instance_id,
        "kind": event.kind.label,
        "occurred_at": format_instant(event.occurred_at),
    }
    for name in OPTIONAL_FIELDS:
        value = getattr(event, name)
        if not value:  # unset (see validate_event)
            continue
        if name == "definition":
            value = value.to_json()
        elif name == "due_at":
            value = format_instant(value)
        elif name == "data":
            value = data(value)
        out[name] = value
    if observations and event.started_by:
        out["started_by"] = event.started_by
    return out


def event_from_json(document: dict[str, Any]) -> Event:
    """Inverse of ``event_to_json``; raises EventInvalid for anything malformed."""
    try:
        fields = dict(document)
        fields["kind"] = EventKind[str(fields["kind"]).upper()]
        fields["occurred_at"] = parse_instant(fields["occurred_at"])
        if "due_at" in fields:
            fields["due_at"] = parse_instant(fields["due_at"])
        if "definition" in fields:
            fields["definition"] = DefinitionRef(**fields["definition"])
        if "data" in fields:
            fields["data"] = canonical_json(fields["data"])
    except (KeyError, ValueError, TypeError, AttributeError) as exc:
        raise EventInvalid(f"event is malformed: {type(exc).__name__}") from None
    return make_event(**fields)


def renumber(event: Event, sequence: int) -> Event:
    """The same event at another position (used when building transitions)."""
    return replace(event, sequence=sequence)
