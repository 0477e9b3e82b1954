"""Replaying a code-first run's history into the journal the driver replays the code
against, from hand-made histories: steps (their attempts, retries and final failure),
waits resolved from the inbox (duplicates refused, extras set aside), journaled values,
and what replay refuses. Instances of other modes keep their digests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.decide import lifecycle
from engine.model.canonical import canonical_json
from engine.model.errors import ReplayRejected
from engine.model.events import EventKind
from engine.model.instance import instance_to_json
from engine.model.registry import Registry
from engine.model.transitions import Draft
from engine.modes.code import decide, waits
from engine.modes.code.failures import failed_text
from engine.modes.code.fold import entries
from engine.modes.code.journal import Command, EntryState, StepOptions, Verb
from engine.modes.code.records import step_data, wait_data
from engine.modes.code.step_ids import RESERVED_STEP_NAMES, step_name_problem
from examples import order_saga

T0 = datetime(2031, 6, 7, 8, 0, tzinfo=UTC)
SAGA = order_saga.app.workflow_for("order-saga", "1").definition
REGISTRY = Registry([SAGA])
RUN = "order-saga/o-1"
K = EventKind


def started() -> Draft:
    """A draft holding only the run's start (no decision: events are added by hand)."""
    draft = lifecycle.start_draft(REGISTRY, SAGA, RUN, T0, {"sku": "mug"})
    return Draft(REGISTRY, draft.state, T0)


def step(draft: Draft, name: str, retries: int = 1, occurrence: int = 1) -> str:
    key = f"{name}.{occurrence}"
    command = Command(0, Verb.STEP, key, name, occurrence, options=StepOptions(retries=retries))
    draft.add(K.ACTIVITY_SCHEDULED, step=key, data=canonical_json(step_data(command)))
    return key


def attempt(draft: Draft, key: str, number: int, try_: int, outcome: EventKind, data=None) -> None:
    step_id = f"{RUN}/{key.split('.')[0]}#1.{try_}"
    draft.add(
        K.ATTEMPT_STARTED,
        step=key,
        attempt=number,
        idempotency_key=step_id,
        due_at=draft.now + timedelta(days=365),
    )
    fields = {"code": "step-failure", "retryable": True} if outcome is K.ATTEMPT_FAILED else {}
    draft.add(outcome, step=key, attempt=number, data=canonical_json(data), **fields)


def race(draft: Draft, *on: str, key: str = "race.1") -> None:
    command = Command(0, Verb.RACE, key, on=on, timeout=timedelta(hours=1))
    data = canonical_json(wait_data(command))
    draft.add(K.WAIT_STARTED, step=key, data=data, due_at=draft.now + timedelta(hours=1))


def signal(draft: Draft, name: str, signal_id: str, payload: object = None) -> None:
    draft.add(K.SIGNAL_RECEIVED, step=name, idempotency_key=signal_id, data=canonical_json(payload))


def test_a_step_that_succeeded_is_done_with_its_result() -> None:
    draft = started()
    key = step(draft, "reserve")
    assert entries(draft.state)[0].state is EntryState.OPEN
    attempt(draft, key, 1, 1, K.ATTEMPT_SUCCEEDED, {"ok": 1})
    (entry,) = entries(draft.state)
    assert (entry.verb, entry.key, entry.name, entry.state, entry.value) == (
        Verb.STEP, "reserve.1", "reserve", EntryState.DONE, {"ok": 1},
    )  # fmt: skip
    assert entry.sequence == 2


def test_a_step_fails_for_good_only_after_its_last_attempt() -> None:
    """Failures row: ``step 'name' failed after N attempts: ...`` once none is left."""
    draft = started()
    key = step(draft, "charge", retries=2)
    attempt(draft, key, 1, 1, K.ATTEMPT_FAILED, {"message": "declined"})
    assert entries(draft.state)[0].state is EntryState.OPEN, "a retry is still to come"
    decide.decide(draft)  # the retry by the step's options, with the next step_id
    retry = next(e for e in draft.events if e.kind is K.RETRY_SCHEDULED)
    assert (retry.kind, retry.idempotency_key) == (K.RETRY_SCHEDULED, f"{RUN}/charge#1.2")
    draft.now = retry.due_at
    attempt(draft, key, 2, 2, K.ATTEMPT_FAILED, {"message": "declined"})
    (entry,) = entries(draft.state)
    assert entry.state is EntryState.FAILED
    assert entry.failure == failed_text("charge", 2, "declined")


def test_a_race_takes_the_earliest_signal_and_sets_the_others_aside() -> None:
    """Gotchas row: an unconsumed extra is set aside; race losers stay consumable."""
    draft = started()
    signal(draft, "cancelled", "c-1", "no")
    signal(draft, "paid", "p-1", {"by": "ada"})
    race(draft, "paid", "cancelled")
    waits.resolve(draft)
    entry = entries(draft.state)[0]
    assert (entry.state, entry.value) == (EntryState.DONE, ["no", "cancelled"])
    assert [(s.signal_id, s.consumed_by) for s in draft.state.inbox] == [
        ("c-1", "race.1"),
        ("p-1", ""),
    ]


def test_a_signal_id_is_received_once() -> None:
    draft = started()
    signal(draft, "paid", "p-1")
    with pytest.raises(ReplayRejected, match="already received"):
        signal(draft, "paid", "p-1")


