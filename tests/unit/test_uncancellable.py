"""``uncancellable``: what runs in it finishes even when its caller is cancelled, nested
ones included, and a nested one makes no task of its own."""

from __future__ import annotations

import asyncio

import pytest

from engine.store.transactions import uncancellable


async def test_a_nested_operation_finishes_when_the_outer_caller_is_cancelled() -> None:
    started, release, finished = asyncio.Event(), asyncio.Event(), []

    async def inner() -> str:
        started.set()
        await release.wait()
        finished.append("inner")
        return "committed"

    async def outer() -> str:
        tasks_before = len(asyncio.all_tasks())
        result = await uncancellable(inner())
        assert len(asyncio.all_tasks()) == tasks_before, "no second task"
        finished.append("outer")
        return result

    caller = asyncio.create_task(uncancellable(outer()))
    await started.wait()
    caller.cancel()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert finished == ["inner", "outer"]


async def test_the_operation_error_reaches_a_cancelled_caller() -> None:
    started, release = asyncio.Event(), asyncio.Event()

    async def failing() -> None:
        started.set()
        await release.wait()
        raise ValueError("the commit failed")

    caller = asyncio.create_task(uncancellable(failing()))
    await started.wait()
    caller.cancel()
    release.set()
    with pytest.raises(ValueError, match="the commit failed"):
        await caller
