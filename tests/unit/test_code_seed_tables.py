"""One test per row of seed 001's tables (verbs, step options, failures, step_id,
determinism, gotchas), at the level of the pure core: the driver, ``ctx`` and
``run_body``. Each test's name and docstring name the row it proves. Rows about
starting and addressing runs, and the unwinding of a failed run, belong to the engine
(integration tests); ``secret``, ``http``/``crypto``/``Jwt`` have no counterpart in
Python workflows."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from engine.modes.code.context import Context, Handle
from engine.modes.code.driver import drive, find_command, run_body
from engine.modes.code.failures import (
    NestedStep,
    StepFailed,
    StepTimedOut,
    failed_text,
)
from engine.modes.code.journal import (
    Diverged,
    Entry,
    EntryState,
    Raised,
    Returned,
    StepOptions,
    Verb,
    Waits,
)
from engine.modes.code.records import step_of
from engine.modes.code.step_ids import step_id, step_id_after
from tests.unit.code_journals import RUN_ID, entry_for, play

RUNS: list[str] = []


def only(advance: Any) -> Any:
    """The single new command of a decision."""
    assert isinstance(advance, Waits) and len(advance.new) == 1
    return advance.new[0]


def decide(workflow: Any, *entries: Entry) -> Any:
    return drive(workflow, None, list(entries), run_id=RUN_ID)


# Verbs table


async def one_step(ctx: Context, _: Any) -> Any:
    async def body() -> dict:
        RUNS.append("charge")
        return {"charged": 10}

    return await ctx.step("charge", body)


def test_verbs_row_step_returns_what_the_body_returned_recorded_on_first_run() -> None:
    """Verbs, ``step``: whatever the body returned, recorded on first run."""
    RUNS.clear()
    command = only(decide(one_step))
    result = asyncio.run(run_body(command, step_id=step_id(RUN_ID, "charge", 1)))
    assert result == {"charged": 10} and RUNS == ["charge"]
    assert decide(one_step, entry_for(command, value=result)) == Returned((), {"charged": 10})
    assert RUNS == ["charge"]


async def sleeper(ctx: Context, _: Any) -> Any:
    return await ctx.sleep("90s")


def test_verbs_row_sleep_returns_nothing_after_the_duration() -> None:
    """Verbs, ``sleep``: nothing, after the duration."""
    command = only(decide(sleeper))
    assert (command.verb, command.key, command.timeout) == (
        Verb.SLEEP,
        "sleep.1",
        timedelta(seconds=90),
    )
    assert decide(sleeper, entry_for(command, state=EntryState.OPEN)) == Waits(())
    assert decide(sleeper, entry_for(command)) == Returned((), None)


async def waiter(ctx: Context, _: Any) -> Any:
    return await ctx.wait_signal("paid", timeout="72h")


def test_verbs_row_await_returns_the_payload_or_none_on_timeout() -> None:
    """Verbs, ``await``: the signal payload, or nil (None) on timeout."""
    command = only(decide(waiter))
    assert (command.key, command.name, command.timeout) == (
        "await.paid.1",
        "paid",
        timedelta(hours=72),
    )
    assert decide(waiter, entry_for(command, value={"by": "ada"})) == Returned((), {"by": "ada"})
    assert decide(waiter, entry_for(command, value=None)) == Returned((), None)


async def racer(ctx: Context, _: Any) -> Any:
    payload, which = await ctx.race("paid", "cancelled", timeout="72h")
    later = await ctx.wait_signal("cancelled") if which == "paid" else None
    return payload, which, later


def test_verbs_row_race_returns_payload_and_name_losers_stay_consumable() -> None:
    """Verbs, ``race``: payload, name of the first to arrive; nil, nil on timeout.
    Losers keep running and their signals stay consumable."""
    race = only(decide(racer))
    assert (race.key, race.on, race.timeout) == (
        "race.1",
        ("paid", "cancelled"),
        timedelta(hours=72),
    )
    won = entry_for(race, value=[{"by": "ada"}, "paid"])
    wait = only(decide(racer, won))
    assert (wait.verb, wait.key) == (Verb.WAIT, "await.cancelled.1")
    late = entry_for(wait, value={"why": "late"})
    assert decide(racer, won, late) == Returned((), ({"by": "ada"}, "paid", {"why": "late"}))
    assert decide(racer, entry_for(race, value=None)) == Returned((), (None, None, None))


async def empty_race(ctx: Context, _: Any) -> Any:
    return await ctx.race()


def test_verbs_row_race_an_empty_set_is_refused() -> None:
    """Verbs, ``race``: an empty set is refused."""
    advance = decide(empty_race)
    assert isinstance(advance, Raised) and advance.code == "workflow-error"
    assert "an empty race is refused" in advance.message


async def gatherer(ctx: Context, _: Any) -> Any:
    return await ctx.all(["shipped", "received"], timeout="7d")


def test_verbs_row_all_returns_payloads_in_order_none_per_timed_out_entry() -> None:
    """Verbs, ``all``: payloads in argument order; nil per timed-out entry. The timeout
    applies to each entry in turn (the command carries the per-entry timeout)."""
    command = only(decide(gatherer))
    assert (command.key, command.on, command.timeout) == (
        "all.1",
        ("shipped", "received"),
        timedelta(days=7),
    )
    assert decide(gatherer, entry_for(command, value=[1, None])) == Returned((), [1, None])


async def spawner(ctx: Context, _: Any) -> Any:
    shipping = ctx.spawn("shipping", {"order": "o-42"})
    payload, which = await ctx.race(shipping, "cancelled")
    return payload, which == shipping, which


def test_verbs_row_spawn_returns_a_handle_all_and_race_accept() -> None:
    """Verbs, ``spawn``: a job handle whose completion ``all`` and ``race`` accept."""
    advance = decide(spawner)
    spawn, race = advance.new
    assert (spawn.verb, spawn.key, spawn.name, spawn.input) == (
        Verb.SPAWN,
        "spawn.1",
        "shipping",
        {"order": "o-42"},
    )
    assert race.on == ("spawn.1", "cancelled")
    entries = [entry_for(spawn, state=EntryState.OPEN), entry_for(race, value=["sent", "spawn.1"])]
    assert decide(spawner, *entries) == Returned((), ("sent", True, Handle("spawn.1", "shipping")))


async def spawn_by_handle(ctx: Context, _: Any) -> Any:
    handle = ctx.spawn("shipping", None)
    return ctx.spawn(handle, None)  # type: ignore[arg-type]


def test_verbs_row_spawn_takes_the_definitions_name_not_its_handle() -> None:
    """Verbs, ``spawn``: takes the definition's name, not its handle."""
    advance = decide(spawn_by_handle)
    assert isinstance(advance, Raised)
    assert "ctx.spawn: a definition name must be a string" in advance.message


