"""Replay: which histories are accepted, and that accepted ones replay identically.

Replay is the only way an instance's state is known, so it must refuse every history
the engine could not have written (a worker that replays a corrupted or foreign
history must stop, not reinterpret it) and must rebuild the same state, to the digest,
every time. The rule tests start from a legal history driven through the engine's
builders (``tests.unit.histories``) and append the one event that breaks a rule; the
properties drive random legal histories and mutate them.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings

from engine.decide import decisions
from engine.decide.operator_actions import Action
from engine.model.canonical import canonical_json
from engine.model.errors import EventInvalid, ReplayRejected
from engine.model.events import Event, EventKind, event_from_json, event_to_json, make_event
from engine.model.instance import AttemptStatus, Instance, InstanceStatus
from engine.model.registry import Registry
from engine.replay.fold import apply, replay
from tests.unit.histories import (
    ACTOR,
    RICH,
    RICH_STEPS,
    Run,
    activity_doc,
    definition,
    legal_runs,
    rejection,
)

A = AttemptStatus
K = EventKind
S = InstanceStatus
US = timedelta(microseconds=1)
PROPERTY = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture
def run() -> Run:
    """RICH started: activity ``a`` is scheduled."""
    run = Run()
    run.start({"order": 1})
    run.advance(1)
    return run


def audit(run: Run, action: Action, command_id: str = "c1", offset: int = 0) -> Event:
    """A bare operator audit event (effects are added by the test)."""
    record = {"action": action.value, "actor": ACTOR, "reason": "test"}
    return run.event(
        K.OPERATOR_COMMAND_RECORDED,
        offset,
        idempotency_key=command_id,
        data=canonical_json(record),
    )


def to_race(run: Run) -> None:
    """Drive RICH up to its race: a, b and both parallel branches succeeded, the race's
    timer scheduled, nothing received yet."""
    for step in ("a", "b", "x", "y"):
        run.run_activity(step)
        run.advance(1)
    assert "tmo" in run.state.timers


# History shape -------------------------------------------------------------------------


def test_an_empty_history_is_rejected() -> None:
    with pytest.raises(ReplayRejected, match="history is empty"):
        replay(Registry([RICH]), [])


def test_the_first_event_must_be_a_start_at_sequence_1(run: Run) -> None:
    started = run.history[0]
    with pytest.raises(ReplayRejected, match="must begin with instance_started"):
        replay(run.registry, run.history[1:])
    with pytest.raises(ReplayRejected, match="must begin with instance_started"):
        replay(run.registry, [dataclasses.replace(started, sequence=2)])
    paused = make_event(sequence=1, instance_id="i1", kind=K.PAUSED, occurred_at=run.now)
    with pytest.raises(ReplayRejected, match="must begin with instance_started"):
        replay(run.registry, [paused])


def test_an_instance_starts_only_once(run: Run) -> None:
    again = run.event(K.INSTANCE_STARTED, definition=RICH.ref)
    assert "instance_started may only begin a history" in rejection(run, again)


def test_gaps_and_duplicates_are_rejected(run: Run) -> None:
    run.run_activity("a")
    history = run.history
    with pytest.raises(ReplayRejected, match="expected sequence 3"):
        replay(run.registry, [*history[:2], *history[3:]])
    with pytest.raises(ReplayRejected, match="expected sequence 3"):
        replay(run.registry, [*history[:2], history[1], *history[2:]])


def test_events_of_another_instance_are_rejected(run: Run) -> None:
    stranger = dataclasses.replace(run.event(K.COMPLETED), instance_id="i2")
    assert "another instance" in rejection(run, stranger)


def test_time_may_not_go_backwards(run: Run) -> None:
    run.now = run.state.updated_at - US
    assert "backwards" in rejection(run, run.event(K.COMPLETED))


def test_an_unregistered_definition_is_refused(run: Run) -> None:
    other = definition(RICH_STEPS, name="other")
    with pytest.raises(ReplayRejected, match="is not registered"):
        replay(Registry([other]), run.history)


def test_a_same_name_and_version_with_other_content_is_a_fingerprint_mismatch(run: Run) -> None:
    impostor = definition([*RICH_STEPS[:-1], {**RICH_STEPS[-1], "timeout": "11s"}])
    assert (impostor.name, impostor.version) == (RICH.name, RICH.version)
    with pytest.raises(ReplayRejected, match="fingerprint"):
        replay(Registry([impostor]), run.history)


def test_nothing_follows_a_terminal_event(run: Run) -> None:
    run.command(Action.TERMINATE)
    assert "already terminated" in rejection(run, run.event(K.COMPLETED))
    assert "already terminated" in rejection(run, audit(run, Action.RESUME))


# Operator audit pairing ----------------------------------------------------------------


def test_an_audit_without_its_effect_is_rejected(run: Run) -> None:
    pending = audit(run, Action.PAUSE)
    state = apply(run.registry, run.state, pending)
    assert state.pending_command is not None
    with pytest.raises(ReplayRejected, match="no effect after it"):
        replay(run.registry, [*run.history, pending])


@pytest.mark.parametrize(
    ("kind", "fields"),
    [
        (K.PAUSED, {}),
        (K.CANCELLATION_REQUESTED, {}),
        (K.TERMINATED, {}),
        (K.DEFINITION_MIGRATED, {"definition": RICH.ref}),
    ],
    ids=lambda v: getattr(v, "label", ""),
)
def test_an_operator_effect_without_its_audit_is_rejected(
    run: Run, kind: EventKind, fields: dict
) -> None:
    assert "needs an operator command" in rejection(run, run.event(kind, **fields))


def test_an_audit_followed_by_another_actions_effect_is_rejected(run: Run) -> None:
    reason = rejection(run, audit(run, Action.PAUSE), run.event(K.TERMINATED, 1))
    assert "'pause' must be followed by paused" in reason


def test_an_audit_may_not_be_followed_by_an_engine_event(run: Run) -> None:
    reason = rejection(run, audit(run, Action.CANCEL), run.event(K.COMPLETED, 1))
    assert "must be followed by cancellation_requested" in reason


# Activity attempts ---------------------------------------------------------------------


def start_event(run: Run, step: str, attempt: int, key: str, timeout: float = 10) -> Event:
    return run.event(
        K.ATTEMPT_STARTED,
        step=step,
        attempt=attempt,
        idempotency_key=key,
        due_at=run.now + timedelta(seconds=timeout),
    )


def retry_event(run: Run, step: str, attempt: int, key: str, delay: timedelta) -> Event:
    return run.event(
        K.RETRY_SCHEDULED, step=step, attempt=attempt, idempotency_key=key, due_at=run.now + delay
    )


def test_attempts_are_numbered_from_one_without_skipping(run: Run) -> None:
    assert "attempt must be 1" in rejection(run, start_event(run, "a", 2, "i1/a/1"))
    run.run_activity("a", "failed")
    run.advance(5)
    assert "attempt must be 2" in rejection(run, start_event(run, "a", 3, "i1/a/2"))
    assert "attempt must be 2" in rejection(run, start_event(run, "a", 1, "i1/a/2"))


def test_an_attempt_is_due_exactly_its_timeout_after_it_starts(run: Run) -> None:
    for timeout in (10 - 1e-6, 10 + 1e-6, 9):
        reason = rejection(run, start_event(run, "a", 1, "i1/a/1", timeout))
        assert "start time plus the step timeout" in reason


def test_a_retry_never_starts_before_its_retry_time(run: Run) -> None:
    run.run_activity("a", "failed")
    retry_at = run.progress("a").retry_at
    assert retry_at == run.now + timedelta(seconds=1)
    run.now = retry_at - US
    assert "before its retry time" in rejection(run, start_event(run, "a", 2, "i1/a/2"))
    run.now = retry_at
    apply(run.registry, run.state, start_event(run, "a", 2, "i1/a/2"))


def test_a_first_attempt_starts_with_the_key_its_schedule_fixed(run: Run) -> None:
    assert "key its schedule or retry fixed" in rejection(run, start_event(run, "a", 1, "i1/a/x"))


def test_a_retry_starts_with_the_key_its_retry_fixed(run: Run) -> None:
    run.run_activity("a", "failed")
    run.advance(1)
    assert "key its schedule or retry fixed" in rejection(run, start_event(run, "a", 2, "i1/a/1"))


def test_an_outcome_needs_that_attempt_in_flight(run: Run) -> None:
    succeeded = run.event(K.ATTEMPT_SUCCEEDED, step="a", attempt=1)
    assert "no attempt 1 in flight" in rejection(run, succeeded)
    run.start_attempt("a")
    wrong = run.event(K.ATTEMPT_FAILED, step="a", attempt=2, code="boom")
    assert "no attempt 2 in flight" in rejection(run, wrong)
    run.finish("a")
    again = run.event(K.ATTEMPT_UNKNOWN, step="a", attempt=1, code="lost")
    assert "no attempt 1 in flight" in rejection(run, again)


def fail_every_attempt(run: Run) -> None:
    """Fail all 3 attempts ``a``'s policy allows, the last without deciding what follows."""
    for _ in range(2):
        run.run_activity("a", "failed")
        run.advance(5)
    run.start_attempt("a")
    run.finish("a", "failed", decide=False)


