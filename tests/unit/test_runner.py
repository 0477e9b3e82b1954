"""Wayline's own processes run on uvloop (``engine.worker.runner``)."""

import asyncio
import threading
import time
from datetime import UTC, datetime

import pytest

from engine.worker import runner
from engine.worker.activities import TIMEOUT_CODE, ActivityRequest, Unknown, run_handler
from engine.worker.handler_threads import HandlerThreads


def test_a_coroutine_runs_to_its_result_on_a_uvloop_loop() -> None:
    async def main() -> str:
        await asyncio.sleep(0)
        return type(asyncio.get_running_loop()).__module__

    assert runner.run(main()).startswith("uvloop")


def test_an_error_of_the_coroutine_reaches_the_caller_and_closes_the_loop() -> None:
    loops: list[asyncio.AbstractEventLoop] = []

    async def main() -> None:
        loops.append(asyncio.get_running_loop())
        raise LookupError("the coroutine's own error")

    with pytest.raises(LookupError, match="the coroutine's own error"):
        runner.run(main())
    assert loops[0].is_closed()


TIMEOUT_SECONDS = 0.01
TRIES = 20
"""uvloop's timers fire up to 1.5 ms early; over this many tries some would."""


def request(step: str) -> ActivityRequest:
    return ActivityRequest("i", step, "t", 1, f"key-{step}", datetime.now(UTC), None)


def test_on_uvloop_a_handler_is_timed_out_only_after_its_full_timeout() -> None:
    async def main() -> list[float]:
        threads = HandlerThreads(1)
        released = threading.Event()
        began: list[float] = []

        async def waits_async(_: ActivityRequest) -> None:
            began.append(time.monotonic())
            await asyncio.Event().wait()

        def waits_in_its_thread(_: ActivityRequest) -> None:
            began.append(time.monotonic())
            released.wait()

        early = []
        try:
            for k in range(TRIES):
                for handler in (waits_async, waits_in_its_thread):
                    outcome = await run_handler(handler, request(f"s{k}"), TIMEOUT_SECONDS, threads)
                    assert outcome == Unknown(TIMEOUT_CODE)
                    early.append(time.monotonic() - began[-1] - TIMEOUT_SECONDS)
                    released.set()
                    released.clear()
        finally:
            released.set()
            threads.close()
        return early

    assert min(runner.run(main())) >= 0, "no handler loses part of its time"