# Step options table


async def with_options(ctx: Context, retries: Any) -> Any:
    return await ctx.step("charge", lambda: None, retries=retries)


@pytest.mark.parametrize(("given", "attempts"), [(1, 1), (3, 3), (0, 1)])
def test_step_options_row_retries_is_total_attempts_and_0_is_read_as_1(
    given: int, attempts: int
) -> None:
    """Step options, ``retries`` (default 1): total attempts, not attempts after the
    first; 0 is read as 1."""
    command = only(drive(with_options, given, [], run_id=RUN_ID))
    assert command.options.retries == attempts
    assert only(decide(one_step)).options.retries == 1


def test_step_options_row_backoff_is_2s_before_attempt_2_doubling_uncapped() -> None:
    """Step options, ``backoff`` (default 2s): wait before attempt 2, doubling after
    that, uncapped (only the engine's 30-day bound applies), as the retry policy the
    engine schedules a code step's retries by (``records.step_of``) has it."""
    options = only(decide(one_step)).options
    assert options.backoff == timedelta(seconds=2)
    policy = step_of("one.1", options, "t").retry
    assert policy is not None
    delays = [policy.backoff(attempt) for attempt in range(1, 5)]  # before attempts 2 to 5
    assert delays == [timedelta(seconds=2 * 2**n) for n in range(4)]
    slow = step_of("one.1", StepOptions(backoff=timedelta(days=1)), "t").retry
    assert slow is not None and slow.backoff(39) == timedelta(days=30)


async def slow_step(ctx: Context, _: Any) -> Any:
    async def body() -> None:
        await asyncio.Event().wait()

    return await ctx.step("charge", body, timeout=0.05)


def test_step_options_row_timeout_bounds_one_attempt() -> None:
    """Step options, ``timeout`` (default none): how long one attempt may run."""
    assert only(decide(one_step)).options.timeout is None
    command = only(decide(slow_step))
    assert command.options.timeout == timedelta(milliseconds=50)
    with pytest.raises(StepTimedOut):
        asyncio.run(run_body(command, step_id=step_id(RUN_ID, "charge", 1)))


