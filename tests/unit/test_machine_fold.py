"""Replaying a machine: walks along allowed edges, and what replay refuses.

Random walks over random manifests (``tests.unit.machines``) enter states along
allowed edges, wait for timers, fail and retry attempts, and must fold to the last
state entered with the transitions they used. Replay refuses an edge the manifest does
not allow, anything after a terminal state, a transition beyond ``max_transitions``,
an attempt beyond ``max_attempts`` or before it is due, an advance of a timer state
before its timer fired, fields that are not the variant's, and completing anywhere
but in a terminal state. Instances of step lists keep their digests: their replayed
state has no machine part.
"""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from engine.model.canonical import canonical_json
from engine.model.errors import ReplayRejected
from engine.model.events import EventKind
from engine.model.instance import InstanceStatus, instance_to_json
from engine.model.validation import parse_definition
from engine.replay.fold import apply, replay
from tests.unit.machines import RETRY_DELAY, Document, Walk, approval_document, machine_documents

K = EventKind


def walk_to_the_end(document: Document, data: st.DataObject) -> tuple[Walk, list[str]]:
    """A walk of ``document``'s machine along random allowed edges, with failed
    attempts, until a terminal state or the last transition; the states entered, in order."""
    walk = Walk(parse_definition(document))
    manifest = walk.manifest
    entered: list[str] = []
    while not manifest.is_terminal(walk.current) and len(entered) < manifest.max_transitions:
        walk.wait_for_timer()
        failures = data.draw(st.integers(0, manifest.max_attempts - 1), label="failures")
        for attempt in range(1, failures + 1):
            walk.fail(attempt)
        target = data.draw(st.sampled_from(manifest.targets(walk.current)), label="edge")
        walk.enter(target, attempt=failures + 1)
        entered.append(target)
    return walk, entered


def rejected(walk: Walk, kind: EventKind, **fields: object) -> str:
    """Why replay refuses the next event, both folded on and in a full replay."""
    event = walk.event(kind, **fields)
    with pytest.raises(ReplayRejected) as folded:
        apply(walk.registry, walk.state, event)
    with pytest.raises(ReplayRejected) as replayed:
        replay(walk.registry, [*walk.events, event])
    assert folded.value.reason == replayed.value.reason
    return folded.value.reason


@given(machine_documents(), st.data())
def test_a_walk_along_allowed_edges_folds_to_the_last_state(
    document: Document, data: st.DataObject
) -> None:
    walk, entered = walk_to_the_end(document, data)

    state = replay(walk.registry, walk.events)
    assert state == walk.state
    assert state.digest == walk.state.digest
    assert state.machine is not None
    assert (state.machine.state, state.machine.transitions) == (entered[-1], len(entered))
    assert state.machine.attempts == 0
    assert state.machine.data == walk.events[-1].data
    if walk.manifest.is_terminal(entered[-1]):
        assert walk.append(K.COMPLETED).status is InstanceStatus.COMPLETED


@given(machine_documents(), st.data())
def test_an_edge_the_manifest_does_not_allow_is_refused(
    document: Document, data: st.DataObject
) -> None:
    walk = Walk(parse_definition(document))
    steps = data.draw(st.integers(0, walk.manifest.max_transitions - 1), label="steps")
    for _ in range(steps):
        if walk.manifest.is_terminal(walk.current):
            break
        walk.wait_for_timer()
        walk.enter(data.draw(st.sampled_from(walk.manifest.targets(walk.current))))
    assume(not walk.manifest.is_terminal(walk.current))
    walk.wait_for_timer()
    allowed = walk.manifest.targets(walk.current)
    others = [v.name for v in walk.manifest.variants if v.name not in allowed]
    assume(others)
    target = data.draw(st.sampled_from(others), label="illegal")
    reason = rejected(walk, K.STATE_ENTERED, step=target, attempt=1, data=walk.data(target, {}))
    assert reason == f"{walk.current} -> {target} is not an edge of walk@1"


@given(machine_documents(), st.data())
def test_nothing_moves_a_machine_after_a_terminal_state_or_its_last_transition(
    document: Document, data: st.DataObject
) -> None:
    walk, entered = walk_to_the_end(document, data)
    last = entered[-1]
    target = data.draw(st.sampled_from([v.name for v in walk.manifest.variants]))
    reason = rejected(walk, K.STATE_ENTERED, step=target, attempt=1, data=walk.data(target, {}))
    if walk.manifest.is_terminal(last):
        assert reason == f"{last} is terminal: the machine takes no more steps"
        failed = rejected(walk, K.ADVANCE_FAILED, step=last, attempt=1, code="x", due_at=None)
        assert failed == reason
        return
    assert walk.manifest.max_transitions == len(entered)
    if walk.manifest.timer(last) is not None:
        assert reason == f"{last} advances only after its timer fired"
        walk.wait_for_timer()
        reason = rejected(walk, K.STATE_ENTERED, step=target, attempt=1, data=walk.data(target, {}))
    if target in walk.manifest.targets(last):
        assert reason == (
            f"{target} would be transition {len(entered) + 1}; "
            f"max_transitions is {walk.manifest.max_transitions}"
        )


# Rules on the fixture's document approval ----------------------------------------------


def approval_walk(**changes: object) -> Walk:
    return Walk(parse_definition({**approval_document(), **changes}))


def in_review() -> Walk:
    """A document approval that entered review and whose first timer fired."""
    walk = approval_walk()
    walk.enter("InReview", reminders=0)
    walk.wait_for_timer()
    return walk


