"""A harness call in a thread is awaited to its end even when the drill is stopped
meanwhile, and what it made is undone (``verification.threads``)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from verification.threads import to_the_end


async def test_a_stopped_call_ends_before_the_stop_goes_on_and_is_undone() -> None:
    release, started = threading.Event(), threading.Event()
    undone: list[str] = []

    def start_cluster() -> str:
        started.set()
        release.wait()
        return "cluster"

    waiting = asyncio.ensure_future(to_the_end(start_cluster, undo=undone.append))
    try:
        await asyncio.to_thread(started.wait)
        waiting.cancel()
        await asyncio.sleep(0)  # the cancellation reaches the waiter
        assert not waiting.done(), "the stop waits for the thread"
    finally:
        release.set()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert undone == ["cluster"]


async def test_a_call_that_is_not_stopped_gives_its_result() -> None:
    assert await to_the_end(sum, [1, 2], undo=pytest.fail) == 3
