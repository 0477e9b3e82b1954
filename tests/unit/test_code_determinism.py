"""The determinism guard (seed 001, "Determinism"): what it refuses in workflow code,
what it lets through, and that it never outlives a ``send``."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import random
import secrets
import sys
import threading
import time
import uuid
from datetime import UTC, date, datetime
from time import time as aliased_time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.modes.code.context import Context
from engine.modes.code.determinism import Guard, unguarded
from engine.modes.code.driver import drive, run_body
from engine.modes.code.failures import NotDeterministic
from engine.modes.code.journal import Diverged, Raised, Returned, Waits
from engine.modes.code.step_ids import step_id
from tests.unit.code_journals import RUN_ID

CLOCK = "time.time() is not available in workflow code; use ctx.now() or call it inside ctx.step"


def decide(workflow: Any) -> Any:
    return drive(workflow, None, [], run_id=RUN_ID)


async def aliased(ctx: Context, _: Any) -> Any:
    return aliased_time()


async def swallows(ctx: Context, _: Any) -> Any:
    try:
        time.time()
    except BaseException:
        return "pretended nothing happened"
    return None


async def raises_after_refusal(ctx: Context, _: Any) -> Any:
    try:
        random.random()
    finally:
        raise ValueError("boom")


def test_an_aliased_clock_is_refused_with_the_seed_text() -> None:
    assert decide(aliased) == Diverged(CLOCK, code="not-deterministic")


def test_code_that_catches_a_refusal_still_diverges() -> None:
    assert decide(swallows) == Diverged(CLOCK, code="not-deterministic")
    assert decide(raises_after_refusal).code == "not-deterministic"


async def sleeps_in_asyncio(ctx: Context, _: Any) -> Any:
    await asyncio.sleep(1)


async def awaits_a_bare_yield(ctx: Context, _: Any) -> Any:
    await asyncio.sleep(0)


def test_awaiting_something_not_ctx_is_refused() -> None:
    text = "workflow code awaited Future outside ctx; use ctx.all or ctx.race"
    assert decide(sleeps_in_asyncio) == Diverged(text, code="not-deterministic")
    assert decide(awaits_a_bare_yield).code == "not-deterministic"


async def deterministic_helpers(ctx: Context, _: Any) -> Any:
    logging.getLogger("wayline.test").info("deciding")
    seeded = random.Random(7)
    return seeded.randint(1, 100), sorted({3, 1, 2})


def test_logging_and_a_seeded_generator_of_the_codes_own_are_allowed() -> None:
    assert decide(deterministic_helpers) == Returned(
        (), (random.Random(7).randint(1, 100), [1, 2, 3])
    )


async def effects_in_a_body(ctx: Context, _: Any) -> Any:
    def body() -> float:
        return time.time() + random.random()

    return await ctx.step("clock", body)


def test_step_bodies_are_not_guarded() -> None:
    advance = decide(effects_in_a_body)
    assert isinstance(advance, Waits)
    result = asyncio.run(run_body(advance.new[0], step_id=step_id(RUN_ID, "clock", 1)))
    assert result > 0


async def fails(ctx: Context, _: Any) -> Any:
    raise KeyError("no such order")


def _profile(frame: Any, event: str, arg: Any) -> None:
    return None


def test_the_guard_is_removed_even_when_the_code_raises_and_restores_what_was_there() -> None:
    before = sys.getprofile()
    assert decide(fails) == Raised((), "workflow-error", "KeyError: 'no such order'")
    assert decide(swallows).code == "not-deterministic"
    assert sys.getprofile() is before
    assert gc.isenabled()
    sys.setprofile(_profile)
    try:
        decide(fails)
        decide(aliased)
        assert sys.getprofile() is _profile
    finally:
        sys.setprofile(before)


def test_the_guard_pauses_the_cyclic_collector_and_gives_it_back() -> None:
    refusals: list[str] = []
    with Guard(refusals.append):
        assert not gc.isenabled()
        with unguarded():
            time.time()
        with pytest.raises(NotDeterministic):
            time.time()
    assert gc.isenabled() and refusals == [CLOCK]
    gc.disable()
    try:
        with Guard(refusals.append):
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


async def unseeded_generator(ctx: Context, _: Any) -> Any:
    return random.Random().random()


async def process_clock(ctx: Context, _: Any) -> Any:
    return time.process_time()


def test_an_unseeded_generator_and_every_clock_are_refused() -> None:
    assert decide(unseeded_generator).code == "not-deterministic"
    assert decide(process_clock) == Diverged(
        "time.process_time() is not available in workflow code; use ctx.now() or call it "
        "inside ctx.step",
        code="not-deterministic",
    )


REFUSED_CALLS = {
    "time.time": time.time,
    "time.monotonic": time.monotonic,
    "time.perf_counter_ns": time.perf_counter_ns,
    "datetime.now": lambda: datetime.now(UTC),
    "datetime.utcnow": datetime.utcnow,
    "date.today": date.today,
    "random.random": random.random,
    "random.choice": lambda: random.choice("abc"),
    "random.shuffle": lambda: random.shuffle([1, 2, 3]),
    "uuid.uuid4": uuid.uuid4,
    "os.urandom": lambda: os.urandom(4),
    "secrets.token_hex": secrets.token_hex,
    "SystemRandom": lambda: random.SystemRandom().random(),
}


def calling(function: Any) -> Any:
    async def workflow(ctx: Context, _: Any) -> Any:
        return function()

    return workflow


def in_a_step(function: Any) -> Any:
    async def workflow(ctx: Context, _: Any) -> Any:
        return await ctx.step("effect", function)

    return workflow


@settings(max_examples=len(REFUSED_CALLS) * 2, deadline=None)
@given(st.sampled_from(sorted(REFUSED_CALLS)))
def test_guards_refuse_in_workflow_code_and_allow_in_bodies(label: str) -> None:
    """Guards refuse each clock, randomness and entropy source in workflow code, with
    the seed's text naming the ctx alternative, and let step bodies call them."""
    function, before = REFUSED_CALLS[label], sys.getprofile()
    refused = decide(calling(function))
    assert isinstance(refused, Diverged) and refused.code == "not-deterministic"
    assert "is not available in workflow code; use ctx." in refused.message
    assert refused.message.endswith(" or call it inside ctx.step")
    command = decide(in_a_step(function)).new[0]
    asyncio.run(run_body(command, step_id=step_id(RUN_ID, "effect", 1)))
    assert sys.getprofile() is before


def test_the_collector_stays_paused_until_the_last_thread_leaves_its_guard() -> None:
    entered, release = threading.Event(), threading.Event()

    def guarded_elsewhere() -> None:
        with Guard(lambda text: None):
            entered.set()
            release.wait()

    other = threading.Thread(target=guarded_elsewhere)
    other.start()
    entered.wait()
    with Guard(lambda text: None):
        pass
    assert not gc.isenabled()
    release.set()
    other.join()
    assert gc.isenabled()