def test_attempts_are_counted_due_and_reset_by_entering_a_state() -> None:
    walk = in_review()
    assert rejected(walk, K.STATE_ENTERED, step="Approved", attempt=2, data='{"by":"x"}') == (
        "the next attempt of InReview is 1"
    )
    walk.fail(1)
    walk.now -= RETRY_DELAY / 2
    assert rejected(walk, K.STATE_ENTERED, step="Approved", attempt=2, data='{"by":"x"}') == (
        "attempt 2 of InReview is not due yet"
    )
    walk.now += RETRY_DELAY
    state = walk.enter("InReview", attempt=2, reminders=1)
    assert state.machine is not None and state.machine.attempts == 0
    assert state.machine.data == '{"reminders":1}'


def test_the_last_attempt_schedules_no_retry_and_nothing_follows_it_but_an_end() -> None:
    walk = in_review()
    walk.fail(1)
    walk.fail(2)
    assert "is the last" in rejected(
        walk, K.ADVANCE_FAILED, step="InReview", attempt=3, code="x", due_at=walk.now + RETRY_DELAY
    )
    walk.fail(3)
    assert rejected(walk, K.STATE_ENTERED, step="Approved", attempt=4, data='{"by":"x"}') == (
        "the 3 attempts of InReview are used up"
    )
    assert walk.append(K.FAILED, code="dead-attempts-exhausted").status is InstanceStatus.FAILED


def test_a_failure_before_its_last_attempt_says_when_the_next_is_due() -> None:
    walk = in_review()
    assert rejected(walk, K.ADVANCE_FAILED, step="InReview", attempt=1, code="x") == (
        "attempt 1 of 3 needs due_at"
    )
    assert rejected(
        walk, K.ADVANCE_FAILED, step="Submitted", attempt=1, code="x", due_at=walk.now + RETRY_DELAY
    ) == ("advance_failed names Submitted but the machine is in InReview")


def test_a_timer_state_waits_for_its_timer() -> None:
    walk = approval_walk()
    walk.enter("InReview", reminders=0)
    assert rejected(walk, K.STATE_ENTERED, step="Expired", attempt=1) == (
        "InReview advances only after its timer fired"
    )
    assert rejected(walk, K.TIMER_FIRED, step="InReview") == (
        "the timer of InReview was never scheduled"
    )
    assert rejected(walk, K.TIMER_SCHEDULED, step="InReview", due_at=walk.now + RETRY_DELAY) == (
        "due_at must be the time plus the 60 s of InReview"
    )
    walk.wait_for_timer()
    assert rejected(walk, K.TIMER_FIRED, step="InReview") == ("the timer of InReview already fired")
    # Entering the timer state again starts its wait again.
    walk.enter("InReview", reminders=1)
    assert rejected(walk, K.STATE_ENTERED, step="Expired", attempt=1) == (
        "InReview advances only after its timer fired"
    )


def test_a_state_that_is_no_timer_state_has_no_timer() -> None:
    walk = approval_walk()
    assert rejected(walk, K.TIMER_SCHEDULED, step="Submitted", due_at=walk.now + RETRY_DELAY) == (
        "Submitted is not a timer state"
    )


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (None, "state InReview must have reminders, not "),
        ('{"extra":2,"reminders":1}', "state InReview must have reminders, not extra, reminders"),
        ('{"reminders":"one"}', "state InReview field reminders must be a whole number"),
        ('{"reminders":true}', "state InReview field reminders must be a whole number"),
    ],
)
def test_an_entered_state_has_exactly_its_variants_fields(data: str | None, reason: str) -> None:
    walk = approval_walk()
    assert rejected(walk, K.STATE_ENTERED, step="InReview", attempt=1, data=data) == reason


def test_a_state_without_fields_has_no_data() -> None:
    walk = in_review()
    assert rejected(walk, K.STATE_ENTERED, step="Expired", attempt=1, data="{}") == (
        "state Expired has no fields, so no data"
    )


def test_a_machine_completes_only_in_a_terminal_state() -> None:
    walk = in_review()
    assert rejected(walk, K.COMPLETED) == (
        "a machine completes only in a terminal state, not in InReview"
    )
    walk.enter("Approved", by="ada")
    assert walk.append(K.COMPLETED).status is InstanceStatus.COMPLETED


def test_machine_events_need_a_running_machine() -> None:
    walk = in_review()
    audit = canonical_json({"action": "cancel", "actor": "alice", "reason": "not needed"})
    walk.append(K.OPERATOR_COMMAND_RECORDED, idempotency_key="cmd-1", data=audit)
    walk.append(K.CANCELLATION_REQUESTED)
    assert rejected(walk, K.STATE_ENTERED, step="Expired", attempt=1) == (
        "state_entered needs the instance running, not cancelling"
    )


def test_another_modes_events_are_not_a_machines() -> None:
    walk = approval_walk()
    assert rejected(walk, K.ACTIVITY_SCHEDULED, step="Submitted") == (
        "activity_scheduled is not an event of a machine definition"
    )


def test_a_machine_instance_shows_its_progress_and_others_do_not() -> None:
    walk = in_review()
    assert walk.state is not None
    assert instance_to_json(walk.state)["machine"]["state"] == "InReview"
    started = replay(walk.registry, walk.events[:1])
    assert "machine" not in instance_to_json(started)
