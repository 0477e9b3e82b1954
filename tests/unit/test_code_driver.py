"""The driver replays code-first workflows against their journals (seed 001)."""

from __future__ import annotations

import asyncio

from engine.modes.code.context import Context, Handle
from engine.modes.code.driver import drive, find_command, run_body
from engine.modes.code.journal import (
    ContinuedAsNew,
    Diverged,
    Entry,
    EntryState,
    Returned,
    Verb,
    Waits,
)
from tests.unit.code_journals import RUN_ID, entry_for, keys, play

BODY_RUNS: list[str] = []


async def order_saga(ctx: Context, order: dict) -> dict:
    async def reserve() -> str:
        BODY_RUNS.append("reserve")
        return "R-1"

    async def charge() -> str:
        return ctx.step_id

    reserved = await ctx.step("reserve", reserve, retries=3)
    shipment = ctx.spawn("shipping", {"order": order["id"]})
    _, which = await ctx.race("paid", "cancelled", timeout="72h")
    if which != "paid":
        return {"outcome": "void"}
    key = await ctx.step("charge", charge, retries=3)
    await ctx.all(shipment, "received", timeout="7d")
    return {"outcome": "settled", "reserved": reserved, "key": key}


def test_a_saga_plays_to_its_end_and_replays_without_running_bodies() -> None:
    played = play(order_saga, {"id": "o-42"})
    assert keys(played.commands) == [
        (Verb.STEP, "reserve.1"),
        (Verb.SPAWN, "spawn.1"),
        (Verb.RACE, "race.1"),
        (Verb.STEP, "charge.1"),
        (Verb.ALL, "all.1"),
    ]
    assert played.commands[4].on == ("spawn.1", "received")
    BODY_RUNS.clear()
    again = drive(order_saga, {"id": "o-42"}, played.entries, run_id=RUN_ID)
    assert again == Returned(
        (), {"outcome": "settled", "reserved": "result of reserve.1", "key": "result of charge.1"}
    )
    assert BODY_RUNS == []


def test_the_first_new_blocking_command_stops_the_code_with_the_new_ones_before_it() -> None:
    first = drive(order_saga, {"id": "o-42"}, [], run_id=RUN_ID)
    assert isinstance(first, Waits)
    entries = [entry_for(first.new[0], value="R-1")]
    second = drive(order_saga, {"id": "o-42"}, entries, run_id=RUN_ID)
    assert isinstance(second, Waits)
    assert [command.key for command in second.new] == ["spawn.1", "race.1"]


def test_a_worker_finds_a_step_body_by_key_and_runs_it_with_its_step_id() -> None:
    played = play(order_saga, {"id": "o-42"})
    command = find_command(
        order_saga, {"id": "o-42"}, played.entries[:3], run_id=RUN_ID, key="charge.1"
    )
    assert command is not None and command.position == 3
    assert asyncio.run(run_body(command, step_id=f"{RUN_ID}/charge#1.1")) == f"{RUN_ID}/charge#1.1"


def test_a_renamed_step_diverges_with_the_position_and_event() -> None:
    played = play(order_saga, {"id": "o-42"})
    renamed = list(played.entries)
    renamed[3] = Entry(3, Verb.STEP, "capture.1", "capture", 12, EntryState.DONE)
    advance = drive(order_saga, {"id": "o-42"}, renamed, run_id=RUN_ID)
    assert advance == Diverged(
        "journal divergence: expected step 'capture' at position 3 (event 12), "
        "code reached step 'charge'"
    )


def test_a_spawn_handle_is_keyed_by_its_command() -> None:
    played = play(order_saga, {"id": "o-42"})
    assert Handle("spawn.1", "shipping").key in played.commands[4].on


async def two_children(ctx: Context, _: object) -> list:
    return [ctx.spawn("shipping", 1), ctx.spawn("billing", 2), ctx.spawn("shipping", 3)]


def test_every_key_is_unique_within_a_run_spawns_count_per_verb() -> None:
    played = play(two_children)
    assert [command.key for command in played.commands] == ["spawn.1", "spawn.2", "spawn.3"]
    assert isinstance(played.end, Returned)
    assert [handle.key for handle in played.end.value] == ["spawn.1", "spawn.2", "spawn.3"]


async def first_options(ctx: Context, _: object) -> object:
    await ctx.step("charge", lambda: None, retries=3, timeout="30s")
    return await ctx.race("paid", timeout="1h")


async def changed_options(ctx: Context, _: object) -> object:
    await ctx.step("charge", lambda: None, retries=5, backoff="1m")
    return await ctx.race("paid", "cancelled", timeout="2h")


def test_changed_options_are_not_divergence_history_already_says_what_happened() -> None:
    played = play(first_options)
    assert drive(changed_options, None, played.entries, run_id=RUN_ID) == Returned(
        (), ({"signal": "paid"}, "paid")
    )


async def renewing(ctx: Context, n: int) -> int:
    await ctx.step("tick", lambda: n)
    ctx.continue_as_new(n + 1)
    return -1  # never reached


def test_continue_as_new_ends_the_replay_with_the_successors_input() -> None:
    first = drive(renewing, 1, [], run_id=RUN_ID)
    assert isinstance(first, Waits)
    ended = drive(renewing, 1, [entry_for(first.new[0], value=1)], run_id=RUN_ID)
    assert ended == ContinuedAsNew((), 2)


def test_continue_as_new_before_the_journal_is_consumed_diverges() -> None:
    async def hasty(ctx: Context, n: int) -> int:
        ctx.continue_as_new(n)
        return n

    first = drive(renewing, 1, [], run_id=RUN_ID)
    recorded = [entry_for(first.new[0], value=1)]
    assert isinstance(drive(hasty, 1, recorded, run_id=RUN_ID), Diverged)
