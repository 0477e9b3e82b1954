"""Code-first runs against a real PostgreSQL, one rule each: unknown outcomes (held for
an operator, or retried with the same step_id), known failures with new step_ids and
compensation in reverse, divergence parked as a dead letter and retried after a
matching deploy, cancellation propagating to spawned runs, journaled values and waits
that time out in turn."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from engine.api.client import Client
from engine.cli.runtime import STOPPED_AT_DEAD_LETTER
from engine.decide.operator_actions import Action
from engine.model.description import failure_message
from engine.model.errors import InputRefused
from engine.model.events import EventKind
from engine.model.instance import AttemptStatus, InstanceStatus
from engine.modes.code.failures import failed_text
from engine.modes.code.records import STEP_RESULT_LIMIT
from engine.store.clock import ManualClock
from engine.store.dead_letters import list_dead_letters, make_resolution
from engine.store.store import Store
from engine.worker.activities import RESULT_NOT_JSON, RESULT_TOO_LARGE, ActivityRegistry
from engine.worker.leased_commits import Context
from tests.integration import code_flows
from tests.integration.code_flows import CALLS, SCRIPT
from tests.integration.code_runs import journal, keys, kinds, settle
from tests.integration.factories import inspect_lines

T0 = datetime(2031, 6, 7, 8, 0, tzinfo=UTC)
K = EventKind
S = InstanceStatus
A = AttemptStatus


@pytest.fixture(autouse=True)
def script() -> None:
    code_flows.reset()


@pytest.fixture
def code_app() -> ActivityRegistry:
    return code_flows.app


async def start(client: Client, ctx: Context, name: str, input: object = None) -> str:
    run, created = await client.start_run(name, input, id="r1")
    assert created
    await settle(ctx)
    return run


async def test_an_unknown_outcome_is_held_then_resolved_by_an_operator(
    client: Client, ctx: Context, store: Store
) -> None:
    """Seed failures row + Wayline's rule: a body that raises anything but StepFailure
    may have had its effect: unknown, held for an operator (never retried by itself)."""
    SCRIPT["raise"] = 1
    run = await start(client, ctx, "unknowns", {})
    state = await client.inspect(run)
    assert state.status is S.RUNNING
    assert state.activities["flaky.1"].status is A.UNKNOWN
    assert CALLS == [("flaky", "unknowns/r1/flaky#1.1")]
    await client.command(
        run, Action.RESOLVE_ACTIVITY, "ops", "gateway says it went through",
        step="flaky.1", resolution="succeeded", result="from the gateway",
    )  # fmt: skip
    await settle(ctx)
    state = await client.inspect(run)
    assert state.status is S.COMPLETED
    assert state.value("result") == {"flaky": "from the gateway"}
    assert len(CALLS) == 1, "the body never ran again"
    assert [a.action for a in state.audit] == ["resolve_activity"]


async def test_a_command_naming_a_step_without_its_call_says_how_steps_are_named(
    client: Client, ctx: Context
) -> None:
    SCRIPT["raise"] = 1
    run = await start(client, ctx, "unknowns", {})
    with pytest.raises(InputRefused) as refused:
        await client.command(
            run, Action.RESOLVE_ACTIVITY, "ops", "it went through",
            step="flaky", resolution="succeeded",
        )  # fmt: skip
    assert str(refused.value) == (
        "'flaky' is not a step of unknowns/r1: a code run's steps are named by call,"
        " NAME.N for its Nth call of ctx.step(NAME) (steps called: flaky.1)"
    )


async def test_an_attempt_past_its_timeout_is_unknown_with_the_seeds_text(
    client: Client, ctx: Context
) -> None:
    """Failures row: ``step 'name' timed out after Nms``; the body may have had its
    effect before it was stopped, so the outcome is unknown (held by default)."""
    run = await start(client, ctx, "slow")
    progress = (await client.inspect(run)).activities["slow.1"]
    assert (progress.status, progress.code) == (A.UNKNOWN, "step-timed-out")
    assert json.loads(progress.result) == {"message": "step 'slow' timed out after 50ms"}


async def test_retry_same_key_runs_again_under_the_same_step_id(
    client: Client, ctx: Context, clock: ManualClock
) -> None:
    """step_id row: a crash between effect and result keeps the id, so the repeat is
    recognised (on_unknown='retry_same_key')."""
    SCRIPT["raise"] = 1
    run = await start(client, ctx, "unknowns", {"on_unknown": "retry_same_key"})
    retry = (await kinds(ctx.store, run, K.RETRY_SCHEDULED))[0]
    assert retry.idempotency_key == "unknowns/r1/flaky#1.1"
    clock.advance(timedelta(seconds=2))  # the step's backoff before attempt 2
    await settle(ctx)
    state = await client.inspect(run)
    assert state.status is S.COMPLETED
    assert CALLS == [("flaky", "unknowns/r1/flaky#1.1")] * 2


async def test_a_result_too_large_to_record_is_unknown_and_says_why(
    client: Client, ctx: Context
) -> None:
    """The body ran (its effect may have happened) but its result cannot be recorded: an
    unknown outcome saying so at once, not a worker error and a lease left to expire."""
    run = await start(client, ctx, "oversized")
    state = await client.inspect(run)
    big = state.activities["big.1"]
    assert big.status is A.UNKNOWN
    assert big.code == RESULT_TOO_LARGE
    assert json.loads(big.result or "null") == {
        "message": f"the step returned {STEP_RESULT_LIMIT + 1} bytes of JSON; "
        f"at most {STEP_RESULT_LIMIT} can be recorded"
    }
    assert CALLS == [("big", "oversized/r1/big#1.1")]


async def test_a_result_whose_text_is_not_utf8_is_unknown_at_once(
    client: Client, ctx: Context
) -> None:
    """Its encoding error ended the worker's task (a traceback quoting the result) and
    left the step to its lease's expiry; it is a result that is not JSON."""
    run = await start(client, ctx, "unpaired")
    odd = (await client.inspect(run)).activities["odd.1"]
    assert (odd.status, odd.code) == (A.UNKNOWN, RESULT_NOT_JSON)
    assert json.loads(odd.result or "null") == {
        "message": "the step's result contains a lone surrogate (\\ud800), not Unicode text"
    }
    assert CALLS == [("odd", "unpaired/r1/odd#1.1")]