def test_a_policy_retry_never_exceeds_max_attempts(run: Run) -> None:
    fail_every_attempt(run)
    assert run.progress("a").attempt == 3
    reason = rejection(run, retry_event(run, "a", 3, "i1/a/4", timedelta(seconds=4)))
    assert "all 3 attempts are used" in reason


def test_an_operator_retry_grants_exactly_one_more_attempt(run: Run) -> None:
    fail_every_attempt(run)
    run.command(Action.RETRY_ACTIVITY, step="a")
    assert run.progress("a").status is A.RETRY_WAITING
    run.start_attempt("a")
    assert run.progress("a").attempt == 4
    run.finish("a", "failed", decide=False)
    reason = rejection(run, retry_event(run, "a", 4, "i1/a/5", timedelta(seconds=4)))
    assert "all 3 attempts are used" in reason


def test_unknown_under_hold_is_never_retried_by_policy(run: Run) -> None:
    run.run_activity("a", "unknown")
    assert run.progress("a").status is A.UNKNOWN
    for key in ("i1/a/1", "i1/a/2"):
        reason = rejection(run, retry_event(run, "a", 1, key, timedelta(seconds=1)))
        assert "unknown and may not be retried by policy" in reason


def test_unknown_is_never_turned_into_an_outcome(run: Run) -> None:
    run.run_activity("a", "unknown")
    for kind in (K.ATTEMPT_SUCCEEDED, K.ATTEMPT_FAILED):
        event = run.event(
            kind, step="a", attempt=1, code="late" if kind is K.ATTEMPT_FAILED else ""
        )
        assert "no attempt 1 in flight" in rejection(run, event)


