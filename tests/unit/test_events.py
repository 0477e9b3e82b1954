"""History events: each kind admits exactly its own fields, and events survive JSON.

Events are what every instance is rebuilt from, so an event that carries a field its
kind ignores, lacks one it needs, or whose data or time is not in canonical form would
make two replays (or a fingerprint) disagree later. These tests are table-driven over
``FIELD_RULES`` so a new kind is covered the moment it is added.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.decide.operator_actions import Action
from engine.decide.operator_commands import record_command
from engine.model.canonical import canonical_json, format_instant, parse_instant
from engine.model.errors import EventInvalid
from engine.model.events import (
    FIELD_RULES,
    OPTIONAL_FIELDS,
    Event,
    EventKind,
    event_from_json,
    event_to_json,
    make_event,
)
from engine.model.limits import (
    MAX_ATTEMPT,
    MAX_OPERATOR_AUDIT_BYTES,
    MAX_PAYLOAD_BYTES,
    MAX_SEQUENCE,
)
from tests.unit.histories import RICH, T0, Run
from tests.unit.strategies import json_values

K = EventKind
AUDIT = canonical_json({"action": "pause", "actor": "alice", "reason": "maintenance"})


def sample(kind: EventKind, name: str) -> Any:
    """A valid value of field ``name`` for an event of ``kind``."""
    if name == "data":
        if kind is K.OPERATOR_COMMAND_RECORDED:
            return AUDIT
        return canonical_json("sig") if kind is K.RACE_WON else canonical_json({"k": [1, "é"]})
    return {
        "definition": RICH.ref,
        "successor_id": "i2",
        "step": "a",
        "attempt": 1,
        "idempotency_key": "i1/a/1",
        "due_at": T0 + timedelta(seconds=10),
        "code": "boom",
        "retryable": True,
    }[name]


def build(kind: EventKind, fields: set[str] | frozenset[str], **override: Any) -> Event:
    """An event of ``kind`` at sequence 2 with sample values for ``fields``."""
    values = {"sequence": 2, "instance_id": "i1", "kind": kind, "occurred_at": T0}
    values.update({name: sample(kind, name) for name in fields})
    values.update(override)
    return make_event(**values)


def required(kind: EventKind) -> frozenset[str]:
    return FIELD_RULES[kind][0]


def allowed(kind: EventKind) -> frozenset[str]:
    return FIELD_RULES[kind][0] | FIELD_RULES[kind][1]


MISSING = [(kind, name) for kind in K for name in sorted(required(kind))]
EXTRA = [(kind, name) for kind in K for name in OPTIONAL_FIELDS if name not in allowed(kind)]


def test_every_kind_has_field_rules() -> None:
    assert set(FIELD_RULES) == set(K)


@pytest.mark.parametrize("kind", list(K), ids=lambda k: k.label)
def test_each_kind_accepts_its_required_and_optional_fields(kind: EventKind) -> None:
    """The baseline for the rejections below: the samples themselves are valid."""
    build(kind, required(kind))
    build(kind, allowed(kind))


@pytest.mark.parametrize(("kind", "name"), MISSING, ids=lambda v: getattr(v, "label", v))
def test_a_missing_required_field_is_rejected(kind: EventKind, name: str) -> None:
    with pytest.raises(EventInvalid, match=f"needs {name}"):
        build(kind, required(kind) - {name})


@pytest.mark.parametrize(("kind", "name"), EXTRA, ids=lambda v: getattr(v, "label", v))
def test_a_field_the_kind_does_not_admit_is_rejected(kind: EventKind, name: str) -> None:
    with pytest.raises(EventInvalid, match=f"may not carry {name}"):
        build(kind, required(kind) | {name})


@pytest.mark.parametrize("kind", list(K), ids=lambda k: k.label)
def test_every_kind_round_trips_through_json_text(kind: EventKind) -> None:
    for fields in (required(kind), allowed(kind)):
        event = build(kind, fields)
        text = json.dumps(event_to_json(event))
        assert event_from_json(json.loads(text)) == event


def test_an_unknown_kind_is_rejected() -> None:
    with pytest.raises(EventInvalid):
        make_event(sequence=1, instance_id="i1", kind=99, occurred_at=T0)
    with pytest.raises(EventInvalid):
        event_from_json({"sequence": 1, "instance_id": "i1", "kind": "nope", "occurred_at": "x"})


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"sequence": 0}, "sequence must be from 1"),
        ({"sequence": MAX_SEQUENCE + 1}, "sequence must be from 1"),
        ({"instance_id": ""}, "instance id"),
        ({"step": "a/b"}, "step must be"),
        ({"attempt": MAX_ATTEMPT + 1}, "attempt must be"),
        ({"attempt": -1}, "attempt must be"),
        ({"idempotency_key": "has space"}, "idempotency key"),
        ({"due_at": T0}, "due_at must be after occurred_at"),
    ],
)
def test_field_values_are_checked(fields: dict[str, Any], message: str) -> None:
    values = {name: sample(K.ATTEMPT_STARTED, name) for name in required(K.ATTEMPT_STARTED)}
    values.update(sequence=2, instance_id="i1", kind=K.ATTEMPT_STARTED, occurred_at=T0)
    values.update(fields)
    with pytest.raises(EventInvalid, match=message):
        make_event(**values)


DUE_LATER = [
    K.TIMER_SCHEDULED,
    K.COMPENSATION_RETRY_SCHEDULED,
    K.CHILD_START_RETRY_SCHEDULED,
    K.ADVANCE_FAILED,
]


@pytest.mark.parametrize("kind", DUE_LATER, ids=lambda k: k.label)
def test_a_timer_or_policy_retry_is_due_after_it_is_scheduled(kind: EventKind) -> None:
    """Timer durations and backoff delays are always more than 0, so a due time at the
    event's own time can only be corrupt: the event check refuses it, not replay."""
    build(kind, required(kind), due_at=T0 + timedelta(microseconds=1))
    with pytest.raises(EventInvalid, match="due_at must be after occurred_at"):
        build(kind, required(kind), due_at=T0)


