"""Wayline's own processes run on uvloop (``engine.worker.runner``)."""

import asyncio

import pytest

from engine.worker import runner


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
