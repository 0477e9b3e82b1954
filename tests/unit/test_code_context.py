"""``ctx``'s arguments, step ids, and the driver's edges: what is refused with which
text, what a worker gets back from ``find_command``, and how bodies and compensations
run."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.modes.code.context import Context
from engine.modes.code.cursor import MAX_JOURNAL_COMMANDS
from engine.modes.code.driver import drive, find_command, run_body, run_compensation
from engine.modes.code.journal import (
    Diverged,
    Entry,
    EntryState,
    OnUnknown,
    Raised,
    Returned,
    Verb,
    Waits,
)
from engine.modes.code.step_ids import (
    STEP_ID_PATTERN,
    parse_step_id,
    step_id,
    step_name_problem,
)
from tests.unit.code_journals import RUN_ID, entry_for, play

UNDONE: list[Any] = []


def decide(workflow: Any, input: Any = None, entries: Any = ()) -> Any:
    return drive(workflow, input, list(entries), run_id=RUN_ID)


async def configured(ctx: Context, options: dict) -> Any:
    return await ctx.step(options.pop("name", "charge"), lambda: None, **options)


@pytest.mark.parametrize(
    ("options", "text"),
    [
        ({"name": "a.b"}, "ctx.step: a step name must be 1 to 100 characters"),
        ({"name": "x" * 101}, "ctx.step: a step name must be"),
        ({"retries": -1}, "retries must be a whole number from 0 to 1000"),
        ({"retries": True}, "retries must be a whole number from 0 to 1000"),
        ({"backoff": "soon"}, "backoff expected a duration: a whole number followed by ms"),
        ({"backoff": "31d"}, "backoff must be at least 0 and at most 30 days"),
        ({"timeout": 0}, "timeout must be more than 0 and at most 365 days"),
        ({"compensate": "undo"}, "compensate must be a function taking the step's result"),
        ({"on_unknown": "guess"}, "on_unknown must be one of 'hold', 'retry_same_key'"),
    ],
)
def test_bad_step_options_are_refused_naming_what_is_allowed(options: dict, text: str) -> None:
    advance = decide(configured, options)
    assert isinstance(advance, Raised) and advance.code == "workflow-error"
    assert text in advance.message


def test_step_options_accept_text_timedelta_and_seconds() -> None:
    options = {"backoff": 1.5, "timeout": "30s", "on_unknown": "retry_same_key"}
    command = decide(configured, options).new[0]
    assert command.options.backoff == timedelta(seconds=1.5)
    assert command.options.timeout == timedelta(seconds=30)
    assert command.options.on_unknown is OnUnknown.RETRY_SAME_KEY


async def compensated(ctx: Context, _: Any) -> Any:
    async def undo(result: Any) -> str:
        UNDONE.append((result, ctx.step_id))
        return "released"

    def reserve() -> str:
        return f"reserved by {ctx.step_id}"

    await ctx.step("reserve", reserve, compensate=undo)
    await ctx.sleep("1h")
    raise RuntimeError("out of stock")


def test_a_compensation_is_found_by_key_and_run_with_the_steps_result() -> None:
    played = play(compensated)
    assert played.end == Raised((), "workflow-error", "RuntimeError: out of stock")
    command = find_command(compensated, None, played.entries, run_id=RUN_ID, key="reserve.1")
    assert command is not None and command.options.compensated
    key = step_id(RUN_ID, "reserve", 1)
    assert asyncio.run(run_body(command, step_id=key)) == f"reserved by {key}"
    UNDONE.clear()
    assert asyncio.run(run_compensation(command, "R-1", step_id=key)) == "released"
    assert [("R-1", key)] == UNDONE


def test_find_command_is_none_when_the_code_does_not_reach_the_key() -> None:
    played = play(compensated)
    assert find_command(compensated, None, played.entries, run_id=RUN_ID, key="nope.1") is None
    diverged = [Entry(0, Verb.STEP, "other.1", "other", 1, EntryState.DONE)]
    assert find_command(compensated, None, diverged, run_id=RUN_ID, key="reserve.1") is None


async def values_in_a_body(ctx: Context, _: Any) -> Any:
    def body() -> Any:
        return type(ctx.now()).__name__, 0 <= ctx.random() < 1, ctx.uuid4().version

    return await ctx.step("values", body)


def test_now_random_and_uuid4_inside_a_body_are_fresh_and_not_recorded() -> None:
    command = decide(values_in_a_body).new[0]
    assert asyncio.run(run_body(command, step_id=step_id(RUN_ID, "values", 1))) == (
        "datetime",
        True,
        4,
    )


async def cleans_up(ctx: Context, _: Any) -> Any:
    try:
        await ctx.wait_signal("paid")
    finally:
        await ctx.step("cleanup", lambda: None)


def test_verbs_in_a_finally_while_the_driver_closes_the_code_record_nothing() -> None:
    advance = decide(cleans_up)
    assert isinstance(advance, Waits)
    assert [command.key for command in advance.new] == ["await.paid.1"]


async def forever(ctx: Context, _: Any) -> Any:
    while True:
        ctx.random()


def test_a_journal_holds_at_most_the_command_limit() -> None:
    advance = decide(forever)
    assert isinstance(advance, Raised) and advance.code == "journal-full"
    assert len(advance.new) == MAX_JOURNAL_COMMANDS
    assert f"at most {MAX_JOURNAL_COMMANDS} commands" in advance.message


async def returns_early(ctx: Context, _: Any) -> Any:
    return "early"


def test_code_that_ends_before_its_journal_diverges() -> None:
    played = play(compensated)
    assert decide(returns_early, entries=played.entries) == Diverged(
        "journal divergence: expected step 'reserve' at position 0 (event 1), code returned"
    )


def test_a_workflow_must_be_an_async_def() -> None:
    with pytest.raises(TypeError, match="a code-first workflow is an async def"):
        decide(lambda ctx, input: None)


def test_entries_out_of_position_order_are_a_callers_error() -> None:
    entry = entry_for(decide(configured, {}).new[0])
    with pytest.raises(ValueError, match="entry 0 has position 1"):
        decide(configured, {}, [Entry(1, entry.verb, entry.key, entry.name, 1, entry.state)])


async def sync_race(ctx: Context, _: Any) -> Any:
    return await ctx.race(["paid", "cancelled"]), await ctx.all()


def test_race_accepts_the_seeds_list_form_and_all_of_nothing_is_empty() -> None:
    command = decide(sync_race).new[0]
    assert command.on == ("paid", "cancelled")
    assert decide(sync_race, entries=[entry_for(command, value=[1, "paid"])]) == Returned(
        (), ((1, "paid"), [])
    )


names = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_-]{0,99}", fullmatch=True)


@given(names, st.integers(1, 10**6), st.integers(0, 10**6))
def test_a_step_id_parses_back_to_its_parts(name: str, occurrence: int, failures: int) -> None:
    assert step_name_problem(name) is None
    text = step_id(RUN_ID, name, occurrence, failures)
    assert STEP_ID_PATTERN.fullmatch(text)
    parsed = parse_step_id(text)
    assert (parsed.run_id, parsed.step, parsed.occurrence, parsed.attempt_try) == (
        RUN_ID,
        name,
        occurrence,
        failures + 1,
    )
    assert str(parsed) == text


def test_a_malformed_step_id_is_refused_with_its_form() -> None:
    with pytest.raises(ValueError, match=r"a step_id reads <run>/<step>#<occurrence>.<try>"):
        parse_step_id("order-saga/o-42/charge#1")


async def swallows_divergence(ctx: Context, _: Any) -> Any:
    with contextlib.suppress(BaseException):
        ctx.spawn("billing", None)
    try:
        return await ctx.step("charge", lambda: None)
    except BaseException:
        return "carried on"


def test_a_divergence_at_a_verb_that_returns_at_once_cannot_be_swallowed() -> None:
    journal = [Entry(0, Verb.NOW, "now.1", "", 7, EntryState.DONE, "2026-01-01T00:00:00+00:00")]
    assert decide(swallows_divergence, entries=journal) == Diverged(
        "journal divergence: expected now() at position 0 (event 7), code reached spawn 'billing'"
    )