def test_an_activity_retry_may_be_due_at_once_but_never_earlier() -> None:
    """An operator retry is due at once; no retry is ever due before it is scheduled."""
    build(K.RETRY_SCHEDULED, required(K.RETRY_SCHEDULED), due_at=T0)
    with pytest.raises(EventInvalid, match="due_at may not be before occurred_at"):
        build(K.RETRY_SCHEDULED, required(K.RETRY_SCHEDULED), due_at=T0 - timedelta(seconds=1))


# Operator audit records ----------------------------------------------------------------


@pytest.mark.parametrize(
    "record",
    [
        {"action": "pause", "actor": "alice", "reason": "r", "extra": "x"},
        {"action": "pause", "actor": "alice"},
        {"action": "pause", "actor": "", "reason": "r"},
        {"action": "pause", "actor": 7, "reason": "r"},
        ["pause", "alice", "r"],
        {"action": "pause", "actor": "alice", "reason": "r" * MAX_OPERATOR_AUDIT_BYTES},
    ],
    ids=["unknown key", "missing key", "empty actor", "non-string", "not an object", "> 1 KiB"],
)
def test_audit_records_are_strict(record: Any) -> None:
    with pytest.raises(EventInvalid, match="audit record"):
        build(K.OPERATOR_COMMAND_RECORDED, set(), idempotency_key="c1", data=canonical_json(record))


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"action": "delete", "actor": "alice", "reason": "r"}, "action must be one of: pause,"),
        ({"action": "pause", "actor": " alice ", "reason": "r"}, "actor must be"),
        ({"action": "pause", "actor": "a" * 201, "reason": "r"}, "actor must be"),
        ({"action": "pause", "actor": "alice", "reason": "   "}, "reason of 1 to 500"),
        ({"action": "pause", "actor": "alice", "reason": "r" * 501}, "reason of 1 to 500"),
    ],
    ids=["unknown action", "spaced actor", "long actor", "blank reason", "long reason"],
)
def test_audit_fields_follow_the_operator_command_rule(record: Any, message: str) -> None:
    """The event check applies the same rule to audit fields as ``record_command``:
    an audit the engine would never write is refused at the event, not later in replay."""
    with pytest.raises(EventInvalid, match=message):
        build(K.OPERATOR_COMMAND_RECORDED, set(), idempotency_key="c1", data=canonical_json(record))


AUDIT_TEXT = st.text(st.sampled_from("aZ9 .:/_-@+é\t"), max_size=12) | st.sampled_from(
    ["alice", " alice", "alice ", "a" * 200, "a" * 201, "r" * 500, "r" * 501, "", "  "]
)


@given(actor=AUDIT_TEXT, reason=AUDIT_TEXT, action=st.sampled_from([Action.PAUSE, Action.CANCEL]))
def test_record_command_and_the_event_check_agree_on_every_audit(
    actor: str, reason: str, action: Action
) -> None:
    """One rule: an audit the command builder refuses is one the event check refuses,
    and the other way round."""
    record = {"action": action.value, "actor": actor, "reason": reason}
    try:
        build(K.OPERATOR_COMMAND_RECORDED, set(), idempotency_key="c1", data=canonical_json(record))
    except EventInvalid:
        event_accepts = False
    else:
        event_accepts = True
    run = Run()
    run.start()
    try:
        record_command(run.draft(), "c1", action, actor, reason)
    except (EventInvalid, ValueError):
        builder_accepts = False
    else:
        builder_accepts = True
    assert builder_accepts == event_accepts


