"""A handler that ends without an outcome says so in the worker's log: its history
records only a code (``activity-panic``, ``activity-timeout``), and the worker said
nothing at all, so a developer whose handler raised had nowhere to look. The log names
the exception's type and where it was raised, never its text, which may quote an input
or a secret."""

from __future__ import annotations

import asyncio
import logging
import sys
from datetime import UTC, datetime

import pytest

from engine.worker.activities import (
    CRASH_CODE,
    TIMEOUT_CODE,
    ActivityRequest,
    Handler,
    Outcome,
    Unknown,
    run_handler,
)
from engine.worker.handler_threads import HandlerThreads

REQUEST = ActivityRequest(
    "order-1", "charge", "payments.charge", 2, "order-1/charge/2", datetime.now(UTC), None
)
ABOUT = "attempt 2 of step charge of order-1 is recorded unknown"


async def logged_run(handler: Handler, caplog: pytest.LogCaptureFixture) -> Outcome:
    """``handler``'s outcome on a thread of its own, its warnings captured."""
    threads = HandlerThreads(1)
    try:
        with caplog.at_level(logging.WARNING, logger="wayline.activities"):
            return await run_handler(handler, REQUEST, 5.0, threads)
    finally:
        threads.close()


def declines(_: ActivityRequest) -> None:
    raise RuntimeError("card 4111-1111 refused for secret=hunter2")


async def test_a_handler_that_raises_is_logged_with_its_type_and_place_not_its_text(
    caplog: pytest.LogCaptureFixture,
) -> None:
    outcome = await logged_run(declines, caplog)
    assert outcome == Unknown(CRASH_CODE, {"error": "RuntimeError"})
    (record,) = caplog.records
    line = declines.__code__.co_firstlineno + 1
    assert record.levelno == logging.WARNING
    assert record.getMessage() == (
        f"activity payments.charge raised RuntimeError at test_handler_logs.py line {line}: "
        f"{ABOUT} ({CRASH_CODE})"
    )
    assert "4111" not in caplog.text and "hunter2" not in caplog.text


async def test_a_handler_past_its_timeout_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    async def never_answers(_: ActivityRequest) -> None:
        await asyncio.Event().wait()

    with caplog.at_level(logging.WARNING, logger="wayline.activities"):
        outcome = await run_handler(never_answers, REQUEST, 0.05, HandlerThreads(1))
    assert outcome == Unknown(TIMEOUT_CODE)
    assert [r.getMessage() for r in caplog.records] == [
        f"activity payments.charge did not finish within its timeout of 0.05 s: "
        f"{ABOUT} ({TIMEOUT_CODE})"
    ]


def exits(_: ActivityRequest) -> None:
    sys.exit("usage: charge AMOUNT")


async def exits_async(_: ActivityRequest) -> None:
    sys.exit(2)


@pytest.mark.parametrize("handler", [exits, exits_async])
async def test_a_handler_that_calls_sys_exit_is_recorded_unknown_and_the_worker_runs_on(
    handler: Handler, caplog: pytest.LogCaptureFixture
) -> None:
    """SystemExit is not an Exception: it went past the handler's classification, out of
    the worker's event loop, and ended the worker (its other attempts abandoned, to be
    recorded unknown by another). It is the handler's crash, as any other raise."""
    outcome = await logged_run(handler, caplog)
    assert outcome == Unknown(CRASH_CODE, {"error": "SystemExit"})
    line = handler.__code__.co_firstlineno + 1
    assert [r.getMessage() for r in caplog.records] == [
        f"activity payments.charge raised SystemExit at test_handler_logs.py line {line}: "
        f"{ABOUT} ({CRASH_CODE})"
    ]
