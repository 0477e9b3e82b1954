"""End to end: instances driven through the client, run by real worker processes.

Each test asserts what a user of Wayline would notice: the instance's final status,
the order things happened in its history, and (through the effects file the handlers
append to) how many times each side effect really happened, per idempotency key.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from datetime import timedelta
from typing import TYPE_CHECKING

import pytest

from engine import load_definition
from engine.api.client import Client, SignalConflict
from engine.decide.child_starts import CHILD_DEFINITION_NOT_FOUND
from engine.decide.decisions import ACTIVITY_OUTCOME_UNKNOWN
from engine.decide.operator_actions import Action
from engine.model.canonical import canonical_json
from engine.model.definitions import Definition
from engine.model.errors import DecisionRejected
from engine.model.events import EventKind
from engine.model.instance import AttemptStatus, ChildStatus, InstanceStatus
from engine.model.limits import MAX_WORKER_POLL_INTERVAL
from engine.store import catalog, leases
from engine.store.clock import ManualClock
from engine.store.errors import StoreUnavailable
from engine.store.store import Store
from engine.worker import loop
from engine.worker.activities import CRASH_CODE, PREFIX_KEY, TRUNCATED_KEY
from engine.worker.loop import Worker, WorkerConfig
from examples.demo import DEFINITION as ORDER_DEFINITION
from tests.e2e import definitions as d
from tests.e2e.app import (
    ACTIVITY_TARGET,
    SCRIPTED_TERMINAL,
    SCRIPTED_UNKNOWN,
    Behaviour,
    app,
    script,
)

if TYPE_CHECKING:
    from tests.e2e.conftest import Harness

K = EventKind
S = InstanceStatus
A = AttemptStatus


CRASH_LEASE_SECONDS = 600.0
MAX_POLL = MAX_WORKER_POLL_INTERVAL

WORK_IN_STATE = """
SELECT 1 FROM work WHERE instance_id = %(instance)s AND state = %(state)s
  AND (%(code)s::text IS NULL OR failure_code = %(code)s)