# Failures table


def test_failures_row_an_attempt_past_its_timeout_says_timed_out_after_n_ms() -> None:
    """Failures: an attempt runs past ``timeout`` -> ``step 'name' timed out after Nms``."""
    command = only(decide(slow_step))
    with pytest.raises(StepTimedOut, match=r"^step 'charge' timed out after 50ms$"):
        asyncio.run(run_body(command, step_id=step_id(RUN_ID, "charge", 1)))


async def catches(ctx: Context, _: Any) -> Any:
    try:
        await ctx.step("charge", lambda: None, retries=3)
    except StepFailed as failed:
        return {"declined": str(failed), "step": failed.step}
    return None


def test_failures_row_the_last_attempt_throws_step_failed_after_n_attempts() -> None:
    """Failures: the last attempt throws -> ``step 'name' failed after N attempts: ...``;
    the run parks as failed when the code does not catch it."""
    text = failed_text("charge", 3, "declined")
    assert text == "step 'charge' failed after 3 attempts: declined"
    failed = entry_for(only(decide(one_step)), state=EntryState.FAILED, failure=text)
    assert decide(one_step, failed) == Raised((), "step-failed", text)
    caught = entry_for(only(decide(catches)), state=EntryState.FAILED, failure=text)
    assert decide(catches, caught) == Returned((), {"declined": text, "step": "charge"})


async def renamed(ctx: Context, _: Any) -> Any:
    return await ctx.step("capture", lambda: None)


def test_failures_row_replay_meets_different_code_journal_divergence() -> None:
    """Failures: replay meets code that differs from the journal ->
    ``journal divergence: expected step, code reached step 'name'`` (plus where)."""
    recorded = Entry(0, Verb.STEP, "charge.1", "charge", 12, EntryState.DONE)
    assert decide(renamed, recorded) == Diverged(
        "journal divergence: expected step 'charge' at position 0 (event 12), "
        "code reached step 'capture'"
    )


# step_id table


async def idempotent(ctx: Context, _: Any) -> Any:
    async def charge() -> str:
        return ctx.step_id

    return await ctx.step("charge", charge)


def test_step_id_row_reads_run_step_occurrence_try() -> None:
    """step_id: the value reads ``<run>/<step>#<occurrence>.<try>``, for example
    ``order-saga/o-42/charge#1.1``."""
    command = only(decide(idempotent))
    key = step_id(RUN_ID, command.name, command.occurrence)
    assert key == "order-saga/o-42/charge#1.1"
    assert asyncio.run(run_body(command, step_id=key)) == key


def test_step_id_row_a_crash_between_effect_and_record_keeps_it() -> None:
    """step_id, across a crash between the effect and its recorded result: stays the
    same, so the repeat is recognised (an unknown outcome does not count)."""
    assert step_id_after(RUN_ID, "charge", 1, [False]) == step_id(RUN_ID, "charge", 1)


def test_step_id_row_a_retry_after_a_recorded_failure_changes_it() -> None:
    """step_id, across a retry after a recorded failure: changes (a new effect)."""
    assert step_id_after(RUN_ID, "charge", 1, [True]) == "order-saga/o-42/charge#1.2"


async def looping(ctx: Context, _: Any) -> Any:
    for _ in range(3):
        await ctx.step("charge", lambda: None)


def test_step_id_row_the_same_step_reached_again_in_a_loop_changes_it() -> None:
    """step_id, the same step name reached again (a loop): changes, each pass its own."""
    played = play(looping)
    ids = [step_id(RUN_ID, command.name, command.occurrence) for command in played.commands]
    assert ids == [f"{RUN_ID}/charge#{n}.1" for n in (1, 2, 3)]


def test_step_id_row_a_replay_of_a_recorded_step_never_runs_the_body() -> None:
    """step_id, a replay of an already-recorded step: never runs the body at all."""
    RUNS.clear()
    played = play(one_step)
    for cut in range(len(played.entries) + 1):
        drive(one_step, None, played.entries[:cut], run_id=RUN_ID)
        find_command(one_step, None, played.entries, run_id=RUN_ID, key="charge.1")
    assert RUNS == []


async def reads_step_id(ctx: Context, _: Any) -> Any:
    return ctx.step_id