def test_retry_same_key_after_unknown_must_reuse_the_key(run: Run) -> None:
    run.run_activity("a")
    run.start_attempt("b")
    run.finish("b", "unknown", decide=False)
    reason = rejection(run, retry_event(run, "b", 1, "i1/b/2", timedelta(seconds=1)))
    assert "must reuse the previous idempotency key" in reason
    apply(run.registry, run.state, retry_event(run, "b", 1, "i1/b/1", timedelta(seconds=1)))


def test_a_policy_retry_after_failure_uses_a_new_key_and_the_backoff(run: Run) -> None:
    run.start_attempt("a")
    run.finish("a", "failed", decide=False)
    second = timedelta(seconds=1)
    reason = rejection(run, retry_event(run, "a", 1, "i1/a/1", second))
    assert "must not reuse the previous idempotency key" in reason
    for delay in (second - US, second + US, timedelta(0)):
        reason = rejection(run, retry_event(run, "a", 1, "i1/a/2", delay))
        assert "backoff" in reason
    reason = rejection(run, retry_event(run, "a", 2, "i1/a/2", second))
    assert "must name the last attempt" in reason
    apply(run.registry, run.state, retry_event(run, "a", 1, "i1/a/2", second))


def test_attempts_start_only_while_running(run: Run) -> None:
    run.command(Action.PAUSE)
    assert "needs the instance running" in rejection(run, start_event(run, "a", 1, "i1/a/1"))


def test_an_outcome_in_flight_is_recorded_while_paused(run: Run) -> None:
    run.start_attempt("a")
    run.command(Action.PAUSE)
    decision = run.finish("a")
    assert decision is not None and decision.reason == "paused"
    assert run.progress("a").status is A.SUCCEEDED
    assert "b" not in run.state.activities


