"""Orchestration scenarios: what an instance does next, as a user watching it sees it.

Each scenario drives an instance through the engine's builders (``tests.unit.histories``)
and checks the decision the worker gets, the events it commits, and the instance's
status. Every scenario's history must also replay to the state the Drafts built.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from engine.decide.operator_actions import Action
from engine.model.canonical import format_instant
from engine.model.errors import DecisionRejected
from engine.model.events import EventKind
from engine.model.instance import AttemptStatus, InstanceStatus
from engine.model.transitions import WorkKind
from engine.modes import Outcome, decide
from engine.replay.fold import replay
from tests.unit.histories import (
    Run,
    activity_doc,
    definition,
    fan_out_doc,
    join_doc,
)

A = AttemptStatus
K = EventKind
S = InstanceStatus


@pytest.fixture
def run() -> Iterator[Run]:
    """RICH, started; afterwards its history must replay to the state it ended in."""
    run = Run()
    decision = run.start({"order": 1})
    assert (decision.outcome, decision.reason) == (Outcome.SCHEDULED, "activity a")
    yield run
    assert replay(run.registry, run.history) == run.state


def kinds(run: Run) -> list[str]:
    """The event kinds of the last committed transition."""
    return [e.kind.label for e in run.transitions[-1].events]


def scheduled(run: Run, kind: EventKind) -> list[str]:
    """Steps of every ``kind`` event in the history, in order."""
    return [e.step for e in run.history if e.kind is kind]


def through_parallel(run: Run) -> None:
    for step in ("a", "b", "x", "y"):
        run.run_activity(step)
        run.advance(1)


def through_race(run: Run) -> None:
    through_parallel(run)
    run.signal("sig", {"tracking": "z"})
    run.advance(1)


def test_the_happy_path_completes_with_the_last_result(run: Run) -> None:
    through_parallel(run)
    assert run.decisions[-1].reason == "timers of r"
    decision = run.signal("sig", {"tracking": "z"})
    assert decision.outcome is Outcome.WAITING
    assert decision.reason == "waiting for approval ap"
    assert kinds(run) == ["signal_received", "race_won"]
    decision = run.command(Action.APPROVE, step="ap", payload={"ok": True})
    assert (decision.outcome, decision.reason) == (Outcome.SCHEDULED, "timer t")
    due = run.state.timers["t"].due_at
    assert decide(run.draft()).reason == f"timer t is due at {format_instant(due)}"
    run.advance(5)
    decision = run.fire("t")
    assert (decision.outcome, decision.reason) == (Outcome.SCHEDULED, "activity c")
    decision = run.run_activity("c", result={"shipped": True})
    assert decision.outcome is Outcome.COMPLETED
    assert run.state.status is S.COMPLETED
    assert run.state.value("result") == {"shipped": True}
    assert run.state.value("input") == {"order": 1}


def test_the_first_transition_starts_and_schedules_the_first_step(run: Run) -> None:
    first = run.transitions[0]
    assert first.transition_id == "i1#start"
    assert kinds(run) == ["instance_started", "activity_scheduled"]
    (item,) = first.work
    assert (item.kind, item.available_at) == (WorkKind.ACTIVITY, run.now)


def test_a_parallel_admits_every_branch_in_one_transition(run: Run) -> None:
    run.run_activity("a")
    decision = run.run_activity("b")
    assert (decision.outcome, decision.reason) == (Outcome.SCHEDULED, "2 branches of p")
    last = run.transitions[-1]
    assert kinds(run) == ["attempt_succeeded", "activity_scheduled", "activity_scheduled"]
    assert [(w.kind, run.dispatch(s)["step"]) for w, s in zip(last.work, "xy", strict=True)] == [
        (WorkKind.ACTIVITY, "x"),
        (WorkKind.ACTIVITY, "y"),
    ]


def test_the_join_waits_for_every_branch(run: Run) -> None:
    run.run_activity("a")
    run.run_activity("b")
    decision = run.run_activity("y")
    assert (decision.outcome, decision.reason) == (Outcome.WAITING, "j waits for x")
    run.start_attempt("x")
    decision = run.finish("x", "failed")
    assert decision.reason == "retries in p"
    assert not run.state.timers
    run.advance(1)
    decision = run.run_activity("x")
    assert (decision.outcome, decision.reason) == (Outcome.SCHEDULED, "timers of r")


def test_the_race_goes_to_the_earlier_signal(run: Run) -> None:
    through_parallel(run)
    run.advance(10)
    run.signal("sig")
    assert run.state.race_winners == {"r": "sig"}
    run.fire("tmo")
    assert run.state.race_winners == {"r": "sig"}


def test_the_race_goes_to_the_timer_when_no_signal_came(run: Run) -> None:
    through_parallel(run)
    decision = run.fire("tmo")
    assert decision.reason == "waiting for approval ap"
    assert kinds(run) == ["timer_fired", "race_won"]
    assert run.state.race_winners == {"r": "tmo"}
    run.signal("sig")
    assert run.state.race_winners == {"r": "tmo"}


def test_a_signal_received_early_wins_when_the_race_is_reached(run: Run) -> None:
    run.signal("sig")
    through_parallel(run)
    assert run.state.race_winners == {"r": "sig"}
    assert "tmo" not in run.state.timers


def test_an_approval_waits_for_the_approve_command(run: Run) -> None:
    through_race(run)
    assert run.decisions[-1].reason == "waiting for approval ap"
    run.advance(60)
    assert run.command(Action.PAUSE).reason == "paused"
    assert run.command(Action.RESUME).reason == "waiting for approval ap"
    decision = run.command(Action.APPROVE, step="ap")
    assert decision.reason == "timer t"
    entry = run.state.audit[-1]
    assert (entry.action, entry.actor) == ("approve", "alice")
    assert run.state.signals["ap"].signal_id == entry.command_id


def test_a_paused_instance_decides_to_wait(run: Run) -> None:
    run.start_attempt("a")
    run.command(Action.PAUSE)
    decision = run.finish("a")
    assert (decision.outcome, decision.reason) == (Outcome.WAITING, "paused")
    assert kinds(run) == ["attempt_succeeded"]
    decision = run.command(Action.RESUME)
    assert (decision.outcome, decision.reason) == (Outcome.SCHEDULED, "activity b")


def test_choreography_definitions_are_not_orchestrated() -> None:
    spec = definition([activity_doc("a")], mode="choreography")
    run = Run(spec)
    with pytest.raises(DecisionRejected, match="choreography"):
        run.start()


def test_an_ended_instance_decides_nothing(run: Run) -> None:
    run.command(Action.TERMINATE)
    draft = run.draft()
    decision = decide(draft)
    assert decision.outcome is Outcome.ENDED
    assert decision.reason == "instance is terminated"
    assert draft.events == []


# Retries and failures ------------------------------------------------------------------


def test_a_retryable_failure_is_retried_after_the_backoff(run: Run) -> None:
    decision = run.run_activity("a", "failed")
    assert (decision.outcome, decision.reason) == (Outcome.SCHEDULED, "retry of a")
    retry = run.history[-1]
    assert retry.kind is K.RETRY_SCHEDULED
    assert retry.due_at is not None and (retry.due_at - retry.occurred_at).total_seconds() == 1
    assert run.dispatch("a") == {"step": "a", "attempt": 2, "key": "i1/a/2"}
    run.start_attempt("a")
    assert run.history[-1].occurred_at == retry.due_at
    assert run.progress("a").idempotency_key == "i1/a/2"


def test_a_terminal_failure_without_compensations_fails_at_once(run: Run) -> None:
    decision = run.run_activity("a", "fatal")
    assert (decision.outcome, decision.reason) == (Outcome.FAILED, "a failed: fatal")
    assert kinds(run) == ["attempt_failed", "failed"]
    assert (run.state.failure_step, run.state.failure_code) == ("a", "fatal")


def test_exhausted_retries_unwind_compensations_in_reverse_order_then_fail(run: Run) -> None:
    through_race(run)
    run.command(Action.APPROVE, step="ap")
    run.fire("t")
    decision = run.run_activity("c", "failed")
    assert decision.reason == "retry of c"
    run.advance(5)
    decision = run.run_activity("c", "failed")  # attempt 2 of 2
    assert (decision.outcome, decision.reason) == (Outcome.SCHEDULED, "compensation of x")
    assert kinds(run) == ["attempt_failed", "instance_failing", "compensation_scheduled"]
    assert run.state.status is S.FAILING
    order = []
    for _ in range(3):
        [pending] = [c for c, p in run.state.compensations.items() if p.status is A.READY]
        order.append(pending)
        assert run.state.status is S.FAILING
        decision = run.run_activity(pending, compensation=True)
    assert order == ["x", "b", "a"]
    assert (decision.outcome, decision.reason) == (Outcome.FAILED, "c failed: boom")
    assert run.state.status is S.FAILED
    assert scheduled(run, K.COMPENSATION_SCHEDULED) == ["x", "b", "a"]


def test_compensation_follows_completion_order_not_definition_order() -> None:
    spec = definition(
        [
            fan_out_doc("p", "parallel", ["first", "second"]),
            activity_doc("first", compensation=True),
            activity_doc("second", compensation=True),
            join_doc("j", ["first", "second"]),
            activity_doc("last", attempts=1),
        ]
    )
    run = Run(spec)
    run.start()
    run.run_activity("second")
    run.advance(1)
    run.run_activity("first")
    decision = run.run_activity("last", "fatal")
    assert decision.reason == "compensation of first"
    run.run_activity("first", compensation=True)
    assert scheduled(run, K.COMPENSATION_SCHEDULED) == ["first", "second"]
    decision = run.run_activity("second", compensation=True)
    assert decision.outcome is Outcome.FAILED
    assert replay(run.registry, run.history) == run.state


def test_a_failed_compensation_waits_for_an_operator(run: Run) -> None:
    run.run_activity("a")
    decision = run.run_activity("b", "fatal")
    assert decision.reason == "compensation of a"
    decision = run.run_activity("a", "failed", compensation=True)
    assert decision.reason == "retry of compensation of a"
    run.advance(2)
    decision = run.run_activity("a", "failed", compensation=True)  # 2 of 2 attempts
    assert decision.outcome is Outcome.WAITING
    assert "operator" in decision.reason
    assert run.state.status is S.FAILING
    decision = run.command(Action.RESOLVE_COMPENSATION, step="a", code="refunded-by-hand")
    assert (decision.outcome, run.state.status) == (Outcome.FAILED, S.FAILED)
    progress = run.state.compensations["a"]
    assert (progress.status, progress.code) == (A.MANUALLY_RESOLVED, "refunded-by-hand")


def test_a_non_retryable_compensation_failure_waits_at_once(run: Run) -> None:
    run.run_activity("a")
    run.run_activity("b", "fatal")
    decision = run.run_activity("a", "fatal", compensation=True)
    assert decision.reason == ("compensation of a is failed: waiting for an operator to resolve it")
    assert run.state.status is S.FAILING


def test_cancel_compensates_in_reverse_order_and_ends_cancelled(run: Run) -> None:
    run.run_activity("a")
    run.advance(1)
    run.run_activity("b")
    decision = run.command(Action.CANCEL)
    assert (decision.outcome, decision.reason) == (Outcome.SCHEDULED, "compensation of b")
    assert run.state.status is S.CANCELLING
    decision = run.run_activity("b", compensation=True)
    assert decision.reason == "compensation of a"
    decision = run.run_activity("a", compensation=True)
    assert decision.outcome is Outcome.CANCELLED
    assert run.state.status is S.CANCELLED
    assert scheduled(run, K.COMPENSATION_SCHEDULED) == ["b", "a"]


def test_cancel_waits_for_an_attempt_in_flight(run: Run) -> None:
    run.run_activity("a")
    run.start_attempt("b")
    decision = run.command(Action.CANCEL)
    assert (decision.outcome, decision.reason) == (Outcome.WAITING, "activity b is still in flight")
    decision = run.finish("b")
    assert decision.reason == "compensation of b"


def test_cancel_with_nothing_to_compensate_ends_at_once(run: Run) -> None:
    decision = run.command(Action.CANCEL)
    assert decision.outcome is Outcome.CANCELLED
    assert kinds(run) == ["operator_command_recorded", "cancellation_requested", "cancelled"]


# Unknown outcomes ----------------------------------------------------------------------


def test_an_unknown_outcome_under_hold_waits_for_an_operator(run: Run) -> None:
    decision = run.run_activity("a", "unknown")
    assert decision.outcome is Outcome.WAITING
    assert "waiting for an operator" in decision.reason
    assert kinds(run) == ["attempt_unknown"]
    run.advance(3600)
    assert decide(run.draft()).outcome is Outcome.WAITING


def test_resolved_as_succeeded_the_instance_moves_on_with_that_result(run: Run) -> None:
    run.run_activity("a", "unknown")
    decision = run.command(
        Action.RESOLVE_ACTIVITY, step="a", resolution="succeeded", result={"charged": 1}
    )
    assert (decision.outcome, decision.reason) == (Outcome.SCHEDULED, "activity b")
    progress = run.progress("a")
    assert (progress.status, progress.attempt) == (A.SUCCEEDED, 1)
    assert progress.result == '{"charged":1}'


def test_resolved_as_failed_the_instance_fails(run: Run) -> None:
    run.run_activity("a", "unknown")
    decision = run.command(Action.RESOLVE_ACTIVITY, step="a", resolution="failed")
    assert (decision.outcome, decision.reason) == (Outcome.FAILED, "a failed: resolved-failed")


def test_resolved_as_absent_a_new_attempt_with_a_new_key_is_scheduled(run: Run) -> None:
    run.run_activity("a", "unknown")
    decision = run.command(Action.RESOLVE_ACTIVITY, step="a", resolution="absent")
    assert (decision.outcome, decision.reason) == (Outcome.SCHEDULED, "retry of a")
    assert run.dispatch("a") == {"step": "a", "attempt": 2, "key": "i1/a/2"}
    run.start_attempt("a")
    assert run.progress("a").idempotency_key == "i1/a/2"
    assert run.finish("a").reason == "activity b"


def test_an_operator_retry_of_an_unknown_attempt_keeps_its_key(run: Run) -> None:
    run.run_activity("a", "unknown")
    decision = run.command(Action.RETRY_ACTIVITY, step="a")
    assert decision.outcome is Outcome.WAITING  # the retry is the work; nothing else to do
    assert run.dispatch("a") == {"step": "a", "attempt": 2, "key": "i1/a/1"}
    run.start_attempt("a")
    assert run.finish("a").reason == "activity b"


def test_retry_same_key_schedules_a_retry_reusing_the_key(run: Run) -> None:
    run.run_activity("a")
    decision = run.run_activity("b", "unknown")
    assert (decision.outcome, decision.reason) == (Outcome.SCHEDULED, "retry of b")
    assert kinds(run) == ["attempt_unknown", "retry_scheduled"]
    assert run.dispatch("b") == {"step": "b", "attempt": 2, "key": "i1/b/1"}
    run.start_attempt("b")
    assert run.progress("b").idempotency_key == "i1/b/1"


def test_retry_same_key_stops_at_max_attempts_and_waits(run: Run) -> None:
    run.run_activity("a")
    for _ in range(2):
        assert run.run_activity("b", "unknown").reason == "retry of b"
        run.advance(5)
    decision = run.run_activity("b", "unknown")
    assert decision.outcome is Outcome.WAITING
    assert "waiting for an operator" in decision.reason


def test_an_unknown_compensable_activity_blocks_unwinding_until_resolved(run: Run) -> None:
    run.run_activity("a", "unknown")
    decision = run.command(Action.CANCEL)
    assert decision.reason == "activity a outcome is unknown: resolve it before compensating"
    decision = run.command(Action.RESOLVE_ACTIVITY, step="a", resolution="succeeded")
    assert decision.reason == "compensation of a"
    assert run.run_activity("a", compensation=True).outcome is Outcome.CANCELLED


def test_an_unknown_parallel_branch_says_it_waits_for_an_operator(run: Run) -> None:
    run.run_activity("a")
    run.run_activity("b")
    run.run_activity("y")
    decision = run.run_activity("x", "unknown")
    assert decision.outcome is Outcome.WAITING
    assert decision.reason == "activity x outcome is unknown: waiting for an operator to resolve it"