def test_step_id_row_outside_a_step_body_is_an_error() -> None:
    """step_id, outside a step body: an error naming what it is."""
    advance = decide(reads_step_id)
    assert advance == Raised(
        (),
        "workflow-error",
        "NotInStep: ctx.step_id names the effect a step is performing; "
        "it exists only inside a step body.",
    )


# Determinism table


async def journaled(ctx: Context, _: Any) -> Any:
    return ctx.now(), ctx.random(), ctx.uuid4()


def test_determinism_row_clock_random_and_uuid_are_journaled_and_replayed() -> None:
    """Determinism: ``os.time()``, ``os.clock()``, ``math.random()``, ``uuid.v4()``
    (``ctx.now()``, ``ctx.random()``, ``ctx.uuid4()``): journaled, replayed identically."""
    first = decide(journaled)
    assert isinstance(first, Returned)
    now, number, identifier = first.value
    assert now.tzinfo is UTC or now.utcoffset() == timedelta(0)
    assert isinstance(now, datetime) and 0 <= number < 1 and isinstance(identifier, uuid.UUID)
    assert [command.value for command in first.new] == [now.isoformat(), number, str(identifier)]
    entries = [entry_for(command) for command in first.new]
    assert decide(journaled, *entries) == Returned((), (now, number, identifier))


async def reads_the_clock(ctx: Context, _: Any) -> Any:
    return datetime.now(UTC)


async def seeds_random(ctx: Context, _: Any) -> Any:
    import random

    random.seed(7)


def test_determinism_row_os_date_and_randomseed_are_refused() -> None:
    """Determinism: ``os.date``, ``math.randomseed`` refused (``datetime.now()``,
    ``random.seed()``)."""
    assert decide(reads_the_clock) == Diverged(
        "datetime.now() is not available in workflow code; use ctx.now() or call it "
        "inside ctx.step",
        code="not-deterministic",
    )
    assert decide(seeds_random) == Diverged(
        "random.seed() is not available in workflow code; use ctx.random() or call it "
        "inside ctx.step",
        code="not-deterministic",
    )


async def connects(ctx: Context, _: Any) -> Any:
    import socket

    socket.socket()


async def connects_to_the_store(ctx: Context, _: Any) -> Any:
    import psycopg

    psycopg.connect("postgresql://nobody@127.0.0.1:1/none")


@pytest.mark.parametrize("workflow", [connects, connects_to_the_store])
def test_determinism_row_database_and_object_calls_outside_a_step_are_refused(
    workflow: Any,
) -> None:
    """Determinism: kv, database and object calls outside a step: refused with
    ``not available in workflow code, perform effects inside ctx.step``."""
    assert decide(workflow) == Diverged(
        "not available in workflow code, perform effects inside ctx.step",
        code="not-deterministic",
    )


# Gotchas


def test_gotcha_retries_3_is_three_attempts_in_total() -> None:
    """Gotchas: ``retries = 3`` is three attempts in total."""
    assert only(drive(with_options, 3, [], run_id=RUN_ID)).options.retries == 3


async def nests(ctx: Context, _: Any) -> Any:
    async def charge() -> Any:
        return await ctx.step("x", lambda: None)

    return await ctx.step("charge", charge)


def test_gotcha_steps_do_not_nest() -> None:
    """Gotchas: steps do not nest; a ``step`` inside a step body is an error."""
    command = only(decide(nests))
    with pytest.raises(
        NestedStep, match=r"^steps do not nest: ctx.step\('x'\) called inside step 'charge'$"
    ):
        asyncio.run(run_body(command, step_id=step_id(RUN_ID, "charge", 1)))


def test_gotcha_renaming_a_step_breaks_runs_in_flight() -> None:
    """Gotchas: renaming a step breaks runs already in flight: replay fails on the
    mismatch rather than guessing."""
    played = play(one_step)
    advance = drive(renamed, None, played.entries, run_id=RUN_ID)
    assert isinstance(advance, Diverged) and advance.code == "journal-divergence"


def test_gotcha_a_duplicate_signal_is_safe() -> None:
    """Gotchas: a duplicate signal is safe; an unconsumed extra is set aside instead of
    breaking replay. The driver sees only the journal: a wait resolved once replays
    the same whatever else arrived (the property test covers random deliveries)."""
    command = only(decide(waiter))
    resolved = entry_for(command, value={"by": "ada"})
    assert decide(waiter, resolved) == decide(waiter, resolved) == Returned((), {"by": "ada"})