def test_inputs_results_and_payloads_respect_the_step_limits(run: Run) -> None:
    big = canonical_json("x" * 1000)  # 1002 bytes with its quotes; the limits are 1000 / 100
    run.start_attempt("a")
    outcome = run.event(K.ATTEMPT_SUCCEEDED, step="a", attempt=1, data=big)
    assert "result is 1002 bytes; the step allows at most 1000" in rejection(run, outcome)
    signal = run.event(K.SIGNAL_RECEIVED, step="sig", idempotency_key="s", data=big)
    assert "signal payload is 1002 bytes" in rejection(run, signal)
    scheduled = run.event(K.ACTIVITY_SCHEDULED, step="b", data=big)
    assert "activity input is 1002 bytes" in rejection(run, scheduled)


@pytest.mark.parametrize("kind", [K.ATTEMPT_FAILED, K.ATTEMPT_UNKNOWN], ids=lambda k: k.label)
def test_a_failure_detail_respects_the_result_limit(run: Run, kind: EventKind) -> None:
    """``result_limit`` bounds whatever an attempt's outcome carries, detail included."""
    run.start_attempt("a")
    fits = run.event(kind, step="a", attempt=1, code="boom", data=canonical_json("x" * 998))
    apply(run.registry, run.state, fits)
    big = run.event(kind, step="a", attempt=1, code="boom", data=canonical_json("x" * 999))
    assert "failure detail is 1001 bytes; the step allows at most 1000" in rejection(run, big)


@pytest.mark.parametrize(
    "kind", [K.COMPENSATION_FAILED, K.COMPENSATION_UNKNOWN], ids=lambda k: k.label
)
def test_a_compensation_failure_detail_respects_its_result_limit(run: Run, kind: EventKind) -> None:
    run.run_activity("a")
    run.command(Action.CANCEL)
    run.start_attempt("a", compensation=True)
    big = run.event(kind, step="a", attempt=1, code="boom", data=canonical_json("x" * 99))
    assert "failure detail is 101 bytes; the step allows at most 100" in rejection(run, big)


def test_manual_resolution_evidence_respects_the_compensation_result_limit(run: Run) -> None:
    run.run_activity("a")
    run.command(Action.CANCEL)
    run.run_activity("a", "unknown", compensation=True)
    big = canonical_json("x" * 99)  # 101 bytes; the compensation's result_limit is 100
    resolved = run.event(K.COMPENSATION_MANUALLY_RESOLVED, 1, step="a", code="by-hand", data=big)
    reason = rejection(run, audit(run, Action.RESOLVE_COMPENSATION), resolved)
    assert "resolution evidence is 101 bytes; the step allows at most 100" in reason
    with pytest.raises(ReplayRejected, match="resolution evidence is 101 bytes"):
        run.command(Action.RESOLVE_COMPENSATION, step="a", code="by-hand", evidence="x" * 99)
    run.command(Action.RESOLVE_COMPENSATION, step="a", code="by-hand", evidence="x" * 98)
    assert run.state.compensations["a"].result == canonical_json("x" * 98)


def test_a_child_failure_detail_respects_the_child_step_result_limit() -> None:
    """A child step's result_limit bounds its start failures and its failure too."""
    kid = definition([activity_doc("k")], name="kid")
    ref = {"name": "kid", "version": "1", "fingerprint": kid.fingerprint}
    retry = {"max_attempts": 2, "initial_delay": "1s", "max_delay": "1s"}
    step = {"name": "c", "kind": "child", "target": "kid", "timeout": "10s"}
    step |= {"input_limit": 100, "result_limit": 100, "retry": retry, "child_definition": ref}
    parent = definition([step], name="parent")
    run = Run(parent, registry=Registry([kid, parent]))
    run.start()
    draft = run.draft()
    decisions.start_child_attempt(draft, run.state.children["c"], 1, "i1/c/child/1")
    run.commit(draft, advance=False)
    big = canonical_json("x" * 99)  # 101 bytes
    for kind in (K.CHILD_START_FAILED, K.CHILD_START_UNKNOWN):
        event = run.event(kind, step="c", attempt=1, code="boom", data=big)
        assert "child failure detail is 101 bytes; the step allows at most 100" in rejection(
            run, event
        )
    failed = run.event(K.CHILD_FAILED, step="c", successor_id="i1/c", code="boom", data=big)
    assert "child failure detail is 101 bytes" in rejection(run, failed)


