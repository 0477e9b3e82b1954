"""Transitions: the bounds a store relies on, and the fingerprint it compares.

A store commits a transition whole or not at all and recognises an exact replay by
its fingerprint, so every structural rule and bound must be refused before a store
sees it, with a message that says what is wrong, and the fingerprint must move with
any change of content and stay put through a JSON round trip.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.model.canonical import canonical_json, digest
from engine.model.definitions import RetryPolicy
from engine.model.durations import to_micros
from engine.model.errors import TransitionInvalid
from engine.model.events import Event, EventKind, event_from_json, event_to_json, make_event
from engine.model.limits import (
    MAX_DISPATCH_BYTES,
    MAX_TRANSITION_BYTES,
    MAX_TRANSITION_EVENTS,
    MAX_TRANSITION_WORK,
)
from engine.model.transitions import (
    Draft,
    Transition,
    WorkItem,
    WorkKind,
    check_transition,
    make_transition,
    transition_to_json,
)
from tests.unit.histories import RICH, T0, Run, activity_doc, definition
from tests.unit.strategies import json_values

K = EventKind
HOUR = timedelta(hours=1)


def signal(sequence: int, data: str | None = None, at: datetime = T0) -> Event:
    """A small valid event at ``sequence`` (make_transition checks structure, not rules)."""
    return make_event(
        sequence=sequence,
        instance_id="i1",
        kind=K.SIGNAL_RECEIVED,
        occurred_at=at,
        step="sig",
        idempotency_key=f"s{sequence}",
        data=data,
    )


def work(
    work_id: str = "i1#w1",
    sequence: int = 3,
    kind: WorkKind = WorkKind.TIMER,
    available_at: datetime = T0,
    deadline: datetime = T0 + HOUR,
    payload: Any = None,
) -> WorkItem:
    text = None if payload is None else canonical_json(payload)
    return WorkItem(work_id, kind, "i1", sequence, available_at, deadline, text)


def transition(
    events: list[Event] | None = None, items: list[WorkItem] | None = None, **kw: Any
) -> Transition:
    """A transition at expected sequence 2 (events 3.., one work item by default)."""
    return make_transition(
        kw.get("transition_id", "i1#3"),
        kw.get("definition", RICH.ref),
        kw.get("expected", 2),
        [signal(3)] if events is None else events,
        [work()] if items is None else items,
    )


def test_a_minimal_transition_is_valid() -> None:
    built = transition()
    assert built.committed_sequence == 3
    assert len(built.fingerprint) == 64


# Bounds --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("events", "items", "message"),
    [
        ([], [], "1 to 100 events, not 0"),
        (
            [signal(3 + n) for n in range(MAX_TRANSITION_EVENTS + 1)],
            [],
            "1 to 100 events, not 101",
        ),
        (
            [signal(3)],
            [work(f"i1#w{n}") for n in range(MAX_TRANSITION_WORK + 1)],
            "at most 1000 work items, not 1001",
        ),
        ([signal(3)], [work(sequence=4)], "must reference an event of this transition"),
        ([signal(3)], [work(sequence=2)], "must reference an event of this transition"),
        ([signal(3)], [work(), work()], "'i1#w1' is empty, too long or repeated"),
        ([signal(3)], [work("")], "is empty, too long or repeated"),
        ([signal(3)], [work("i2#w1")], "must start with its instance id and '#'"),
        ([signal(3)], [work("i1w1")], "must start with its instance id and '#'"),
        (
            [signal(3)],
            [work(available_at=T0 - timedelta(microseconds=1))],
            "no earlier than its event",
        ),
        ([signal(3)], [work(deadline=T0)], "before its deadline"),
        ([signal(4)], [], "numbered contiguously after the expected sequence 2"),
        ([signal(3), signal(5)], [], "numbered contiguously"),
    ],
    ids=[
        "no events",
        "101 events",
        "1001 work items",
        "work after the events",
        "work before the events",
        "duplicate work id",
        "empty work id",
        "work id of another instance",
        "work id without the separator",
        "work before its event",
        "deadline at available",
        "not after expected",
        "gap",
    ],
)
def test_structural_rules_and_bounds(
    events: list[Event], items: list[WorkItem], message: str
) -> None:
    with pytest.raises(TransitionInvalid, match=message):
        transition(events, items)


def test_event_times_may_not_go_backwards_within_a_transition() -> None:
    """Replay refuses time going backwards, so a store must never hold such a batch."""
    later, earlier = signal(3, at=T0 + HOUR), signal(4, at=T0)
    with pytest.raises(TransitionInvalid, match="event 4 occurs before event 3"):
        transition([later, earlier], [])
    transition([signal(3), signal(4)], [])  # the same instant twice is fine


def test_a_transition_built_directly_is_checked_like_a_built_one() -> None:
    """``check_transition`` is what the store runs before writing, whoever built the
    transition (the dataclass itself, or ``dataclasses.replace`` of a valid one)."""
    valid = transition()
    check_transition(valid)
    for broken, message in [
        (
            replace(valid, expected_sequence=1),
            "numbered contiguously after the expected sequence 1",
        ),
        (replace(valid, expected_sequence=-1), "expected sequence must be from 0"),
        (replace(valid, events=(signal(3, at=T0 + HOUR), signal(4))), "occurs before event 3"),
        (replace(valid, instance_id="i2"), "belong to one instance"),
        (replace(valid, events=()), "1 to 100 events, not 0"),
        (replace(valid, transition_id=""), "transition id has 1 to"),
        (replace(valid, transition_id="i2#3"), "must start with its instance id and '#'"),
    ]:
        with pytest.raises(TransitionInvalid, match=message):
            check_transition(broken)


def test_a_transition_made_with_lists_is_checked_again_after_they_changed() -> None:
    """A checked transition is not checked again, as it cannot change; one made with
    lists can, so a change made after its check is still caught by the next one."""
    valid = transition()
    events = list(valid.events)
    made = Transition(valid.transition_id, valid.instance_id, 2, valid.definition, events)
    check_transition(made)
    events.append(signal(2))
    with pytest.raises(TransitionInvalid, match="numbered contiguously"):
        check_transition(made)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(2, 6),
    st.integers(-2, 2),
    st.lists(st.integers(-3, 3), min_size=1, max_size=6),
)
def test_a_transition_is_accepted_exactly_when_replay_could_follow_it(
    expected: int, shift: int, steps: list[int]
) -> None:
    """Events numbered from ``expected + 1 + shift``, each ``steps[i]`` seconds after
    the one before: accepted exactly when there is no shift and no step back."""
    events, at = [], T0
    for offset, step in enumerate(steps):
        at += timedelta(seconds=step)
        events.append(signal(expected + 1 + shift + offset, at=at))
    legal = shift == 0 and all(step >= 0 for step in steps[1:])
    try:
        make_transition("i1#t", RICH.ref, expected, events, [])
    except TransitionInvalid:
        accepted = False
    else:
        accepted = True
    assert accepted == legal


def test_events_of_two_instances_are_refused() -> None:
    other = replace(signal(4), instance_id="i2")
    with pytest.raises(TransitionInvalid, match="belong to one instance"):
        transition([signal(3), other], [])


@pytest.mark.parametrize("kind", [WorkKind.ACTIVITY, WorkKind.CHILD, WorkKind.COMPENSATION])
def test_a_dispatch_payload_is_at_most_1_kib(kind: WorkKind) -> None:
    def dispatch(size: int) -> str:
        return "k" * (size - len(canonical_json({"key": ""})))

    transition(items=[work(kind=kind, payload={"key": dispatch(MAX_DISPATCH_BYTES)})])
    with pytest.raises(TransitionInvalid, match=f"at most {MAX_DISPATCH_BYTES} allowed"):
        transition(items=[work(kind=kind, payload={"key": dispatch(MAX_DISPATCH_BYTES + 1)})])


def test_timer_work_may_carry_more_than_a_dispatch() -> None:
    transition(items=[work(kind=WorkKind.TIMER, payload="t" * (2 * MAX_DISPATCH_BYTES))])


def test_the_total_size_of_a_transition_is_bounded() -> None:
    half = canonical_json("x" * (MAX_TRANSITION_BYTES // 2 - 2))  # quotes included
    full = [signal(3, half), signal(4, half)]
    transition(full, [])
    with pytest.raises(TransitionInvalid, match=f"event data is .* at most {MAX_TRANSITION_BYTES}"):
        transition([*full, signal(5, "1")], [])
    with pytest.raises(TransitionInvalid, match=f"carries .* at most {MAX_TRANSITION_BYTES}"):
        transition(full, [work(payload="y")])


def test_a_starting_transition_carries_the_instance_definition() -> None:
    run = Run()
    run.start()
    first = run.transitions[0]
    other = definition([activity_doc("a")], name="other")
    with pytest.raises(TransitionInvalid, match="carries its instance's definition"):
        make_transition(first.transition_id, other.ref, 0, list(first.events), list(first.work))


def test_a_draft_ending_with_an_audit_cannot_be_built() -> None:
    run = Run()
    run.start()
    draft = run.draft()
    audit = {"action": "pause", "actor": "alice", "reason": "r"}
    draft.add(K.OPERATOR_COMMAND_RECORDED, idempotency_key="c1", data=canonical_json(audit))
    with pytest.raises(TransitionInvalid, match="needs its effect in the same transition"):
        draft.build()


def test_an_empty_draft_cannot_be_built() -> None:
    run = Run()
    run.start()
    with pytest.raises(TransitionInvalid, match="1 to 100 events, not 0"):
        run.draft().build()


# Fingerprints --------------------------------------------------------------------------


def _variants(base: Transition) -> dict[str, Transition]:
    """``base`` with one piece of content changed at a time."""
    event = base.events[0]
    item = base.work[0]

    def with_event(**changes: Any) -> Transition:
        fields = {name: getattr(event, name) for name in event.__dataclass_fields__}
        return replace(base, events=(make_event(**{**fields, **changes}),))

    def with_work(**changes: Any) -> Transition:
        return replace(base, work=(replace(item, **changes),))

    other = definition([activity_doc("a", timeout="11s")])
    return {
        "id": replace(base, transition_id="i1#other"),
        "definition": replace(base, definition=other.ref),
        "event time": with_event(occurred_at=event.occurred_at + timedelta(microseconds=1)),
        "event data": with_event(data=canonical_json({"n": 2})),
        "event key": with_event(idempotency_key="s-other"),
        "work id": with_work(work_id="i1#w2"),
        "work kind": with_work(kind=WorkKind.PUBLICATION),
        "work available": with_work(available_at=item.available_at + timedelta(microseconds=1)),
        "work deadline": with_work(deadline=item.deadline + timedelta(microseconds=1)),
        "work payload": with_work(payload=canonical_json({"p": 2})),
        "tenant": with_work(tenant_id="tenant-b"),
        "correlation": with_work(correlation_id="corr-1"),
        "no work": replace(base, work=()),
    }


def test_the_fingerprint_changes_with_any_content() -> None:
    base = transition([signal(3, canonical_json({"n": 1}))], [work(payload={"p": 1})])
    prints = {label: t.fingerprint for label, t in _variants(base).items()}
    prints["base"] = base.fingerprint
    assert len(set(prints.values())) == len(prints), prints


def test_the_fingerprint_survives_a_json_round_trip_and_time_zones() -> None:
    run = Run()
    run.start({"order": 1})
    run.run_activity("a")
    for built in run.transitions:
        document = json.loads(json.dumps(transition_to_json(built)))
        assert digest(document) == built.fingerprint
        events = [event_from_json(event_to_json(e)) for e in built.events]
        again = make_transition(
            built.transition_id,
            built.definition,
            built.expected_sequence,
            events,
            list(built.work),
        )
        assert again.fingerprint == built.fingerprint
    plus_two = timezone(timedelta(hours=2))
    local = transition(
        [signal(3, at=T0.astimezone(plus_two))],
        [work(available_at=T0.astimezone(plus_two), deadline=(T0 + HOUR).astimezone(plus_two))],
    )
    assert local.fingerprint == transition().fingerprint


@given(json_values(), json_values())
def test_the_fingerprint_is_the_digest_of_the_exported_content(data: Any, payload: Any) -> None:
    """The fingerprint splices each event's canonical data text in instead of encoding
    it again (``canonical.spliced_digest``): the bytes hashed must stay those of the
    exported content, or a ledger written before would no longer match its replays."""
    built = transition([signal(3, canonical_json(data))], [work(payload=payload)])
    assert built.fingerprint == digest(transition_to_json(built))


def test_the_same_decision_at_the_same_position_is_the_same_transition() -> None:
    """Two workers deciding the same thing produce one transition: the store sees an
    exact replay instead of a conflict."""
    runs = [Run(), Run()]
    for run in runs:
        run.start({"order": 1})
        run.run_activity("a", "failed")
    first, second = (run.transitions for run in runs)
    assert [t.transition_id for t in first] == [t.transition_id for t in second]
    assert [t.fingerprint for t in first] == [t.fingerprint for t in second]


# Backoff -------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 5_000).flatmap(lambda i: st.tuples(st.just(i), st.integers(i, 60_000))),
    st.integers(2, 8),
)
def test_retry_due_times_follow_the_capped_exponential_backoff(
    delays: tuple[int, int], attempts: int
) -> None:
    initial_ms, max_ms = delays
    spec = definition(
        [activity_doc("a", attempts=attempts, initial=f"{initial_ms}ms", maximum=f"{max_ms}ms")]
    )
    run = Run(spec)
    run.start()
    observed = []
    for _ in range(attempts):
        run.run_activity("a", "failed")
        retries = [e for e in run.transitions[-1].events if e.kind is K.RETRY_SCHEDULED]
        for retry in retries:
            assert retry.due_at is not None
            observed.append(to_micros(retry.due_at - retry.occurred_at) // 1000)
    expected = [min(initial_ms * 2 ** (n - 1), max_ms) for n in range(1, attempts)]
    assert observed == expected
    assert run.state.status.label == "failed"


def test_backoff_of_very_late_attempts_is_the_cap() -> None:
    policy = RetryPolicy(1_000, timedelta(milliseconds=1), timedelta(days=30))
    assert policy.backoff(1) == timedelta(milliseconds=1)
    assert policy.backoff(1_000) == timedelta(days=30)
    with pytest.raises(ValueError, match="counts from 1"):
        policy.backoff(0)


def test_retry_work_becomes_available_exactly_at_the_backoff() -> None:
    run = Run()
    run.start()
    run.run_activity("a", "failed")
    retry = run.transitions[-1]
    scheduled = next(e for e in retry.events if e.kind is K.RETRY_SCHEDULED)
    (item,) = retry.work
    assert item.sequence == scheduled.sequence
    assert item.available_at == scheduled.due_at
    assert item.deadline > item.available_at
    assert json.loads(item.payload or "") == {"step": "a", "attempt": 2, "key": "i1/a/2"}


def test_draft_times_are_utc() -> None:
    run = Run(now=datetime(2026, 1, 1, 2, tzinfo=timezone(timedelta(hours=2))))
    run.start()
    assert all(e.occurred_at.tzinfo is UTC for e in run.history)
    assert all(w.available_at.tzinfo is UTC for t in run.transitions for w in t.work)
    assert Draft(run.registry, run.state, run.now).now.tzinfo is UTC