async def test_known_failures_take_new_step_ids_and_unwind_in_reverse(
    client: Client, ctx: Context, store: Store
) -> None:
    """step_id row: a retry after a recorded failure changes the id; failures row: the
    last attempt's failure is raised into the code with the seed's text; compensations
    unwind in reverse completion order, then the run fails."""
    SCRIPT["fail"] = 2
    run = await start(client, ctx, "compensating")
    state = await client.inspect(run)
    assert state.status is S.FAILED, state.status
    assert state.failure_code == "step-failed"
    assert CALLS == [
        ("book", "compensating/r1/book#1.1"),
        ("hold", "compensating/r1/hold#1.1"),
        ("pay", "compensating/r1/pay#1.1"),
        ("pay", "compensating/r1/pay#1.2"),
        ("unhold", "compensating/r1/hold#1.1"),
        ("unbook", "compensating/r1/book#1.1"),
    ]
    pay = (await journal(client, run))[2]
    assert pay.failure == failed_text("pay", 2, "declined")
    failing = await kinds(store, run, K.INSTANCE_FAILING)
    assert failing[0].value() == {"message": failed_text("pay", 2, "declined")}
    assert failure_message(state) == failed_text("pay", 2, "declined"), "kept past unwinding"


async def test_a_divergence_parks_the_decision_until_matching_code_is_deployed(
    client: Client, ctx: Context, store: Store, clock: ManualClock
) -> None:
    """Determinism row: replay compares the journal with the code and fails on a
    mismatch rather than guessing; the run stays running, visibly parked."""
    run = await start(client, ctx, "diverging")
    assert keys(await client.inspect(run)) == ["first.1", "second.1", "await.go.1"]
    SCRIPT["second"] = "renamed"  # a deploy that renamed the step, same pin
    await client.signal(run, "go", "go-1")
    await settle(ctx)
    (letter,) = (await list_dead_letters(store)).items
    assert letter.failure_code == "journal-divergence"
    assert ctx.metrics.value("dead_letters") == 1  # every dead letter is counted
    assert letter.failure_detail.startswith(
        "journal divergence: expected step 'second' at position 1"
    )
    assert letter.failure_detail.endswith("code reached step 'renamed'")
    assert (await client.inspect(run)).status is S.RUNNING

    SCRIPT["second"] = "second"  # the matching code is deployed again
    retry = make_resolution(
        uuid.uuid4().hex, letter.instance_id, letter.work_id, letter.token, "retry", "ops",
        "redeployed",
        clock.now(), clock.now(), clock.now() + timedelta(hours=1),
    )  # fmt: skip
    await client.resolve_dead_letter(retry)
    await settle(ctx)
    state = await client.inspect(run)
    assert state.status is S.COMPLETED
    assert state.value("result") == "done"
    assert [what for what, _ in CALLS] == ["first", "second"], "no recorded body re-ran"


async def test_cancel_propagates_to_spawned_runs_and_compensates(
    client: Client, ctx: Context, store: Store
) -> None:
    """Seed: cancel propagates to every run this one spawned (audited, same reason)."""
    run = await start(client, ctx, "parent")
    spawned = f"{run}/spawn.1"
    assert (await client.inspect(spawned)).status is S.RUNNING
    await client.command(run, Action.CANCEL, "ops", "customer left")
    await settle(ctx)
    parent, child = await client.inspect(run), await client.inspect(spawned)
    assert (parent.status, child.status) == (S.CANCELLED, S.CANCELLED)
    assert [(a.action, a.actor, a.reason) for a in child.audit] == [
        ("cancel", "ops", "customer left")
    ]
    assert CALLS == [("book", "parent/r1/book#1.1"), ("unbook", "parent/r1/book#1.1")]