def test_events_must_name_a_step_of_the_right_kind(run: Run) -> None:
    assert "not in rich@1" in rejection(run, run.event(K.ACTIVITY_SCHEDULED, step="nope"))
    assert "is a timer step" in rejection(run, run.event(K.ACTIVITY_SCHEDULED, step="t"))
    assert "is already scheduled" in rejection(run, run.event(K.ACTIVITY_SCHEDULED, step="a"))


# Races, timers, signals, approvals -----------------------------------------------------


def test_the_race_winner_is_the_earliest_branch(run: Run) -> None:
    to_race(run)
    run.signal("sig", decide=False)
    run.fire("tmo", decide=False)
    reason = rejection(run, run.event(K.RACE_WON, step="r", data=canonical_json("tmo")))
    assert "won by 'sig', not 'tmo'" in reason
    apply(run.registry, run.state, run.event(K.RACE_WON, step="r", data=canonical_json("sig")))


@pytest.mark.parametrize("timer_first", [True, False])
def test_a_tie_goes_to_the_branch_defined_first(run: Run, timer_first: bool) -> None:
    to_race(run)
    run.now = run.state.timers["tmo"].due_at
    if timer_first:
        run.fire("tmo", decide=False)
    run.signal("sig", decide=False)
    if not timer_first:
        run.fire("tmo", decide=False)
    reason = rejection(run, run.event(K.RACE_WON, step="r", data=canonical_json("tmo")))
    assert "won by 'sig'" in reason


def test_a_race_without_a_finished_branch_has_no_winner(run: Run) -> None:
    to_race(run)
    reason = rejection(run, run.event(K.RACE_WON, step="r", data=canonical_json("sig")))
    assert "no branch of race 'r' has completed" in reason


def test_a_race_winner_never_changes(run: Run) -> None:
    to_race(run)
    run.fire("tmo")
    assert run.state.race_winners == {"r": "tmo"}
    run.signal("sig")
    for winner in ("sig", "tmo"):
        event = run.event(K.RACE_WON, step="r", data=canonical_json(winner))
        assert "already has a winner" in rejection(run, event)
    assert run.state.race_winners == {"r": "tmo"}


def test_a_timer_fires_once_never_early_and_never_while_paused(run: Run) -> None:
    assert "never scheduled" in rejection(run, run.event(K.TIMER_FIRED, step="tmo"))
    to_race(run)
    due = run.state.timers["tmo"].due_at
    run.now = due - US
    assert "before it is due" in rejection(run, run.event(K.TIMER_FIRED, step="tmo"))
    run.command(Action.PAUSE)
    run.now = due
    assert "needs the instance running" in rejection(run, run.event(K.TIMER_FIRED, step="tmo"))
    run.command(Action.RESUME)
    run.fire("tmo")
    assert "already fired" in rejection(run, run.event(K.TIMER_FIRED, step="tmo"))


def test_a_timer_is_due_exactly_its_duration_after_it_is_scheduled(run: Run) -> None:
    to_race(run)
    run.fire("tmo")
    for delay in (timedelta(seconds=30) - US, timedelta(seconds=30) + US):
        event = run.event(K.TIMER_SCHEDULED, step="t", due_at=run.now + delay)
        assert "timer duration" in rejection(run, event)


def test_a_signal_step_receives_at_most_one_signal(run: Run) -> None:
    run.signal("sig", {"n": 1})
    event = run.event(K.SIGNAL_RECEIVED, step="sig", idempotency_key="another")
    assert "already received a signal" in rejection(run, event)


def test_signals_are_buffered_while_paused_but_refused_while_cancelling(run: Run) -> None:
    run.command(Action.PAUSE)
    run.signal("sig")
    assert "sig" in run.state.signals
    run.command(Action.RESUME)
    run.run_activity("a")
    run.command(Action.CANCEL)
    assert run.state.status is S.CANCELLING
    event = run.event(K.SIGNAL_RECEIVED, step="sig", idempotency_key="late")
    assert "not cancelling" in rejection(run, event)


