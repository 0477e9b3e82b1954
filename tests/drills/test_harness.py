"""Fast checks of the harness's own parts (no database): the wire reading the proxy
relies on, the marking of known engine bugs, and the building of mutants."""

from __future__ import annotations

import struct
from datetime import UTC, datetime, timedelta

import pytest

from engine.decide import lifecycle
from engine.model.events import EventKind, json_data
from engine.model.instance import InstanceStatus
from engine.model.registry import Registry
from engine.model.transitions import Draft
from engine.modes import decide, follow
from engine.worker.faults import Action, Boundary
from engine.worker.hooks import WorkerHooks
from verification import drill_machine, replay_check, wire
from verification.drills.catalogue import strands
from verification.known_bugs import KnownBug, classify
from verification.mutants import (
    MUTANTS,
    MutantNotApplicable,
    Rewrite,
    StatementRewrites,
    does_not_apply,
    points_of,
)
from verification.proxy import DrillProxy
from verification.replay_check import History, LedgerRow

T0 = datetime(2031, 6, 7, 8, 0, tzinfo=UTC)


def _message(kind: bytes, *strings: str) -> wire.Message:
    return wire.Message(kind, b"".join(s.encode() + b"\0" for s in strings))


def test_commit_statements_are_recognised_in_any_spelling() -> None:
    assert wire.is_commit("commit")
    assert wire.is_commit("  COMMIT  WORK ;")
    assert wire.is_commit("end transaction")
    assert not wire.is_commit("COMMIT PREPARED 'x'")
    assert not wire.is_commit("SELECT 'COMMIT'")


def test_a_prepared_commit_is_recognised_at_execute() -> None:
    tracker = wire.CommitTracker()
    assert not tracker.executes_commit(_message(wire.PARSE, "s1", "COMMIT"))
    assert not tracker.executes_commit(_message(wire.BIND, "p1", "s1"))
    assert tracker.executes_commit(_message(wire.EXECUTE, "p1"))


def _run(tracker: wire.CommitTracker, sql: str) -> bool:
    """Parse, bind and execute ``sql`` through the unnamed statement and portal; whether
    the tracker took the Execute for a commit."""
    tracker.executes_commit(_message(wire.PARSE, "", sql))
    tracker.executes_commit(_message(wire.BIND, "", ""))
    return tracker.executes_commit(_message(wire.EXECUTE, ""))


def test_a_transition_written_in_autocommit_is_its_own_commit() -> None:
    """No COMMIT follows a transition written by one statement outside a transaction
    block: the proxy must be able to lose that statement's answer instead."""
    tracker = wire.CommitTracker()
    tracker.idle = True
    assert not _run(tracker, "UPDATE work w SET state = 2 WHERE w.work_id = $1")  # a claim
    assert _run(tracker, "WITH ledger AS (INSERT INTO transitions (a) VALUES ($1)) SELECT 1")
    assert tracker.alone and "transition" in tracker.kinds
    tracker.idle = False  # BEGIN was answered: the same write waits for its COMMIT
    assert not _run(tracker, "WITH ledger AS (INSERT INTO transitions (a) VALUES ($1)) SELECT 1")
    assert _run(tracker, "COMMIT") and not tracker.alone


def test_transactions_are_told_apart_by_what_they_ran() -> None:
    tracker = wire.CommitTracker()
    _run(tracker, "SELECT 1 FROM history")
    assert tracker.kinds == set()
    _run(tracker, "INSERT INTO transitions (a) VALUES ($1)")
    assert {"write", "transition"} <= tracker.kinds
    tracker.committed()
    _run(tracker, "UPDATE work w SET lease_expires_at = LEAST($1, w.deadline)")
    assert tracker.kinds == {"write", "renewal"}


def test_only_an_idle_ready_for_query_ends_a_transaction() -> None:
    """An autocommit statement (a worker's claim) commits without a COMMIT message: the
    server's ReadyForQuery says so, so its kinds do not leak into the next COMMIT."""
    assert wire.ends_transaction(wire.Message(wire.READY_FOR_QUERY, b"I"))
    assert not wire.ends_transaction(wire.Message(wire.READY_FOR_QUERY, b"T"))
    assert not wire.ends_transaction(wire.Message(wire.READY_FOR_QUERY, b"E"))
    assert not wire.ends_transaction(wire.Message(wire.COMMAND_COMPLETE, b"I"))


def test_split_messages_keeps_the_incomplete_tail() -> None:
    complete = b"Z" + struct.pack("!I", 5) + b"I"
    messages, rest = wire.split_messages(complete + b"C\x00\x00")
    assert [m.kind for m in messages] == [b"Z"]
    assert rest == b"C\x00\x00"


STUCK = KnownBug(
    "EB0",
    "a stopped owner's rows stay locked",
    "engine/store/commits.py",
    "why, and how to fix it",
    ("idle in transaction",),
    ("I10 ownership",),
)


def test_known_bugs_explain_only_their_own_failures() -> None:
    stuck = "leases of stopped owner w on x: timed out; session of w idle in transaction"
    bugs = (STUCK,)
    assert classify([stuck, "I10 ownership: work x still leased to w"], bugs) == "EB0"
    assert classify([stuck, "I3 effects in bounds: key k: handler called 2 times"], bugs) == ""
    assert classify(["I10 ownership: work x still leased to w"], bugs) == ""
    assert classify([], bugs) == ""