async def test_cancel_propagates_down_every_generation(client: Client, ctx: Context) -> None:
    run = await start(client, ctx, "top")
    middle, bottom = f"{run}/spawn.1", f"{run}/spawn.1/spawn.1"
    assert (await client.inspect(bottom)).status is S.RUNNING
    await client.command(run, Action.CANCEL, "ops", "all of it")
    await settle(ctx)
    for each in (run, middle, bottom):
        assert (await client.inspect(each)).status is S.CANCELLED, each
    assert ("unbook", "top/r1/spawn.1/book#1.1") in CALLS


async def test_a_spawned_run_cancelled_first_wins_the_race_and_raises(
    client: Client, ctx: Context
) -> None:
    """A spawned run that ends wins the race; one that did not complete (cancelled
    here) raises StepFailed into the code rather than giving ``None``, which a timeout
    gives: uncaught, the run fails and unwinds what it booked."""
    run = await start(client, ctx, "parent")
    spawned = f"{run}/spawn.1"
    await client.command(spawned, Action.CANCEL, "ops", "not needed")
    await settle(ctx)
    state = await client.inspect(run)
    assert (state.status, state.failure_code) == (S.FAILED, "step-failed")
    assert "spawned run 'spawn.1' (child) did not complete: child-cancelled" in state.result
    assert CALLS == [("book", "parent/r1/book#1.1"), ("unbook", "parent/r1/book#1.1")]


async def test_journaled_values_replay_and_all_times_out_entry_by_entry(
    client: Client, ctx: Context, clock: ManualClock
) -> None:
    """Determinism row: now/random/uuid4 are journaled and replayed identically; all's
    timeout applies to each entry in turn."""
    run = await start(client, ctx, "clocks")
    values = [e.value for e in (await journal(client, run))[:3]]
    clock.advance(timedelta(seconds=6))
    await client.signal(run, "b", "b-1", "bee")  # arrives early: b is waited for second
    await settle(ctx)
    clock.advance(timedelta(seconds=4))  # a times out 10 s after the all began
    await settle(ctx)
    state = await client.inspect(run)
    assert state.status is S.COMPLETED, state.status
    first, pick, ident, got = state.value("result")
    assert [first, pick, ident] == values
    assert got == [None, "bee"]


async def test_workflow_code_that_reads_the_clock_is_parked_not_run_on(
    client: Client, ctx: Context, store: Store
) -> None:
    """Determinism row: the clock outside a step is refused with the seed's message,
    and the run is parked like a divergence (nothing recorded, visible, retryable)."""
    run = await start(client, ctx, "clock-reader")
    (letter,) = (await list_dead_letters(store)).items
    assert letter.failure_code == "not-deterministic"
    assert "time.time() is not available in workflow code; use ctx.now()" in (letter.failure_detail)
    state = await client.inspect(run)
    assert (state.status, keys(state)) == (S.RUNNING, ["first.1"])


async def test_a_decision_larger_than_a_transition_goes_on_in_the_next(
    client: Client, ctx: Context
) -> None:
    """100 journaled values and an all over 60 signals already in the inbox: each
    decision records what fits in one transition and the next goes on."""
    run = await start(client, ctx, "many")
    assert [r.verb for r in (await client.inspect(run)).journal][-1] == "wait"
    for number in range(60):
        await client.signal(run, f"s{number}", f"id-{number}", number)
    await client.signal(run, "go", "go-1")
    await settle(ctx)
    state = await client.inspect(run)
    assert state.status is S.COMPLETED, state.status
    assert state.value("result") == [100, list(range(60))]


async def test_a_timeout_wake_up_claimed_early_waits_for_its_time(
    client: Client, ctx: Context, clock: ManualClock
) -> None:
    """Resuming re-arms a run's work at once, a timeout's wake-up too: claimed before
    its time, it is released until then rather than spent."""
    run = await start(client, ctx, "clocks")
    await client.command(run, Action.PAUSE, "ops", "hold on")
    await client.command(run, Action.RESUME, "ops", "go on")
    await settle(ctx)
    assert (await client.inspect(run)).status is S.RUNNING
    clock.advance(timedelta(seconds=10))  # a times out
    await settle(ctx)
    clock.advance(timedelta(seconds=10))  # then b, 10 s after a did
    await settle(ctx)
    state = await client.inspect(run)
    assert state.status is S.COMPLETED, state.status
    assert state.value("result")[3] == [None, None]


async def test_a_spawn_nobody_published_is_parked_and_inspect_says_so(
    client: Client, ctx: Context, pg_dsn: str, schema: str
) -> None:
    """The run cannot go on until ``ghost`` is published and the dead letter retried:
    ``wayline inspect`` says where it stopped, not that it is waiting."""
    run = await start(client, ctx, "ghostly")
    lines = await inspect_lines(pg_dsn, schema, run)
    (letter,) = (await list_dead_letters(ctx.store)).items
    assert lines[-2:] == [
        f"  dead letter decision (work {letter.work_id}, token {letter.token}): "
        "spawn-definition-not-found: spawn of 'ghost': no published version can start",
        f"  now: {STOPPED_AT_DEAD_LETTER}",
    ]