def test_an_approval_is_only_given_by_an_approve_command(run: Run) -> None:
    plain = run.event(K.SIGNAL_RECEIVED, step="ap", idempotency_key="s1")
    assert "needs an approve command" in rejection(run, plain)
    wrong_key = run.event(K.SIGNAL_RECEIVED, 1, step="ap", idempotency_key="other")
    assert "keyed by its command id" in rejection(run, audit(run, Action.APPROVE), wrong_key)
    on_signal = run.event(K.SIGNAL_RECEIVED, 1, step="sig", idempotency_key="c1")
    assert "approve only answers approvals" in rejection(run, audit(run, Action.APPROVE), on_signal)
    run.command(Action.APPROVE, step="ap", payload={"ok": True})
    assert run.state.signals["ap"].signal_id == run.state.audit[-1].command_id


def test_a_signal_a_person_sends_is_audited_and_answers_only_a_signal_step(run: Run) -> None:
    """The studio's send form: the signal's event after a ``signal`` command, which
    names who sent it and why; it cannot stand in for an approval."""
    on_approval = run.event(K.SIGNAL_RECEIVED, 1, step="ap", idempotency_key="c1")
    assert "needs an approve command" in rejection(run, audit(run, Action.SIGNAL), on_approval)
    wrong_key = run.event(K.SIGNAL_RECEIVED, 1, step="sig", idempotency_key="other")
    assert "keyed by its command id" in rejection(run, audit(run, Action.SIGNAL), wrong_key)
    run.command(Action.SIGNAL, step="sig", payload={"n": 2})
    sent = run.state.audit[-1]
    assert (sent.action, run.state.signals["sig"].signal_id) == ("signal", sent.command_id)


# Compensation --------------------------------------------------------------------------


def test_compensation_is_only_scheduled_after_success(run: Run) -> None:
    scheduled = run.event(K.COMPENSATION_SCHEDULED, 1, step="a")
    reason = rejection(run, audit(run, Action.COMPENSATE), scheduled)
    assert "has not succeeded" in reason
    run.run_activity("a", "unknown")
    scheduled = run.event(K.COMPENSATION_SCHEDULED, 1, step="a")
    assert "has not succeeded" in rejection(run, audit(run, Action.COMPENSATE), scheduled)
    no_undo = run.event(K.COMPENSATION_SCHEDULED, 1, step="y")
    assert "declares no compensation" in rejection(run, audit(run, Action.COMPENSATE), no_undo)


def test_cancelled_is_refused_while_a_compensation_is_unsettled(run: Run) -> None:
    run.run_activity("a")
    run.command(Action.CANCEL)
    assert run.state.compensations["a"].status is A.READY
    assert "has not settled" in rejection(run, run.event(K.CANCELLED))
    run.run_activity("a", "fatal", compensation=True)
    assert run.state.status is S.CANCELLING
    assert "has not settled" in rejection(run, run.event(K.CANCELLED))


def test_failed_is_refused_while_an_attempt_is_in_flight(run: Run) -> None:
    run.run_activity("a")
    run.run_activity("b")
    run.start_attempt("x")
    run.run_activity("y", "fatal")
    assert run.state.status is S.FAILING
    event = run.event(K.FAILED, step="y", code="fatal")
    assert "still has an attempt in flight" in rejection(run, event)


def test_a_manual_resolution_is_never_reported_as_success(run: Run) -> None:
    run.run_activity("a")
    run.command(Action.CANCEL)
    resolved = run.event(K.COMPENSATION_MANUALLY_RESOLVED, 1, step="a", code="by-hand")
    reason = rejection(run, audit(run, Action.RESOLVE_COMPENSATION), resolved)
    assert "only a failed or unknown compensation" in reason
    run.run_activity("a", "unknown", compensation=True)
    run.command(Action.RESOLVE_COMPENSATION, step="a", code="by-hand")
    assert run.state.compensations["a"].status is A.MANUALLY_RESOLVED
    assert run.state.status is S.CANCELLED


# Properties over random legal histories ------------------------------------------------


def round_tripped(event: Event) -> Event:
    return event_from_json(json.loads(json.dumps(event_to_json(event))))


@PROPERTY
@given(legal_runs())
def test_replay_is_deterministic(run: Run) -> None:
    first = replay(run.registry, run.history)
    second = replay(run.registry, run.history)
    assert first == second == run.state
    assert first.digest == second.digest == run.state.digest
    again = replay(run.registry, [round_tripped(e) for e in run.history])
    assert again == first
    assert again.digest == first.digest