def test_statements_prepared_by_name_are_followed_into_a_group_commit() -> None:
    """A group commit prepares its statement once (in autocommit: not a commit), then
    sends ``BEGIN; EXECUTE ...`` in one message; the COMMIT after it commits a
    transition, so a drill armed for transitions cuts it."""
    tracker = wire.CommitTracker()
    tracker.idle = True
    prepare = "PREPARE wayline_batch_1 AS WITH ledger AS (INSERT INTO transitions (a) VALUES ($1))"
    assert not tracker.executes_commit(_message(wire.SIMPLE_QUERY, prepare))
    assert tracker.kinds == set()
    batch = "BEGIN; EXECUTE wayline_batch_1('t1'); EXECUTE wayline_batch_1('t2')"
    assert not tracker.executes_commit(_message(wire.SIMPLE_QUERY, batch))
    assert not tracker.alone and "transition" in tracker.kinds
    tracker.idle = False
    assert tracker.executes_commit(_message(wire.SIMPLE_QUERY, "COMMIT"))


def test_only_the_answer_to_a_transitions_commit_is_held_back() -> None:
    proxy = DrillProxy("postgresql://127.0.0.1:5432/postgres")
    assert not proxy.delays_answer({"write", "transition"}), "nothing held back by default"
    proxy.hold_for_renewal = True
    assert proxy.delays_answer({"write", "transition"})
    renewal = {"write", "renewal", "transition"}  # a renewal's lock matches a transition's
    assert not proxy.delays_answer(renewal), "a renewal is answered at once"


def test_false_unknowns_are_excused_only_where_a_worker_is_crippled() -> None:
    assert strands(Boundary.AFTER_HANDLER, Action.KILL)
    assert strands(Boundary.AFTER_ATTEMPT_START, Action.RAISE)
    assert not strands(Boundary.AFTER_HANDLER, Action.RAISE), "the handler ran"
    assert not strands(Boundary.AFTER_HANDLER, Action.SEVER_AFTER_COMMIT)
    assert not strands(Boundary.BEFORE_COMMIT, Action.SEVER_BEFORE_COMMIT)


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_every_mutant_applies_to_the_engine_as_it_is(name: str) -> None:
    """A mutant whose target moved would kill its drill workers, and their failing drills
    would look like the mutant being caught; the self-test checks this first."""
    assert does_not_apply(name) == ""


def test_a_mutant_that_does_not_apply_says_why() -> None:
    assert "KeyError" in does_not_apply("no-such-mutant")


def test_a_rewrite_whose_fragment_is_gone_does_not_apply() -> None:
    from engine.store.statements import leases

    with pytest.raises(MutantNotApplicable, match="CHECK_LEASE no longer contains"):
        StatementRewrites([Rewrite(leases, "CHECK_LEASE", "no such fragment", "")])
    with pytest.raises(MutantNotApplicable, match="NO_SUCH_STATEMENT is gone"):
        StatementRewrites([Rewrite(leases, "NO_SUCH_STATEMENT", "x", "")])


def test_a_rewrite_changes_only_the_statement_it_targets() -> None:
    from engine.store.statements import leases

    rewrites = StatementRewrites([Rewrite(leases, "CHECK_LEASE", "FOR UPDATE", "")])
    assert "FOR UPDATE" not in rewrites(leases.CHECK_LEASE)
    assert rewrites(leases.COMPLETE_LEASE) is leases.COMPLETE_LEASE
    assert rewrites(b"SELECT 1") == b"SELECT 1"


def test_hooks_that_override_a_point_the_engine_no_longer_has_do_not_apply() -> None:
    class Renamed(WorkerHooks):
        def no_such_point(self) -> None: ...

    with pytest.raises(MutantNotApplicable, match="no_such_point is gone"):
        points_of(Renamed())


def _machine_history() -> tuple[Registry, History]:
    """An execution of the drill machine counting to 2, as its transitions commit it."""
    definition = drill_machine.flow.definition
    registry = Registry([definition])
    start = {"input": 2, "parent": "p"}
    draft = lifecycle.start_draft(registry, definition, "x", T0, start)
    decide(draft)
    transitions, state = [draft.build("start")], draft.state
    for n, variant in ((1, "Counted"), (2, "Finished")):
        draft = Draft(registry, state, T0 + timedelta(seconds=n))
        draft.add(EventKind.STATE_ENTERED, step=variant, attempt=1, data=json_data({"n": n}))
        follow(draft)
        transitions.append(draft.build())
        state = draft.state
    ledger = [
        LedgerRow(t.transition_id, t.expected_sequence, t.expected_sequence + len(t.events),
                  t.fingerprint)
        for t in transitions
    ]  # fmt: skip
    events = [e for t in transitions for e in t.events]
    return registry, History("x", events, ledger, [w for t in transitions for w in t.work])


def test_a_machine_history_replays_with_its_decisions_per_transition() -> None:
    registry, history = _machine_history()
    verdict = replay_check.verify(registry, history)
    assert verdict.problems == []
    assert verdict.state is not None and verdict.state.status is InstanceStatus.COMPLETED


def test_a_machine_decision_that_differs_from_its_history_is_caught() -> None:
    registry, history = _machine_history()

    def never_completes(draft: Draft) -> None:
        decide(draft)
        draft.events[:] = [e for e in draft.events if e.kind is not EventKind.COMPLETED]

    problems = replay_check.verify(registry, history, never_completes).problems
    assert problems == ["after sequence 3 the engine decides 0 events, history has 1"]

    def schedules_nothing(draft: Draft) -> None:
        decide(draft)
        draft.work.clear()

    problems = replay_check.verify(registry, history, schedules_nothing).problems
    differs = "after sequence 1 the decision's work differs from the work the transition wrote"
    assert problems == [differs]