def test_a_race_times_out_as_a_whole_when_due() -> None:
    draft = started()
    race(draft, "paid", "cancelled")
    waits.resolve(draft)
    assert entries(draft.state)[0].state is EntryState.OPEN
    draft.now += timedelta(hours=1)
    waits.resolve(draft)
    entry = entries(draft.state)[0]
    assert (entry.state, entry.value) == (EntryState.DONE, None)


def test_a_journaled_value_is_done_with_what_was_recorded() -> None:
    draft = started()
    draft.add(K.VALUE_RECORDED, step="random.1", data=canonical_json(0.25))
    assert entries(draft.state)[0].value == 0.25
    with pytest.raises(ReplayRejected, match="not a journaled value"):
        draft.add(K.VALUE_RECORDED, step="charge.1", data=canonical_json(1))


def test_a_command_key_is_recorded_once() -> None:
    draft = started()
    step(draft, "reserve")
    with pytest.raises(ReplayRejected, match="already recorded"):
        step(draft, "reserve")


def test_only_a_code_run_serialises_a_journal() -> None:
    """Digests of other modes are unchanged: the journal, inbox and waits are written
    only when there are any."""
    fresh = instance_to_json(started().state)
    assert not {"journal", "inbox", "waits", "dynamic_steps"} & set(fresh)
    draft = started()
    step(draft, "reserve")
    signal(draft, "paid", "p-1")
    assert {"journal", "inbox", "dynamic_steps"} <= set(instance_to_json(draft.state))


@given(st.lists(st.sampled_from(["paid", "cancelled", "other"]), max_size=8))
def test_a_race_is_won_by_the_first_arrival_and_nothing_else_is_consumed(
    arrivals: list[str],
) -> None:
    """Whatever arrives in whatever order, a race takes the earliest of what it awaits,
    and every other signal stays in the inbox unconsumed (duplicates change nothing)."""
    draft = started()
    for number, name in enumerate(arrivals):
        signal(draft, name, f"s-{number}", number)
    race(draft, "paid", "cancelled")
    waits.resolve(draft)
    awaited = [(n, name) for n, name in enumerate(arrivals) if name != "other"]
    entry = entries(draft.state)[0]
    if not awaited:
        assert entry.state is EntryState.OPEN
        assert not any(s.consumed_by for s in draft.state.inbox)
        return
    number, name = awaited[0]
    assert entry.value == [number, name]
    taken = [s.signal_id for s in draft.state.inbox if s.consumed_by]
    assert taken == [f"s-{number}"]


def test_the_code_runs_again_once_per_resolution_and_deciding_twice_adds_nothing() -> None:
    """The DECISION work is scheduled when the command the code is blocked on
    resolves (and at the start), never again for the same resolution."""
    start = lifecycle.start_draft(REGISTRY, SAGA, RUN, T0, {"sku": "mug"})
    decide.decide(start)
    assert [w.kind.label for w in start.work] == ["decision"]
    draft = Draft(REGISTRY, start.state, T0)
    key = step(draft, "reserve")
    decide.decide(draft)
    assert draft.work == [], "blocked on the step: nothing to replay yet"
    attempt(draft, key, 1, 1, K.ATTEMPT_SUCCEEDED, {"ok": 1})
    decide.decide(draft)
    decide.decide(draft)
    assert [w.work_id for w in draft.work] == [f"{RUN}#4#decision#now"]


@pytest.mark.parametrize("name", sorted(RESERVED_STEP_NAMES))
def test_a_step_may_not_be_named_like_another_verb(name: str) -> None:
    """A step ``spawn`` would be keyed ``spawn.1``, the key of the run's first spawn."""
    assert "other verbs' journal keys" in (step_name_problem(name) or "")
    assert step_name_problem([name]) is not None


def expected_all(arrivals: dict[str, int | None], on: list[str], timeout: int) -> list:
    """The seed's rule for ``all``: entries in turn, each with the whole timeout from
    when the one before it resolved; an entry that arrived early resolves at once."""
    values, now = [], 0
    for name in on:
        at = arrivals[name]
        if at is not None and at <= now + timeout:
            values.append(name)
            now = max(now, at)
        else:
            values.append(None)
            now += timeout
    return values


@given(st.fixed_dictionaries({n: st.none() | st.integers(0, 40) for n in ("a", "b", "c")}))
def test_all_times_out_each_entry_in_turn(arrivals: dict[str, int | None]) -> None:
    """Verbs row (all): payloads in argument order, None per timed-out entry; the
    timeout applies to each entry in turn, not to the whole."""
    draft = started()
    on, timeout = ["a", "b", "c"], 10
    command = Command(0, Verb.ALL, "all.1", on=tuple(on), timeout=timedelta(seconds=timeout))
    due = draft.now + timedelta(seconds=timeout)
    draft.add(K.WAIT_STARTED, step="all.1", data=canonical_json(wait_data(command)), due_at=due)
    pending = sorted((at, name) for name, at in arrivals.items() if at is not None)
    while not draft.state.waits["all.1"].done:
        wait = draft.state.waits["all.1"]
        times = [T0 + timedelta(seconds=at) for at, _ in pending] + [wait.due_at]
        draft.now = max(draft.now, min(times))
        while pending and T0 + timedelta(seconds=pending[0][0]) <= draft.now:
            _, name = pending.pop(0)
            signal(draft, name, f"id-{name}", name)
        waits.resolve(draft)
    assert entries(draft.state)[0].value == expected_all(arrivals, on, timeout)