def _rebuilt(event: Event, **changes: object) -> Event:
    """The event with ``changes``, validated again (may raise EventInvalid)."""
    fields = {f.name: getattr(event, f.name) for f in dataclasses.fields(Event)}
    return make_event(**{**fields, **changes})


def _renumbered(events: list[Event], first: int) -> list[Event]:
    return [dataclasses.replace(e, sequence=n) for n, e in enumerate(events, start=first)]


@dataclasses.dataclass(frozen=True)
class Mutation:
    """One change to a history: everything before ``index`` is kept, then ``tail()``
    (which may raise EventInvalid when the event rules already refuse the change)."""

    label: str
    index: int
    tail: Callable[[], list[Event]]
    swapped: tuple[Event, Event] | None = None


def mutations(history: list[Event]) -> Iterator[Mutation]:
    """Every single-event mutation: structural ones both as they are and renumbered
    (so the sequence check alone cannot catch them), and field ones in place."""
    for i, event in enumerate(history):
        rest = history[i + 1 :]
        yield Mutation(f"drop {i}", i, lambda r=rest: r)
        yield Mutation(f"drop {i} renumbered", i, lambda r=rest, i=i: _renumbered(r, i + 1))
        doubled = [event, *rest]
        yield Mutation(f"duplicate {i}", i + 1, lambda d=doubled: d)
        yield Mutation(
            f"duplicate {i} renumbered", i + 1, lambda d=doubled, i=i: _renumbered(d, i + 2)
        )
        if rest:
            pair = (rest[0], event)
            swapped = [*pair, *rest[1:]]
            yield Mutation(f"swap {i}", i, lambda s=swapped: s)
            yield Mutation(
                f"swap {i} renumbered", i, lambda s=swapped, i=i: _renumbered(s, i + 1), pair
            )
        if event.attempt:
            for delta in (-1, 1):
                yield Mutation(
                    f"attempt {i} {delta:+}",
                    i,
                    lambda e=event, r=rest, d=delta: [_rebuilt(e, attempt=e.attempt + d), *r],
                )
        if event.due_at is not None:
            for shift in (-US, US):
                yield Mutation(
                    f"due_at {i} {shift}",
                    i,
                    lambda e=event, r=rest, s=shift: [_rebuilt(e, due_at=e.due_at + s), *r],
                )


def replay_tail(run: Run, start: Instance | None, tail: Callable[[], list[Event]]) -> str | None:
    """The digest of the history (cached prefix state + tail), None when refused.
    Folding onto a cached prefix is full replay; the property below proves that."""
    try:
        state = start
        for event in tail():
            state = apply(run.registry, state, event)
    except (ReplayRejected, EventInvalid):
        return None
    if state is None or state.pending_command is not None:
        return None
    return state.digest


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(legal_runs(max_moves=40))
def test_every_single_mutation_is_rejected_or_changes_the_digest(run: Run) -> None:
    prefixes: list[Instance | None] = [None]
    for event in run.history:
        prefixes.append(apply(run.registry, prefixes[-1], event))
    original = run.state.digest
    for mutation in mutations(run.history):
        if replay_tail(run, prefixes[mutation.index], mutation.tail) != original:
            continue
        # Only two events of one instant may trade places unnoticed, when they commute:
        # e.g. two parallel branches starting together, or a known terminal failure and
        # the instance_failing decision it leads to.
        assert mutation.swapped is not None, f"{mutation.label} went unnoticed in {run}"
        first, second = mutation.swapped
        assert first.occurred_at == second.occurred_at, mutation.label


@PROPERTY
@given(legal_runs())
def test_incremental_apply_equals_full_replay_at_every_prefix(run: Run) -> None:
    state = None
    boundaries = {t.committed_sequence for t in run.transitions}
    for i, event in enumerate(run.history, start=1):
        state = apply(run.registry, state, event)
        if state.pending_command is not None:
            assert i not in boundaries
            with pytest.raises(ReplayRejected, match="no effect after it"):
                replay(run.registry, run.history[:i])
            continue
        full = replay(run.registry, run.history[:i])
        assert full == state
        assert full.digest == state.digest
    assert state == run.state
    expected = [0] + [t.committed_sequence for t in run.transitions[:-1]]
    assert [t.expected_sequence for t in run.transitions] == expected
