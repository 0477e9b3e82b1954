"""A worker's JSON log records name it (``worker_id``) wherever it runs: the studio runs
its worker as a task of its own, whose records carried no worker id."""

from __future__ import annotations

import asyncio
import contextvars
import io
import json
import logging
from datetime import timedelta

from engine.api.client import Client
from engine.store.store import Store
from engine.worker import logs
from engine.worker.activities import ActivityRegistry, ActivityRequest
from engine.worker.loop import Worker, WorkerConfig
from tests.integration.factories import activity_steps


def _panic(request: ActivityRequest) -> None:
    raise RuntimeError("not a word of this in the log")


async def test_a_worker_run_as_a_task_of_its_own_names_itself_in_json_logs(
    db_store: Store,
) -> None:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level, logs.json_logs)
    buffer = io.StringIO()
    logs.use_format("json")
    root.handlers[0].setStream(buffer)  # type: ignore[attr-defined]
    app = ActivityRegistry()
    app.register("logs.panic", _panic)
    client = Client(db_store)
    await client.publish(activity_steps("logs.one", ["panic"]))
    config = WorkerConfig(worker_id="studio-like", poll_interval=timedelta(milliseconds=50))
    stop = asyncio.Event()
    # As the studio starts it: a task whose context has no worker id bound.
    running = asyncio.create_task(
        Worker(db_store, app, config).run(stop), context=contextvars.Context()
    )
    try:
        await client.start("logs.one", "order-1")
        async with asyncio.timeout(30):
            while "activity-panic" not in buffer.getvalue():
                await asyncio.sleep(0.02)
    finally:
        stop.set()
        await running
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
        logs.json_logs = saved[2]
    [record] = [
        json.loads(line) for line in buffer.getvalue().splitlines() if "activity-panic" in line
    ]
    assert record["worker_id"] == "studio-like" and record["instance_id"] == "order-1"
    assert "not a word" not in buffer.getvalue()
