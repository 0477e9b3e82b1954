"""What an execution's page lays over its machine's diagram: the walk folded from
history (edges taken, failed advances), the current state's mark, the status words and
the state panel, checked on histories written as the runtime writes them."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from engine.decide.operator_actions import Action
from engine.decide.operator_commands import record_command
from engine.model.events import EventKind
from engine.model.transitions import Draft
from engine.model.validation import parse_definition
from engine.modes.machines.standing import status_of
from engine.replay.fold import apply
from studio.machines import overlay
from studio.machines import walk as machine_walk
from studio.machines.diagram import layout
from studio.machines.walk import Walk
from tests.unit.machines import T0, approval_document, machine_documents
from tests.unit.machines import Walk as History

K = EventKind


def folded(history: History) -> Walk:
    """The studio's walk of ``history``, folded event by event beside replay."""
    walk, state = machine_walk.EMPTY, None
    for event in history.events:
        before, state = state, apply(history.registry, state, event)
        walk = machine_walk.fold(walk, before, event)
    return walk


def approval() -> History:
    return History(parse_definition(approval_document()))


def in_review_twice() -> History:
    """Submitted -> InReview (timer) -> InReview again, after one failed advance."""
    history = approval()
    history.enter("InReview", reminders=0)
    history.wait_for_timer()
    history.fail(1)
    history.enter("InReview", attempt=2, reminders=1)
    return history


def test_edges_taken_are_counted_from_the_state_before_each_entry() -> None:
    walk = folded(in_review_twice())
    assert walk.taken == {("Submitted", "InReview"): 1, ("InReview", "InReview"): 1}
    assert walk.last == ("InReview", "InReview")
    [failure] = walk.failures
    assert (failure.state, failure.attempt, failure.code) == ("InReview", 1, "boom")
    assert failure.retry_at == failure.at + timedelta(seconds=1)


@given(machine_documents(), st.data())
def test_a_random_walk_counts_each_step_on_its_edge(document: Any, data: st.DataObject) -> None:
    history = History(parse_definition(document))
    steps: list[tuple[str, str]] = []
    while len(steps) < history.manifest.max_transitions:
        source = history.current
        targets = history.manifest.targets(source)
        if not targets:
            break
        history.wait_for_timer()
        target = data.draw(st.sampled_from(targets))
        history.enter(target)
        steps.append((source, target))
    walk = folded(history)
    assert sum(walk.taken.values()) == len(steps)
    assert walk.taken == {edge: steps.count(edge) for edge in set(steps)}
    assert walk.last == (steps[-1] if steps else None)
    diagram = layout(document)
    marks = overlay.execution_marks(diagram, history.state, walk)  # type: ignore[arg-type]
    current = [n.step for n in diagram.nodes if "current" in marks[n.node_id].css.split()]
    assert current == [history.current]
    for edge in diagram.edges:
        mark = marks[edge.edge_id]
        times = walk.taken.get((edge.source, edge.target), 0)
        assert mark.count == (str(times) if times else "")
        assert ("taken" in mark.css.split()) == bool(times)


def test_the_current_state_says_what_it_waits_for() -> None:
    history = approval()
    assert overlay.current(history.state).state == "running"  # type: ignore[arg-type]
    history.enter("InReview", reminders=0)
    assert overlay.current(history.state).state == "waiting-timer"  # type: ignore[arg-type]
    assert status_of(history.state, T0) == "waiting"  # type: ignore[arg-type]
    history.wait_for_timer()
    assert status_of(history.state, history.now) == "running"  # type: ignore[arg-type]
    history.fail(1)
    state = history.state
    assert overlay.current(state).state == "retry-waiting"  # type: ignore[arg-type]
    assert status_of(state, history.now - timedelta(seconds=1)) == "waiting"  # type: ignore[arg-type]
    assert overlay.frontier(state) == {"InReview"}  # type: ignore[arg-type]


def test_an_ended_execution_is_completed_dead_or_cancelled_where_it_stopped() -> None:
    done = approval()
    done.enter("InReview", reminders=0)
    done.wait_for_timer()
    done.enter("Approved", by="ann")
    done.append(K.COMPLETED)
    assert overlay.current(done.state).state == "succeeded"  # type: ignore[arg-type]
    assert status_of(done.state, done.now) == "completed"  # type: ignore[arg-type]
    assert overlay.frontier(done.state) == set()  # type: ignore[arg-type]

    started = approval()
    cancel = Draft(started.registry, started.state, T0)
    record_command(cancel, "c-1", Action.CANCEL, "ann", "no longer needed")
    assert overlay.current(cancel.state).state == "compensating"  # type: ignore[arg-type]
    assert status_of(cancel.state, T0) == "cancelling"  # type: ignore[arg-type]

    dead = approval()
    dead.append(K.FAILED, code="dead-attempts-exhausted")
    mark = overlay.current(dead.state)  # type: ignore[arg-type]
    assert (mark.state, mark.note) == ("failed", "dead: dead-attempts-exhausted")
    assert status_of(dead.state, dead.now) == "dead"  # type: ignore[arg-type]


def test_the_state_panel_shows_fields_bounds_timer_and_failures_newest_first() -> None:
    history = in_review_twice()
    history.wait_for_timer()
    history.fail(1)
    backing_off = history.now - timedelta(seconds=1)  # the retry is due at ``now``
    view = overlay.view(history.state, folded(history), backing_off)  # type: ignore[arg-type]
    assert (view.state, view.status) == ("InReview", "waiting")
    assert [(f.name, f.type, f.value) for f in view.fields] == [("reminders", "integer", 1)]
    assert (view.transitions, view.max_transitions) == (2, 8)
    assert (view.attempts, view.max_attempts) == (1, 3)
    assert view.timer == 60 and view.timer_due_at == view.timer_fired_at is not None
    assert [f.sequence for f in view.failures] == sorted(
        (f.sequence for f in view.failures), reverse=True
    )
    assert view.taken == (("Submitted", "InReview", 1), ("InReview", "InReview", 1))
    assert view.position.startswith("waiting in InReview")
