"""``status`` and ``state`` of an execution, read from its replayed instance, and the
start data a machine's execution needs."""

from __future__ import annotations

from datetime import timedelta

import pytest

from engine.decide.operator_actions import Action
from engine.decide.operator_commands import record_command
from engine.decide.previews import standing
from engine.model.canonical import format_instant
from engine.model.errors import InputRefused
from engine.model.events import EventKind
from engine.model.transitions import Draft
from engine.model.validation import parse_definition
from engine.modes.machines.manifest import MachineManifest
from engine.modes.machines.standing import StateValue, as_variant, state_value, status_of
from engine.modes.machines.start_data import StartData, execution_id, read_start_data
from examples import documents as document_approval
from tests.unit.machines import Walk, approval_document

K = EventKind


def walk() -> Walk:
    return Walk(parse_definition(approval_document()))


def test_a_running_machine_waits_for_its_timer_and_for_a_retry() -> None:
    w = walk()
    assert status_of(w.state, w.now) == "running"  # Submitted: its advance is due
    w.enter("InReview", reminders=2)
    assert status_of(w.state, w.now) == "waiting"  # InReview waits for its timer
    due = w.now + timedelta(seconds=60)
    w.append(K.TIMER_SCHEDULED, step="InReview", due_at=due)
    assert status_of(w.state, due - timedelta(seconds=1)) == "waiting"
    assert status_of(w.state, due) == "running"  # its advance is due
    w.now = due
    w.append(K.TIMER_FIRED, step="InReview")
    assert status_of(w.state, w.now) == "running"
    w.append(K.ADVANCE_FAILED, step="InReview", attempt=1, code="boom", due_at=w.now + timedelta(1))
    assert status_of(w.state, w.now) == "waiting"  # backing off
    assert status_of(w.state, w.now + timedelta(1)) == "running"
    assert state_value(w.state) == StateValue("InReview", {"reminders": 2})
    typed = as_variant(state_value(w.state), document_approval.Approval)
    assert typed == document_approval.InReview(reminders=2)


def said(w: Walk) -> str:
    """Where the execution stands in words, as ``wayline inspect`` and the studio ask."""
    return standing(w.state, w.registry, w.now).reason


def test_what_a_live_execution_waits_for_is_said_in_words() -> None:
    """``wayline inspect``'s ``now`` line and the studio's Position, which said nothing
    (a bare "waiting") for a machine."""
    w = walk()
    assert said(w) == "waiting for the advance from Submitted, due now"
    w.enter("InReview", reminders=2)
    due = w.now + timedelta(seconds=60)
    w.append(K.TIMER_SCHEDULED, step="InReview", due_at=due)
    assert said(w) == f"waiting for the timer of InReview until {format_instant(due)}"
    studio_says = standing(w.state, w.registry, w.now).reason_in(lambda at: "<when>")
    assert studio_says == "waiting for the timer of InReview until <when>"  # its own format
    w.now = due
    w.append(K.TIMER_FIRED, step="InReview")
    retry = w.now + timedelta(seconds=2)
    w.append(K.ADVANCE_FAILED, step="InReview", attempt=1, code="boom", due_at=retry)
    assert said(w) == (
        f"waiting for attempt 2 of the advance from InReview at {format_instant(retry)}"
    )
    studio_says = standing(w.state, w.registry, w.now).reason_in(lambda at: "<when>")
    assert studio_says == "waiting for attempt 2 of the advance from InReview at <when>"
    command(w, Action.PAUSE)
    assert said(w) == "paused in InReview"


def test_a_cancelled_execution_waits_for_its_compensation() -> None:
    w = walk()
    command(w, Action.CANCEL)
    assert said(w) == "waiting for the compensation of Submitted"


def command(w: Walk, action: Action) -> None:
    """An audited operator command on the walk's instance, as the client records it."""
    draft = Draft(w.registry, w.state, w.now)
    record_command(draft, f"c{len(w.events)}", action, "ada", "why")
    w.state = draft.state
    w.events.extend(draft.events)


@pytest.mark.parametrize(
    ("actions", "status"),
    [
        ([Action.PAUSE], "paused"),
        ([Action.CANCEL], "cancelling"),
        ([Action.TERMINATE], "cancelled"),
    ],
)
def test_lifecycle_statuses(actions: list[Action], status: str) -> None:
    w = walk()
    for action in actions:
        command(w, action)
    assert status_of(w.state, w.now) == status


def test_a_cancelled_execution_is_cancelled() -> None:
    w = walk()
    command(w, Action.CANCEL)
    w.append(K.CANCELLED)
    assert status_of(w.state, w.now) == "cancelled"


def test_a_failed_execution_is_dead_and_a_completed_one_completed() -> None:
    dead = walk()
    dead.append(K.FAILED, step="Submitted", code="dead-attempts-exhausted")
    assert status_of(dead.state, dead.now) == "dead"
    done = walk()
    done.enter("InReview")
    done.wait_for_timer()
    done.enter("Expired")
    done.append(K.COMPLETED)
    assert status_of(done.state, done.now) == "completed"
    assert state_value(done.state) == StateValue("Expired")


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("v1", "a machine starts with an object"),
        ({"input": "v1"}, "needs parent"),
        ({"parent": "doc-7"}, "needs input"),
        ({"input": "v1", "parent": "doc-7", "extra": 1}, "has no extra"),
        ({"input": "v1", "parent": "has space"}, "the parent must be"),
        ({"input": 1, "parent": "doc-7"}, "the input must be text"),
        ({"input": "v1", "parent": "doc-7", "owner": 5}, "owner must be text"),
    ],
)
def test_start_data_is_checked_with_its_reason(value: object, says: str) -> None:
    manifest = parse_definition(approval_document()).manifest
    assert isinstance(manifest, MachineManifest)
    with pytest.raises(InputRefused, match=says):
        read_start_data(manifest, value)


def test_start_data_records_the_submits_fields_only_when_set() -> None:
    assert StartData("v1", "doc-7").document() == {"input": "v1", "parent": "doc-7"}
    assert StartData(None, "doc-7", "ada").document() == {
        "input": None,
        "parent": "doc-7",
        "owner": "ada",
    }


def test_the_execution_id_depends_on_team_actor_and_key_only() -> None:
    one = execution_id("m", "red", "ada", "k")
    assert one == execution_id("m", "red", "ada", "k")
    assert (
        len(
            {
                one,
                execution_id("m", "blue", "ada", "k"),
                execution_id("m", "red", "bob", "k"),
                execution_id("m", "red", "ada", "j"),
            }
        )
        == 4
    )
