"""What the runtime decides for a state machine after each event (``decide``): the next
advance's work, a timer, completion, a dead end, a compensation.

A property drives random manifests (``tests.unit.machines``) the way a worker does:
after every decision the execution has exactly one advance due (at once, or when its
timer is) for the state it is in, until a terminal state completes it or its attempts
run out and it ends dead.
"""

from __future__ import annotations

import json
from datetime import timedelta

from hypothesis import given
from hypothesis import strategies as st

from engine.decide.operator_actions import Action
from engine.decide.operator_commands import record_command
from engine.model.events import EventKind, json_data
from engine.model.instance import Instance, InstanceStatus
from engine.model.registry import Registry
from engine.model.transitions import Draft, WorkItem, WorkKind
from engine.model.validation import parse_definition
from engine.modes import decide, follow
from engine.modes.machines.advances import backoff
from engine.modes.machines.fold import progress_of
from tests.unit.machines import T0, approval_document, machine_documents

K = EventKind
S = InstanceStatus
START = {"input": "v1", "parent": "doc-1"}


def started(document: dict) -> tuple[Draft, Registry]:
    definition = parse_definition(document)
    registry = Registry([definition])
    draft = Draft(registry, None, T0, "m-1")
    draft.add(K.INSTANCE_STARTED, definition=definition.ref, data=json_data(START))
    decide(draft)
    return draft, registry


def the_advance(draft: Draft) -> WorkItem:
    """The one work item the draft made: an advance of the state it is in."""
    [work] = draft.work
    assert draft.state is not None
    payload = json.loads(work.payload or "")
    assert work.kind is WorkKind.ADVANCE
    assert payload["transitions"] == progress_of(draft.state).transitions
    return work


def test_a_start_asks_for_the_first_advance_at_once() -> None:
    draft, _ = started(approval_document())
    work = the_advance(draft)
    assert (work.available_at, work.target) == (T0, "machine:document_approval@1")
    assert json.loads(work.payload or "") == {
        "attempt": 1,
        "transitions": 0,
        "compensate": False,
        "step": "Submitted",
    }


def test_a_timer_state_schedules_its_timer_and_its_advance_for_when_it_is_due() -> None:
    draft, registry = started(approval_document())
    entered = Draft(registry, draft.state, T0)
    entered.add(K.STATE_ENTERED, step="InReview", attempt=1, data='{"reminders":0}')
    follow(entered)

    assert [e.kind for e in entered.events] == [K.STATE_ENTERED, K.TIMER_SCHEDULED]
    assert the_advance(entered).available_at == T0 + timedelta(seconds=60)
    assert json.loads(the_advance(entered).payload or "")["step"] == "InReview"


def cancel(registry: Registry, state: Instance | None) -> Draft:
    draft = Draft(registry, state, T0)
    record_command(draft, "c-1", Action.CANCEL, "ann", "withdrawn")
    follow(draft)
    return draft


def test_a_cancellation_runs_the_declared_compensation() -> None:
    draft, registry = started(approval_document())
    cancelling = cancel(registry, draft.state)
    assert cancelling.state is not None and cancelling.state.status is S.CANCELLING
    assert the_advance(cancelling).target == "machine:document_approval@1", "the version's code"
    assert json.loads(cancelling.work[0].payload or "")["compensate"] is True


def test_without_a_compensation_a_cancellation_cancels_at_once() -> None:
    document = approval_document()
    document["compensation"] = None
    draft, registry = started(document)
    assert cancel(registry, draft.state).state.status is S.CANCELLED  # type: ignore[union-attr]


def test_an_operator_pause_decides_nothing() -> None:
    draft, registry = started(approval_document())
    paused = Draft(registry, draft.state, T0)
    record_command(paused, "p-1", Action.PAUSE, "ann", "hold")
    follow(paused)
    assert paused.work == []


@given(machine_documents(), st.data())
def test_an_execution_always_has_one_advance_due_until_it_ends(
    document: dict, data: st.DataObject
) -> None:
    draft, registry = started(document)
    manifest = parse_definition(document).manifest
    now = T0
    while draft.state is not None and not draft.state.status.terminal:
        work = the_advance(draft)
        now = max(now, work.available_at)
        step = Draft(registry, draft.state, now)
        current = progress_of(draft.state)
        if manifest.timer(current.state) is not None and current.timer_fired_at is None:
            step.add(K.TIMER_FIRED, step=current.state)
        attempt = current.attempts + 1
        if data.draw(st.booleans(), label="fails"):
            last = attempt == manifest.max_attempts
            due = None if last else now + backoff(attempt)
            step.add(K.ADVANCE_FAILED, step=current.state, attempt=attempt, code="x", due_at=due)
        elif current.transitions == manifest.max_transitions:
            return  # the worker ends it dead (dead-transitions-exhausted)
        else:
            target = data.draw(st.sampled_from(manifest.targets(current.state)), label="edge")
            variant = manifest.variant(target)
            fields = {
                name: {"text": "x", "integer": 1, "number": 1.5, "boolean": True}[kind]
                for name, kind in variant.fields
            }
            data_text = json_data(fields) if fields else None
            step.add(K.STATE_ENTERED, step=target, attempt=attempt, data=data_text)
        follow(step)
        draft = step
    assert draft.state is not None
    last = draft.events[-1]
    if draft.state.status is S.COMPLETED:
        assert manifest.is_terminal(progress_of(draft.state).state)
    else:
        assert (draft.state.status, last.code) == (S.FAILED, "dead-attempts-exhausted")
    assert draft.work == []