def test_an_audit_record_of_exactly_1_kib_is_accepted() -> None:
    base = {"action": "pause", "actor": "alice", "reason": ""}
    room = MAX_OPERATOR_AUDIT_BYTES - len(canonical_json(base))
    base["reason"] = "é" * (room // 2) + "r" * (room % 2)  # two bytes each: within 500 chars
    data = canonical_json(base)
    assert len(data.encode()) == MAX_OPERATOR_AUDIT_BYTES
    build(K.OPERATOR_COMMAND_RECORDED, set(), idempotency_key="c1", data=data)


# Data ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    ['{"b":1,"a":2}', '{"a": 1}', " 1", '"\\u00e9"', "1.50", "not json", "", "NaN", "Infinity"],
)
def test_data_must_be_canonical_json(data: str) -> None:
    with pytest.raises(EventInvalid, match="data must be"):
        build(K.COMPLETED, set(), data=data)


def test_race_won_data_must_name_a_step() -> None:
    with pytest.raises(EventInvalid, match="winning branch"):
        build(K.RACE_WON, {"step"}, data=canonical_json({"winner": "sig"}))


def test_data_larger_than_the_payload_limit_is_rejected() -> None:
    data = canonical_json("x" * (MAX_PAYLOAD_BYTES - 1))  # two quotes make it one too many
    with pytest.raises(EventInvalid, match=f"at most {MAX_PAYLOAD_BYTES}"):
        build(K.COMPLETED, set(), data=data)


@given(json_values())
def test_any_json_value_round_trips_as_event_data(value: Any) -> None:
    event = build(K.COMPLETED, set(), data=canonical_json(value))
    again = event_from_json(json.loads(json.dumps(event_to_json(event))))
    assert again == event
    assert again.value() == value


# Time ----------------------------------------------------------------------------------


def test_instants_are_normalised_to_utc() -> None:
    plus_two = timezone(timedelta(hours=2))
    local = datetime(2026, 1, 1, 2, 0, 0, 123456, tzinfo=plus_two)
    event = build(
        K.ATTEMPT_STARTED,
        required(K.ATTEMPT_STARTED),
        occurred_at=local,
        due_at=local + timedelta(seconds=10),
    )
    assert event.occurred_at.tzinfo is UTC
    assert event.due_at is not None and event.due_at.tzinfo is UTC
    assert event == build(
        K.ATTEMPT_STARTED,
        required(K.ATTEMPT_STARTED),
        occurred_at=datetime(2026, 1, 1, 0, 0, 0, 123456, tzinfo=UTC),
        due_at=datetime(2026, 1, 1, 0, 0, 10, 123456, tzinfo=UTC),
    )
    assert event_to_json(event)["occurred_at"] == "2026-01-01T00:00:00.123456Z"


def test_an_offset_in_json_reads_as_the_same_utc_instant() -> None:
    event = build(K.PAUSED, set())
    document = event_to_json(event)
    assert event_from_json({**document, "occurred_at": "2026-01-01T02:00:00+02:00"}) == event


def test_json_instants_carry_microseconds_and_finer_digits_are_not_kept() -> None:
    document = event_to_json(build(K.PAUSED, set()))
    event = event_from_json({**document, "occurred_at": "2026-01-01T00:00:00.1234567Z"})
    assert format_instant(event.occurred_at) == "2026-01-01T00:00:00.123456Z"
    assert event_from_json(event_to_json(event)) == event


@given(
    st.datetimes(
        timezones=st.sampled_from([UTC, timezone(timedelta(hours=-11)), timezone(timedelta(0))])
    )
)
def test_every_instant_has_one_fixed_width_utc_text_that_reads_back(instant: datetime) -> None:
    """Fingerprints hash this text: one width and one spelling for every year and zone."""
    text = format_instant(instant)
    assert len(text) == len("2026-01-01T00:00:00.000000Z") and text.endswith("Z")
    assert parse_instant(text) == instant


def test_naive_times_are_refused() -> None:
    naive = datetime(2026, 1, 1)
    with pytest.raises(EventInvalid):
        build(K.PAUSED, set(), occurred_at=naive)
    with pytest.raises(EventInvalid):
        build(K.TIMER_SCHEDULED, {"step"}, due_at=naive)
    document = event_to_json(build(K.PAUSED, set()))
    with pytest.raises(EventInvalid):
        event_from_json({**document, "occurred_at": "2026-01-01T00:00:00"})
