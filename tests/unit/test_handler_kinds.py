"""A handler is any callable taking the request, sync or async (README, "Writing
activities"). An object whose ``__call__`` is an ``async def`` is an async handler: run
in a thread, it only built its coroutine, never awaited, and its attempt was recorded
unknown (``step-result-not-json``) although none of its code had run."""

from __future__ import annotations

import functools
from datetime import UTC, datetime

import pytest

from engine.worker.activities import ActivityRequest, Succeeded, run_handler
from engine.worker.handler_threads import HandlerThreads
from verification import plan_stubs

REQUEST = ActivityRequest("i", "charge", "payments.charge", 1, "i/charge/1", datetime.now(UTC), 2)


class Doubler:
    """A handler kept as an object, as a team with a client to share writes it."""

    async def __call__(self, request: ActivityRequest) -> int:
        return request.input * 2


async def adds(request: ActivityRequest, amount: int) -> int:
    return request.input + amount


async def test_an_object_with_an_async_call_runs_as_an_async_handler() -> None:
    threads = HandlerThreads(1)
    try:
        assert await run_handler(Doubler(), REQUEST, 5.0, threads) == Succeeded(4)
        partial = functools.partial(adds, amount=3)
        assert await run_handler(partial, REQUEST, 5.0, threads) == Succeeded(5)
    finally:
        threads.close()


async def test_a_drill_runs_such_a_team_handler_as_an_async_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``wayline drill run --app`` wraps a team's handler to mark its entry and effect;
    the wrapper of an object with an async ``__call__`` was a sync one, which returned
    the coroutine unrun."""
    entered: list[str] = []
    monkeypatch.setattr(plan_stubs, "mark_entry", lambda request: entered.append("entry"))
    monkeypatch.setattr(plan_stubs, "record_effect", lambda request, seen: entered.append("effect"))
    threads = HandlerThreads(1)
    try:
        assert await run_handler(plan_stubs.recorded(Doubler()), REQUEST, 5.0, threads) == (
            Succeeded(4)
        )
    finally:
        threads.close()
    assert entered == ["entry", "effect"]
