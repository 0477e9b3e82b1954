"""A worker's handler threads: the timeout counts from the handler's start, and a
handler that outlives its attempt keeps its thread, counted, until it returns."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest

from engine.worker.activities import ActivityRequest, Succeeded, Unknown, run_handler
from engine.worker.handler_threads import HandlerThreads

HOLD_SECONDS = 0.4
"""How long the first handler holds the only thread: twice the second one's timeout."""


def request(step: str) -> ActivityRequest:
    return ActivityRequest("i", step, "t", 1, f"key-{step}", datetime.now(UTC), None)


@contextmanager
def let_go(threads: HandlerThreads, *events: threading.Event) -> Iterator[None]:
    """At the end of the block, passed or failed, set every event a handler may still be
    blocked on and close the pool: no test leaves a thread behind it."""
    try:
        yield
    finally:
        for event in events:
            event.set()
        threads.close()


def holding_until(released: threading.Event) -> Callable[[ActivityRequest], str]:
    """A handler that holds its thread until ``released`` is set, then returns 'first'."""

    def holds_the_thread(_: ActivityRequest) -> str:
        released.wait()
        return "first"

    return holds_the_thread


async def test_a_handler_waiting_for_a_thread_is_not_timed_out_by_the_wait() -> None:
    threads = HandlerThreads(1)
    released = threading.Event()
    loop = asyncio.get_running_loop()

    first = asyncio.create_task(run_handler(holding_until(released), request("a"), 5.0, threads))
    second = asyncio.create_task(run_handler(lambda _: "second", request("b"), 0.2, threads))
    loop.call_later(HOLD_SECONDS, released.set)
    with let_go(threads, released):
        assert await second == Succeeded("second"), "its clock started when it ran"
        assert await first == Succeeded("first")


async def test_a_handler_that_started_late_times_out_counted_from_its_start() -> None:
    threads = HandlerThreads(1)
    released, second_released = threading.Event(), threading.Event()
    loop = asyncio.get_running_loop()
    started: list[float] = []

    def runs_too_long(_: ActivityRequest) -> None:
        started.append(loop.time())
        second_released.wait()

    first = asyncio.create_task(run_handler(holding_until(released), request("a"), 5.0, threads))
    second = asyncio.create_task(run_handler(runs_too_long, request("b"), 0.2, threads))
    loop.call_later(HOLD_SECONDS, released.set)
    with let_go(threads, released, second_released):
        outcome = await second
        ended = loop.time()
        assert outcome == Unknown("activity-timeout")
        assert started and ended - started[0] >= 0.2, "its clock started when it ran"
        assert await first == Succeeded("first")


async def test_a_handler_outliving_its_timeout_keeps_its_thread_until_it_returns() -> None:
    freed = asyncio.Event()
    threads = HandlerThreads(1, on_free=freed.set)
    released = threading.Event()
    with let_go(threads, released):
        outcome = await run_handler(lambda _: released.wait(), request("a"), 0.05, threads)
        assert outcome == Unknown("activity-timeout")
        assert threads.lingering == 1, "the timed-out handler still holds its thread"
        released.set()
        await asyncio.wait_for(freed.wait(), 5.0)
        assert threads.lingering == 0


async def test_a_handler_outliving_its_attempt_is_logged_with_the_slots_it_holds(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A worker whose handlers hung past their timeouts (a payment provider that never
    answers) claimed nothing more, while its log said only that each attempt timed out
    and the workers page showed it live without a lease: nothing said its attempt
    slots were all taken by handlers still running."""
    caplog.set_level(logging.INFO, logger="wayline.worker")
    freed = asyncio.Event()
    threads = HandlerThreads(2, on_free=freed.set)
    released = threading.Event()
    with let_go(threads, released):
        await run_handler(lambda _: released.wait(), request("a"), 0.05, threads)
        assert (
            "the handler of attempt 1 of step a of i still runs after its attempt ended: "
            "1 of the worker's 2 attempt slots are held by such handlers, so it runs at most"
            " 1 attempt at a time until they return"
        ) in caplog.text
        released.set()
        await asyncio.wait_for(freed.wait(), 5.0)
        assert "returned: 0 of the worker's 2 attempt slots are held" in caplog.text


@pytest.mark.parametrize("size", [1, 3])
async def test_a_cancelled_attempt_that_never_started_leaves_no_thread_behind(size: int) -> None:
    threads = HandlerThreads(size)
    released = threading.Event()
    with let_go(threads, released):
        holders = [
            asyncio.create_task(threads.run(lambda _: released.wait(), request(f"h{n}"), 5.0))
            for n in range(size)
        ]
        waiting = asyncio.create_task(threads.run(lambda _: "never", request("w"), 5.0))
        await asyncio.sleep(0)  # let it queue behind the holders
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert threads.lingering == 0, "it never started, so it holds no thread"
        released.set()
        await asyncio.gather(*holders)


async def test_a_call_still_waiting_for_a_thread_when_they_close_is_cancelled_not_run() -> None:
    threads = HandlerThreads(1)
    holding, released = threading.Event(), threading.Event()
    ran: list[str] = []

    def holds_the_thread(_: ActivityRequest) -> bool:
        holding.set()
        return released.wait()

    holder = asyncio.create_task(threads.run(holds_the_thread, request("h"), 5.0))
    assert await asyncio.to_thread(holding.wait, 60), "the holder took the only thread"
    waiting = asyncio.create_task(threads.run(ran.append, request("w"), 5.0))
    await asyncio.sleep(0)  # its first step queues it behind the holder
    threads.close()
    released.set()
    assert await holder is True
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert ran == [] and threads.lingering == 0, "it never ran, so it holds no thread"
    with pytest.raises(RuntimeError, match="closed"):
        await threads.run(ran.append, request("late"), 5.0)


OUTLIVING = textwrap.dedent("""
    import asyncio, threading
    from datetime import UTC, datetime
    from engine.worker.activities import ActivityRequest, Unknown, run_handler
    from engine.worker.handler_threads import HandlerThreads

    async def main():
        threads = HandlerThreads(1)
        never = threading.Event()
        request = ActivityRequest("i", "s", "t", 1, "key", datetime.now(UTC), None)
        outcome = await run_handler(lambda _: never.wait(), request, 0.05, threads)
        assert outcome == Unknown("activity-timeout") and threads.lingering == 1
        threads.close()
        print("returned", flush=True)

    asyncio.run(main())
""")
"""A process whose handler outlives its attempt, blocked for good, and which then ends."""


def test_a_handler_blocked_for_good_does_not_hold_its_process_exit() -> None:
    """A stopping worker whose drain ran out leaves such handlers behind: its process
    still exits (the outcome is unknown either way) instead of waiting on them forever."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    ended = subprocess.run(
        [sys.executable, "-c", OUTLIVING], env=env, capture_output=True, text=True, timeout=120
    )
    assert ended.returncode == 0, ended.stderr
    assert ended.stdout == "returned\n"