"""


def steps_of(events: list, kind: EventKind) -> list[str]:
    """The step of each event of ``kind``, in history order."""
    return [e.step for e in events if e.kind is kind]


def assert_once_per_key(records: list[dict]) -> None:
    """No idempotency key was acted on twice."""
    twice = [key for key, n in Counter(r["key"] for r in records).items() if n > 1]
    assert not twice, f"effects repeated for {twice}"


async def test_example_order_saga_completes_with_every_effect_once(e2e: Harness) -> None:
    definition = load_definition(ORDER_DEFINITION)
    await e2e.publish(definition)
    await e2e.spawn(app="examples.orders:app")
    order = "order-e2e"
    await e2e.client.start(definition.name, order, {"order": order, "amount": 42})
    for check in ("fraud_check", "inventory_check"):  # the approval comes after them
        await e2e.activity_reaches(order, check, A.SUCCEEDED)
    await e2e.client.command(
        order, Action.APPROVE, "manager", "within limits", step="manager_approval", payload={}
    )
    await e2e.client.signal(order, "shipped", f"{order}-shipped", {"carrier": "e2e-post"})
    state = await e2e.settled(order, S.COMPLETED)

    effects = e2e.records()
    assert_once_per_key(effects)
    assert sorted(r["target"] for r in effects) == sorted(
        state.spec.step(p.step).target for p in state.activities.values()
    )
    assert {r["key"] for r in effects} == {p.idempotency_key for p in state.activities.values()}
    assert state.race_winners == {"delivery": "shipped"}


async def test_retryable_failure_backs_off_then_succeeds(e2e: Harness) -> None:
    await e2e.spawn()
    await e2e.start(d.RETRYING, "retry", script({"flaky": Behaviour(fail=3)}))
    state = await e2e.settled("retry", S.COMPLETED)

    starts = await e2e.kinds("retry", K.ATTEMPT_STARTED)
    assert [e.attempt for e in starts] == [1, 2, 3, 4]
    policy = d.RETRYING.step("flaky").retry
    for n in (1, 2, 3):  # delay n = min(initial * 2^(n-1), max): 100, 200, 250 ms
        assert starts[n].occurred_at - starts[n - 1].occurred_at >= policy.backoff(n)
    calls = e2e.calls("retry")
    assert [c["outcome"] for c in calls] == ["failed", "failed", "failed", "effect"]
    assert len({c["key"] for c in calls}) == 4, "a policy retry is a new attempt, new key"
    assert state.activities["flaky"].idempotency_key == calls[-1]["key"]


async def test_terminal_failure_compensates_in_reverse_and_fails(e2e: Harness) -> None:
    await e2e.spawn()
    await e2e.start(d.SAGA, "saga", script({"ship": Behaviour(terminal=True)}))
    state = await e2e.settled("saga", S.FAILED)

    assert (state.failure_step, state.failure_code) == ("ship", SCRIPTED_TERMINAL)
    history = await e2e.history("saga")
    assert steps_of(history, K.ATTEMPT_SUCCEEDED) == ["reserve", "charge"]
    assert steps_of(history, K.COMPENSATION_SUCCEEDED) == ["charge", "reserve"]
    kinds = [e.kind for e in history]
    assert kinds.index(K.INSTANCE_FAILING) < kinds.index(K.COMPENSATION_SCHEDULED)
    assert kinds[-1] is K.FAILED
    undone = [c["step"] for c in e2e.calls("saga", compensation=True)]
    assert undone == ["charge", "reserve"], "ship failed, so there is nothing of it to undo"


async def test_a_failure_detail_larger_than_its_step_allows_is_recorded_cut_to_fit(
    e2e: Harness,
) -> None:
    """The step's result_limit bounds a failure's detail too. A handler's detail over it
    is recorded as the start of its JSON with its full size, and the known failure is
    written at once (not left to become unknown when the lease runs out)."""
    limit = 256
    small = d.definition("e2e.small", {**d.activity("only"), "result_limit": limit})
    await e2e.spawn()
    await e2e.start(small, "verbose", script({"only": Behaviour(terminal=True, detail=5000)}))
    state = await e2e.settled("verbose", S.FAILED)

    assert (state.failure_step, state.failure_code) == ("only", SCRIPTED_TERMINAL)
    (failed,) = await e2e.kinds("verbose", K.ATTEMPT_FAILED)
    full = canonical_json({"log": "x" * 5000})
    assert len(failed.data.encode()) <= limit
    assert failed.value()[TRUNCATED_KEY] == len(full.encode())
    assert full.startswith(failed.value()[PREFIX_KEY])
    assert not await e2e.kinds("verbose", K.ATTEMPT_UNKNOWN)


async def test_timer_fires_exactly_once_with_two_workers(e2e: Harness) -> None:
    await e2e.spawn(2)
    ids = [f"timer-{i}" for i in range(10)]
    for instance in ids:
        await e2e.start(d.TIMED, instance)
    for instance in ids:
        await e2e.settled(instance, S.COMPLETED)
        scheduled, fired = await e2e.kinds(instance, K.TIMER_SCHEDULED, K.TIMER_FIRED)
        assert fired.kind is K.TIMER_FIRED and fired.occurred_at >= scheduled.due_at
        assert len(e2e.calls(instance)) == 1


async def test_duplicate_signals_are_received_once(e2e: Harness) -> None:
    await e2e.start(d.SIGNALLED, "sig")
    callers = [Client(e2e.store) for _ in range(3)]
    results = await asyncio.gather(*(c.signal("sig", "go", "signal-1", {"n": 1}) for c in callers))
    assert all(r.signals["go"].signal_id == "signal-1" for r in results)
    assert len(await e2e.kinds("sig", K.SIGNAL_RECEIVED)) == 1

    with pytest.raises(SignalConflict, match="another payload"):
        await e2e.client.signal("sig", "go", "signal-1", {"n": 2})
    with pytest.raises(SignalConflict, match="already received"):
        await e2e.client.signal("sig", "go", "signal-2", {"n": 1})

    await e2e.spawn()
    await e2e.settled("sig", S.COMPLETED)
    assert len(await e2e.kinds("sig", K.SIGNAL_RECEIVED)) == 1
    assert len(e2e.calls("sig")) == 1


async def test_race_is_won_by_the_earliest_persisted_signal(e2e: Harness) -> None:
    """The step after the race is held until both signals are in: a fast worker would
    otherwise complete the instance before the losing signal arrives (and refuse it)."""
    await e2e.spawn()
    await e2e.start(d.RACING, "race-seq", script({"after": Behaviour(block=e2e.gate("seq"))}))
    await e2e.client.signal("race-seq", "b", "b-1")  # b is second in definition order
    await e2e.client.signal("race-seq", "a", "a-1")
    e2e.release("seq")
    state = await e2e.settled("race-seq", S.COMPLETED)
    assert state.race_winners == {"first": "b"}

    await e2e.start(d.RACING, "race-both", script({"after": Behaviour(block=e2e.gate("both"))}))
    await asyncio.gather(
        Client(e2e.store).signal("race-both", "a", "a-1"),
        Client(e2e.store).signal("race-both", "b", "b-1"),
    )
    e2e.release("both")
    state = await e2e.settled("race-both", S.COMPLETED)
    received = await e2e.kinds("race-both", K.SIGNAL_RECEIVED)
    assert state.race_winners == {"first": received[0].step}
    for instance in ("race-seq", "race-both"):
        assert not await e2e.kinds(instance, K.TIMER_FIRED), "the losing timer never fires"
        assert len(e2e.calls(instance, step="after")) == 1


async def test_parallel_branches_join_before_the_next_step(e2e: Harness) -> None:
    await e2e.spawn()
    await e2e.start(d.PARALLEL, "par")
    await e2e.settled("par", S.COMPLETED)

    history = await e2e.history("par")
    assert sorted(steps_of(history, K.ACTIVITY_SCHEDULED)[:2]) == ["left", "right"]
    succeeded = steps_of(history, K.ATTEMPT_SUCCEEDED)
    assert sorted(succeeded[:2]) == ["left", "right"] and succeeded[2] == "after"
    assert sorted(c["step"] for c in e2e.calls("par")) == ["after", "left", "right"]


async def test_child_instance_completes_and_its_parent_continues(e2e: Harness) -> None:
    await e2e.publish(d.CHILD)
    await e2e.spawn()
    await e2e.start(d.PARENT, "parent", {"sku": "X-1"})
    parent = await e2e.settled("parent", S.COMPLETED)

    progress = parent.children["kid"]
    assert progress.status is ChildStatus.SUCCEEDED
    child = await e2e.state(progress.child_id)
    assert child.status is S.COMPLETED
    assert child.value("input") == {"sku": "X-1"}, "a child starts with its parent's input"
    assert (child.parent_id, child.parent_step) == ("parent", "kid")
    assert child.definition == d.CHILD.ref
    (reported,) = await e2e.kinds("parent", K.CHILD_COMPLETED)
    assert reported.value() == child.value("result")
    order = [(c["instance"], c["step"]) for c in e2e.calls()]
    assert order == [("parent", "before"), (child.instance_id, "inner"), ("parent", "after")]


async def test_a_child_pinned_to_another_teams_version_does_not_start(e2e: Harness) -> None:
    """A parent written to the catalog before publishing checked its children (moved
    to the engine's team by hand) pins red's child: its start must not run red's
    graph and targets under the parent's team."""
    await catalog.publish(e2e.store, d.CHILD, "red", team="red")
    await catalog.publish(e2e.store, d.PARENT, "red", team="red")
    async with e2e.store.connection() as conn:
        await conn.execute("UPDATE definitions SET team_id = '' WHERE name = %s", [d.PARENT.name])
        await conn.commit()
    await e2e.spawn()
    await e2e.client.start(d.PARENT.name, "stranger", script({}))
    parent = await e2e.settled("stranger", S.FAILED)

    progress = parent.children["kid"]
    assert progress.status is ChildStatus.START_FAILED
    assert progress.code == CHILD_DEFINITION_NOT_FOUND
    child = {"child": progress.child_id}
    assert await e2e.query("SELECT 1 FROM instances WHERE instance_id = %(child)s", child) == []
    assert [c["step"] for c in e2e.calls()] == ["before"]


async def test_approval_by_an_audited_operator_command(e2e: Harness) -> None:
    await e2e.spawn()
    await e2e.start(d.APPROVED, "appr")
    with pytest.raises(DecisionRejected):  # a plain signal cannot stand in for approval
        await e2e.client.signal("appr", "sign", "forged")
    await e2e.client.command(
        "appr", Action.APPROVE, "alice", "checked", step="sign", payload={"ok": True}
    )
    state = await e2e.settled("appr", S.COMPLETED)

    (audit,) = state.audit
    assert (audit.action, audit.actor, audit.reason) == ("approve", "alice", "checked")
    assert state.signals["sign"].signal_id == audit.command_id
    assert len(e2e.calls("appr")) == 1


async def test_cancel_mid_flight_compensates_in_reverse_and_cancels(e2e: Harness) -> None:
    await e2e.spawn()
    await e2e.start(d.SAGA, "cancel", script({"ship": Behaviour(block=e2e.gate("ship"))}))
    await e2e.until(lambda: e2e.calls("cancel", step="ship"), what="ship in flight")

    state = await e2e.client.command("cancel", Action.CANCEL, "ops", "customer changed mind")
    assert state.status is S.CANCELLING
    assert not await e2e.kinds("cancel", K.COMPENSATION_SCHEDULED), "ship is still in flight"
    e2e.release("ship")
    await e2e.settled("cancel", S.CANCELLED)

    history = await e2e.history("cancel")
    assert steps_of(history, K.ATTEMPT_SUCCEEDED) == ["reserve", "charge", "ship"]
    assert steps_of(history, K.COMPENSATION_SUCCEEDED) == ["ship", "charge", "reserve"]
    assert [c["step"] for c in e2e.calls("cancel", compensation=True)] == [
        "ship",
        "charge",
        "reserve",
    ]


async def test_pause_holds_scheduled_work_until_resume(e2e: Harness) -> None:
    await e2e.start(d.SINGLE, "pause")
    await e2e.client.command("pause", Action.PAUSE, "ops", "hold on")
    await e2e.spawn()

    parked = {"instance": "pause", "state": 1, "code": "paused"}
    await e2e.until(lambda: e2e.query(WORK_IN_STATE, parked), what="the worker parking it")
    assert not await e2e.kinds("pause", K.ATTEMPT_STARTED)
    assert not e2e.calls("pause")

    await e2e.client.command("pause", Action.RESUME, "ops", "go on")
    await e2e.settled("pause", S.COMPLETED)
    assert len(e2e.calls("pause")) == 1


async def test_pause_mid_handler_records_the_outcome_and_holds_the_next_step(
    e2e: Harness,
) -> None:
    """The worker's own view of the instance is stale when the handler returns (the
    pause committed meanwhile): its commit is rejected, it rereads and records the
    outcome on the paused instance without starting the next step."""
    await e2e.spawn()
    await e2e.start(d.THREE_STEPS, "pmid", script({"one": Behaviour(block=e2e.gate("one"))}))
    await e2e.until(lambda: e2e.calls("pmid", step="one"), what="one in flight")
    await e2e.client.command("pmid", Action.PAUSE, "ops", "hold on")
    e2e.release("one")

    state = await e2e.activity_reaches("pmid", "one", A.SUCCEEDED)
    assert state.status is S.PAUSED
    assert steps_of(await e2e.history("pmid"), K.ATTEMPT_STARTED) == ["one"]
    assert not e2e.calls("pmid", step="two")

    await e2e.client.command("pmid", Action.RESUME, "ops", "go on")
    await e2e.settled("pmid", S.COMPLETED)
    assert [c["step"] for c in e2e.calls("pmid")] == ["one", "two", "three"]


async def test_terminate_ends_the_instance_and_discards_late_results(e2e: Harness) -> None:
    await e2e.spawn()
    await e2e.start(d.SINGLE, "term", script({"only": Behaviour(block=e2e.gate("only"))}))
    await e2e.until(lambda: e2e.calls("term"), what="the handler running")

    state = await e2e.client.command("term", Action.TERMINATE, "ops", "stop it now")
    assert state.status is S.TERMINATED
    e2e.release("only")
    done = {"instance": "term", "state": 3, "code": None}
    await e2e.until(lambda: e2e.query(WORK_IN_STATE, done), what="the late handler's lease ending")
    history = await e2e.history("term")
    assert history[-1].kind is K.TERMINATED, "nothing is recorded after the end"
    assert (await e2e.state("term")).status is S.TERMINATED


async def test_handler_timeout_and_unknown_outcome_are_held_as_unknown(e2e: Harness) -> None:
    await e2e.spawn()
    await e2e.start(d.TIMING_OUT, "slow", script({"slow": Behaviour(sleep=5.0)}))
    await e2e.start(d.TIMING_OUT, "unsure", script({"slow": Behaviour(unknown=True)}))
    for instance, code in (("slow", "activity-timeout"), ("unsure", SCRIPTED_UNKNOWN)):
        state = await e2e.activity_reaches(instance, "slow", A.UNKNOWN)
        assert state.activities["slow"].code == code
        assert state.status is S.RUNNING, "an unknown outcome waits for an operator"
        assert len(e2e.calls(instance)) == 1


async def test_a_failure_with_a_code_no_event_can_carry_is_unknown_at_once_and_said(
    e2e: Harness,
) -> None:
    """``ActivityFailure("")`` used to reach the worker's commit, which failed with a
    traceback (EventInvalid) and left the attempt running until its lease ran out. It is
    refused where the handler builds it, so the attempt is unknown at once (the handler
    ran) and the log says what was wrong, where, in one line."""
    (worker,) = await e2e.spawn(lease=CRASH_LEASE_SECONDS)
    await e2e.start(d.TIMING_OUT, "no-code", script({"slow": Behaviour(no_code=True)}))
    state = await e2e.activity_reaches("no-code", "slow", A.UNKNOWN)
    assert state.activities["slow"].code == CRASH_CODE
    assert len(e2e.calls("no-code")) == 1
    await worker.stop()
    log = worker.output()
    assert "raised OutcomeRefused at app.py line" in log
    assert "(ActivityFailure's code must be 1 to 200 (MAX_CODE_LENGTH) printable" in log
    assert "Traceback" not in log and "gives no code" not in log


# Crashes, lost leases and shutdown -------------------------------------------------------


async def crash_mid_handler(e2e: Harness, definition: Definition, instance: str) -> str:
    """Kill a worker whose handler recorded its effect and is blocked, start another.

    The release file exists before the second worker starts, so a handler called again
    would not block: it would finish and show up as a second call in the effects file.
    The lease outlasts every wait of the tests: the fresh worker must find the dead
    one's work through its closed session, not by waiting for the lease to run out.
    Returns the idempotency key of the interrupted attempt.
    """
    (first,) = await e2e.spawn(lease=CRASH_LEASE_SECONDS)
    await e2e.start(definition, instance, script({"risky": Behaviour(block=e2e.gate("risky"))}))
    (call,) = await e2e.until(lambda: e2e.calls(instance), what="the handler running")
    await first.kill()
    e2e.release("risky")
    await e2e.spawn(lease=CRASH_LEASE_SECONDS)
    return call["key"]


async def test_crash_mid_handler_with_hold_records_unknown_and_never_reruns(
    e2e: Harness,
) -> None:
    key = await crash_mid_handler(e2e, d.HOLD_ON_UNKNOWN, "crash-hold")
    state = await e2e.activity_reaches("crash-hold", "risky", A.UNKNOWN)
    progress = state.activities["risky"]
    assert (progress.code, progress.attempt, progress.idempotency_key) == (
        ACTIVITY_OUTCOME_UNKNOWN,
        1,
        key,
    )
    assert state.status is S.RUNNING
    await asyncio.gather(*(w.stop() for w in e2e.workers[1:]))
    lines = [r for r in e2e.records() if r["key"] == key]
    assert len(lines) == 1, "the handler must not be called again"
    assert len(await e2e.kinds("crash-hold", K.ATTEMPT_STARTED)) == 1


async def test_crash_mid_handler_with_retry_same_key_reuses_the_key(e2e: Harness) -> None:
    key = await crash_mid_handler(e2e, d.SAME_KEY_ON_UNKNOWN, "crash-same")
    state = await e2e.settled("crash-same", S.COMPLETED)

    (unknown,) = await e2e.kinds("crash-same", K.ATTEMPT_UNKNOWN)
    assert unknown.code == ACTIVITY_OUTCOME_UNKNOWN
    starts = await e2e.kinds("crash-same", K.ATTEMPT_STARTED)
    assert [(e.attempt, e.idempotency_key) for e in starts] == [(1, key), (2, key)]
    assert [(c["attempt"], c["key"]) for c in e2e.calls("crash-same")] == [(1, key), (2, key)]
    assert state.activities["risky"].idempotency_key == key


def one_slot_worker(
    e2e: Harness, worker_id: str, lease: timedelta, renew_every: timedelta
) -> Worker:
    """A worker run in process (to see its internals) with one slot and a short poll."""
    config = WorkerConfig(
        worker_id=worker_id,
        concurrency=1,
        lease=lease,
        renew_every=renew_every,
        poll_interval=timedelta(milliseconds=100),
    )
    return Worker(e2e.store, app, config)


async def steal_mid_handler(e2e: Harness, victim: Worker, instance_id: str) -> leases.Lease:
    """Start ``instance_id``, whose handler blocks on gate "only", and once the victim
    runs it, have another owner claim its work as expired (its store clock runs past any
    lease the victim can hold, so the claim takes the lease over in one statement)."""
    await e2e.start(d.SINGLE, instance_id, script({"only": Behaviour(block=e2e.gate("only"))}))
    await e2e.until(lambda: e2e.calls(instance_id), what="the handler running")
    ahead = ManualClock(e2e.store.now() + victim.config.lease * 3)
    thief = await Store.open(e2e.dsn, e2e.schema, clock=ahead)
    try:
        (stolen,) = await leases.claim(
            thief, "thief", timedelta(minutes=5), 1, targets=[ACTIVITY_TARGET]
        )
    finally:
        await thief.close()
    return stolen


async def test_lost_lease_cancels_the_processor_which_records_nothing(e2e: Harness) -> None:
    """In process, to see the worker's internals. Another owner claims the work as
    expired: its store clock runs past any lease the victim can hold, so the claim
    takes the lease over in one statement (forcing the expiry in a separate statement
    first would leave the victim a window to reclaim its own work). The victim's next
    renewal then finds the lease gone and cancels its processor mid-handler."""
    victim = one_slot_worker(e2e, "victim", timedelta(seconds=3), timedelta(milliseconds=200))
    stop = asyncio.Event()
    running = asyncio.create_task(victim.run(stop))
    try:
        stolen = await steal_mid_handler(e2e, victim, "stolen")
        await e2e.until(lambda: victim.metrics.value("lease_lost"), what="the lease loss")
        e2e.release("only")
    finally:
        stop.set()
        await running

    assert [r["event"] for r in e2e.records()] == ["call", "cancelled"]
    history = await e2e.history("stolen")
    assert history[-1].kind is K.ATTEMPT_STARTED, "the stale owner wrote no outcome"
    (row,) = await e2e.query(
        "SELECT state, lease_owner, lease_token FROM work WHERE instance_id = 'stolen'"
    )
    assert row == (2, "thief", stolen.token), "the thief's lease is untouched"


async def test_an_outcome_its_lost_lease_kept_from_its_commit_is_not_counted(
    e2e: Harness,
) -> None:
    """The handler returns after its lease was taken over, before a renewal notices:
    the commit is fenced out and nothing is recorded, so the attempt is no success in
    ``wayline_outcomes_total`` (a dashboard counted it a success, and again unknown once
    the redelivery settled it)."""
    victim = one_slot_worker(e2e, "late", timedelta(seconds=30), timedelta(seconds=10))
    stop = asyncio.Event()
    running = asyncio.create_task(victim.run(stop))
    try:
        await steal_mid_handler(e2e, victim, "late")
        e2e.release("only")
        await e2e.until(lambda: victim.metrics.value("lease_lost"), what="the fenced commit")
    finally:
        stop.set()
        await running

    assert victim.metrics.value("outcomes", kind="succeeded", track="activity") == 0
    history = await e2e.history("late")
    assert history[-1].kind is K.ATTEMPT_STARTED, "the stale owner wrote no outcome"


async def test_a_failed_processors_lease_is_redelivered_even_if_a_cancellation_is_lost(
    e2e: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A processor that fails (the store went away under it) leaves its lease to expire
    so the work is redelivered. Its renewal task is cancelled then, but Python 3.11's
    ``asyncio.wait_for`` (the pool's wait for a connection) can lose a cancellation
    that arrives as the wait succeeds; the renewal must end with the processor anyway,
    or it keeps the lease alive and the instance stalls under a live worker."""
    renewing, failures = asyncio.Event(), []
    renew = leases.renew

    async def renew_losing_one_cancellation(store, lease, extend):
        if not renewing.is_set():
            renewing.set()
            with contextlib.suppress(asyncio.CancelledError):  # lost, as wait_for loses it
                await asyncio.Event().wait()
        return await renew(store, lease, extend)

    async def failing_processor(ctx, current):
        failures.append(current.lease.token)
        await renewing.wait()
        raise StoreUnavailable("the database is unavailable")

    monkeypatch.setattr(leases, "renew", renew_losing_one_cancellation)
    monkeypatch.setattr(loop, "process", failing_processor)
    worker = one_slot_worker(e2e, "failing", timedelta(seconds=1), timedelta(milliseconds=100))
    # Started before the worker runs, so that its claim leases it (an idle worker would
    # be offered it, and an offer that fails before it is taken leaves no lease behind)
    await e2e.start(d.SINGLE, "redelivered", script({}))
    stop = asyncio.Event()
    running = asyncio.create_task(worker.run(stop))
    try:
        await e2e.until(lambda: len(failures) >= 2, what="the work delivered again")
    finally:
        stop.set()
        await running

    assert failures[:2] == [1, 2], "the second delivery is a new lease on the same work"


async def test_work_committed_during_a_claim_is_claimed_without_waiting_for_the_poll(
    e2e: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In process. The instance is started while the worker's first claim is running
    (too early to see it); its NOTIFY reaches the worker before that claim returns
    empty. The worker must claim again at once, not sleep out its one-minute poll."""
    worker = Worker(e2e.store, app, WorkerConfig(worker_id="prompt", poll_interval=MAX_POLL))
    claim = leases.claim
    claims: list[list[leases.Lease]] = []
    started = asyncio.Event()

    async def claim_while_work_arrives(*args: object, **kwargs: object) -> list[leases.Lease]:
        leases = await claim(*args, **kwargs)
        if not claims:
            await e2e.start(d.SINGLE, "prompt", script({"only": Behaviour()}))
            started.set()
            await worker.wake.wait()  # the NOTIFY arrived while this claim was running
        claims.append(leases)
        return leases

    monkeypatch.setattr(leases, "claim", claim_while_work_arrives)
    stop = asyncio.Event()
    running = asyncio.create_task(worker.run(stop))
    try:
        await started.wait()
        await e2e.settled("prompt", S.COMPLETED)  # gives up after 20 s, long before a poll
    finally:
        stop.set()
        await running


async def test_a_full_worker_claims_waiting_work_as_soon_as_a_slot_frees(e2e: Harness) -> None:
    """In process, one slot and a one-minute poll: the second instance's NOTIFY comes
    while the slot is taken, so only the slot freeing up can start it in time."""
    worker = Worker(e2e.store, app, WorkerConfig(concurrency=1, poll_interval=MAX_POLL))
    stop = asyncio.Event()
    running = asyncio.create_task(worker.run(stop))
    try:
        await worker.owner_locked.wait()
        await e2e.start(d.SINGLE, "first", script({"only": Behaviour(block=e2e.gate("first"))}))
        await e2e.until(lambda: e2e.calls("first"), what="the only slot taken")
        await e2e.start(d.SINGLE, "second", script({"only": Behaviour()}))
        e2e.release("first")
        for instance in ("first", "second"):
            await e2e.settled(instance, S.COMPLETED)  # gives up after 20 s
    finally:
        stop.set()
        await running


async def test_sigterm_drains_the_in_flight_handler_before_exit(e2e: Harness) -> None:
    (worker,) = await e2e.spawn()
    await e2e.start(d.SINGLE, "drain", script({"only": Behaviour(block=e2e.gate("only"))}))
    await e2e.until(lambda: e2e.calls("drain"), what="the handler running")

    await worker.terminate()  # while the handler is blocked
    e2e.release("only")
    await worker.exited()
    state = await e2e.state("drain")
    assert state.status is S.COMPLETED, "the outcome was committed before the exit"
    assert state.activities["only"].status is A.SUCCEEDED
    assert [r["event"] for r in e2e.records()] == ["call"]


async def test_a_drain_that_runs_out_abandons_the_attempt_to_an_unknown_outcome(
    e2e: Harness,
) -> None:
    """``--drain-seconds``: the worker exits once its drain runs out, with the handler
    still blocked; the abandoned attempt may have had its effect, so the next worker
    records it unknown and (holding on unknown) never calls the handler again."""
    (worker,) = await e2e.spawn(lease=CRASH_LEASE_SECONDS, options=("--drain-seconds", "0.2"))
    gate = e2e.gate("risky")
    await e2e.start(d.HOLD_ON_UNKNOWN, "short-drain", script({"risky": Behaviour(block=gate)}))
    await e2e.until(lambda: e2e.calls("short-drain"), what="the handler running")

    await worker.stop()  # the handler never returns while it drains
    assert (
        "the drain ran out after 0.2 s: 1 work item still running abandoned; its attempts "
        "are recorded unknown once their leases are recovered"
    ) in worker.stderr.read_text(), "the operator is told what was left behind"
    e2e.release("risky")
    await e2e.spawn(lease=CRASH_LEASE_SECONDS)
    state = await e2e.activity_reaches("short-drain", "risky", A.UNKNOWN)
    assert state.activities["risky"].code == ACTIVITY_OUTCOME_UNKNOWN
    assert len(e2e.calls("short-drain")) == 1


async def test_a_stopping_worker_starts_no_next_step_and_leaves_it_to_a_claim(
    e2e: Harness,
) -> None:
    """SIGTERM during step one: one's outcome is committed, but two is not started by
    the stopping worker (eagerly, with that outcome), where its drain could run out and
    leave it unknown; it stays due, and the next worker runs it cleanly."""
    (worker,) = await e2e.spawn()
    behaviours = {"one": Behaviour(block=e2e.gate("one")), "two": Behaviour()}
    await e2e.start(d.THREE_STEPS, "handover", script(behaviours))
    await e2e.until(lambda: e2e.calls("handover"), what="step one running")

    await worker.terminate()  # while one's handler is blocked
    e2e.release("one")
    await worker.exited()
    state = await e2e.state("handover")
    assert state.activities["one"].status is A.SUCCEEDED
    assert state.activities["two"].status is A.READY, "no attempt of two started while stopping"
    assert [r["step"] for r in e2e.calls("handover")] == ["one"]

    await e2e.spawn()
    state = await e2e.settled("handover", S.COMPLETED)
    assert [state.activities[s].attempt for s in ("one", "two", "three")] == [1, 1, 1]
    assert not await e2e.kinds("handover", EventKind.ATTEMPT_UNKNOWN)


# Load -----------------------------------------------------------------------------------

INSTANCES = 500
MISSHAPEN_HISTORIES = """
SELECT i.instance_id FROM instances i
JOIN (SELECT instance_id, count(*) AS events, min(sequence) AS first, max(sequence) AS last,
             count(*) FILTER (WHERE kind = %(completed)s) AS completions,
             count(*) FILTER (WHERE kind = %(started)s) AS starts
      FROM history GROUP BY instance_id) h USING (instance_id)
WHERE h.first <> 1 OR h.last <> h.events OR i.sequence <> h.last
   OR h.completions <> 1 OR h.starts <> 3
"""
"""Instances whose history has a gap, disagrees with the instance row, did not complete
exactly once, or started an attempt more than once per step."""
COMPLETED_COUNT = "SELECT count(*) FROM instances WHERE status = %(status)s"


async def test_many_instances_across_worker_processes_complete_exactly_once(
    e2e: Harness,
) -> None:
    await e2e.publish(d.THREE_STEPS)
    workers = await e2e.spawn(4, concurrency=16, lease=10.0)
    ids = [f"load-{i:03d}" for i in range(INSTANCES)]
    gate = asyncio.Semaphore(8)

    async def start(instance: str) -> None:
        async with gate:
            await e2e.client.start(d.THREE_STEPS.name, instance)

    await asyncio.gather(*(start(i) for i in ids))

    async def all_completed() -> bool:
        rows = await e2e.query(COMPLETED_COUNT, {"status": int(S.COMPLETED)})
        return rows[0][0] == INSTANCES

    # Unloaded, this takes a few seconds; the deadline only bounds a stall on a busy machine.
    await e2e.until(all_completed, timeout=120.0, what=f"{INSTANCES} instances completing")
    await asyncio.gather(*(w.stop() for w in workers))

    params = {"completed": int(K.COMPLETED), "started": int(K.ATTEMPT_STARTED)}
    assert await e2e.query(MISSHAPEN_HISTORIES, params) == []
    calls = e2e.calls()
    assert len(calls) == 3 * INSTANCES
    assert_once_per_key(calls)
    per_step = Counter((c["instance"], c["step"]) for c in calls)
    assert set(per_step) == {(i, s) for i in ids for s in ("one", "two", "three")}
    assert len({c["pid"] for c in calls}) > 1, "the work was spread over processes"
