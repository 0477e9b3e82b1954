"""What an activity handler is told of the steps before it: ``ActivityRequest.results``."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import pytest

from engine.api.client import Client
from engine.model.inputs import JSON_TYPES_WORDS
from engine.model.instance import AttemptStatus
from engine.store.store import Store
from engine.worker.activities import (
    RESULT_NOT_JSON,
    RESULT_TOO_LARGE,
    ActivityRegistry,
    ActivityRequest,
)
from engine.worker.instance_cache import RegistrySource
from engine.worker.leased_commits import Context
from engine.worker.loop import Worker, WorkerConfig
from tests.integration.factories import activity_steps, run_due

STEPS = ("quote", "nothing", "charge")
WAIT_SECONDS = 30.0


async def test_a_handler_reads_the_results_of_the_steps_that_succeeded_before_it(
    db_store: Store,
) -> None:
    seen: dict[str, Any] = {}
    charged = threading.Event()
    app = ActivityRegistry()
    app.register("results.quote", lambda request: {"amount": 12, "currency": "EUR"})
    app.register("results.nothing", lambda request: None)

    def charge(request: ActivityRequest) -> str:
        results: Mapping[str, Any] = request.results
        seen.update(
            keys=list(results),
            size=len(results),
            quote=results["quote"],
            nothing=results["nothing"],
            again=results["quote"] is results["quote"],
            charge="charge" in results,
            missing=results.get("refund", "absent"),
        )
        charged.set()
        return "charged"

    app.register("results.charge", charge)
    client = Client(db_store)
    await client.publish(activity_steps("results.three", STEPS))
    stop = asyncio.Event()
    config = WorkerConfig(worker_id="results", poll_interval=timedelta(milliseconds=50))
    running = asyncio.create_task(Worker(db_store, app, config).run(stop))
    try:
        await client.start("results.three", "order-1")
        assert await asyncio.to_thread(charged.wait, WAIT_SECONDS), "charge never ran"
    finally:
        stop.set()
        await running

    assert seen == {
        "keys": ["quote", "nothing"],
        "size": 2,
        "quote": {"amount": 12, "currency": "EUR"},
        "nothing": None,
        "again": True,  # decoded once, when first read
        "charge": False,  # the step running is not a result yet
        "missing": "absent",
    }


async def test_a_handler_may_return_the_results_it_was_given(db_store: Store) -> None:
    """``request.results`` is a read-only Mapping, not a dict: a result holding it (a
    step that passes on what came before) was recorded unknown, not JSON, after the
    handler had done its work."""
    app = ActivityRegistry()
    app.register("results.quote", lambda request: {"amount": 12})
    app.register("results.nothing", lambda request: {"before": request.results})
    app.register("results.charge", lambda request: request.results["nothing"])
    client = Client(db_store)
    await client.publish(activity_steps("results.passed", STEPS))
    await client.start("results.passed", "order-1")
    await run_due(Context(db_store, app, RegistrySource(db_store)))
    charge = (await client.inspect("order-1")).activities["charge"]
    assert charge.status is AttemptStatus.SUCCEEDED
    assert json.loads(charge.result or "null") == {"before": {"quote": {"amount": 12}}}


async def test_a_result_too_large_to_record_is_unknown_and_says_why(
    db_store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    """The handler ran (its effect may have happened) but its result is over the step's
    ``result_limit``: an unknown outcome saying so at once, not a commit the engine
    refuses and a lease left to expire; the worker's log says so, as for a handler that
    raised."""
    app = ActivityRegistry()
    app.register("big.quote", lambda request: "x" * 1000)  # 1002 bytes of JSON
    app.register("big.other", lambda request: {1, 2})  # no JSON at all
    client = Client(db_store)
    await client.publish(activity_steps("big.one", ["quote"]))
    await client.publish(activity_steps("big.two", ["other"]))
    await client.start("big.one", "order-1")
    await client.start("big.two", "order-2")
    ctx = Context(db_store, app, RegistrySource(db_store))
    with caplog.at_level(logging.WARNING, logger="wayline.activities"):
        await run_due(ctx)
    said = sorted(r.getMessage() for r in caplog.records if r.name == "wayline.activities")
    assert said == [
        "activity big.other returned a result that is not JSON (the activity's result holds "
        f"a set, which is not JSON: use {JSON_TYPES_WORDS}): attempt 1 of step other of "
        f"order-2 is recorded unknown ({RESULT_NOT_JSON})",
        "activity big.quote returned 1002 bytes of JSON: attempt 1 of step quote of "
        f"order-1 is recorded unknown ({RESULT_TOO_LARGE})",
    ]
    quote = (await client.inspect("order-1")).activities["quote"]
    assert quote.status is AttemptStatus.UNKNOWN
    assert quote.code == RESULT_TOO_LARGE
    assert json.loads(quote.result or "null") == {
        "message": "the activity returned 1002 bytes of JSON; at most 1000 can be recorded"
    }
    other = (await client.inspect("order-2")).activities["other"]
    assert (other.status, other.code) == (AttemptStatus.UNKNOWN, RESULT_NOT_JSON)
    assert json.loads(other.result or "null") == {
        "message": f"the activity's result holds a set, which is not JSON: use {JSON_TYPES_WORDS}"
    }


async def test_a_result_whose_text_is_not_utf8_is_unknown_and_logs_no_payload(
    db_store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    """A lone surrogate (what a bad decode of a gateway's bytes leaves in a str) passes
    JSON encoding but not UTF-8: its encoding error ended the worker's task, its
    traceback quoting the result in the log, and the attempt waited for its lease to
    run out. It is a result that is not JSON, recorded unknown at once."""
    app = ActivityRegistry()
    app.register("odd.text", lambda request: {"name": "\ud800 hunter2"})
    client = Client(db_store)
    await client.publish(activity_steps("odd.one", ["text"]))
    await client.start("odd.one", "order-1")
    with caplog.at_level(logging.WARNING):
        await run_due(Context(db_store, app, RegistrySource(db_store)))
    text = (await client.inspect("order-1")).activities["text"]
    assert (text.status, text.code) == (AttemptStatus.UNKNOWN, RESULT_NOT_JSON)
    assert [r.getMessage() for r in caplog.records] == [
        "activity odd.text returned a result that is not JSON (the activity's result "
        "contains a lone surrogate (\\ud800), not Unicode text): attempt 1 of step text of "
        f"order-1 is recorded unknown ({RESULT_NOT_JSON})"
    ]
    assert "hunter2" not in caplog.text
