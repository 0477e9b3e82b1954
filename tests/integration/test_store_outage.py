"""A store outlives its database's outage: once the server is back, the next operation
is served, however long the server was down; a worker says so in its log, a line per
failure (a real private cluster, stopped and started again on its port)."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

import pytest

from engine.store.embedded import EmbeddedPostgres
from engine.store.errors import StoreUnavailable
from engine.store.migrations import apply_migrations
from engine.store.store import Deadlines, Store
from engine.worker.activities import ActivityRegistry
from engine.worker.loop import Worker, WorkerConfig

FAILED_CONNECTS = 8
"""How many of the pool's connects the outage lasts for: four of each of its two
attempts (one replacing the connection that died, one growing the pool for the
operation that found it empty). An attempt retries with a doubling delay (1, 2, 4, 8 s):
after four failures one that never gives up would next try about 15 s after its first,
long after the server is back, and no other attempt begins while the growing one
lasts."""
WAIT_FOR_A_CONNECTION = 3.0
"""The test store's ``Deadlines.pool_wait``: the operation after the restart fails
unless a connection is made within it."""


async def _read(store: Store) -> int:
    async with store.reading() as conn:
        return (await (await conn.execute("SELECT 1")).fetchone())[0]


async def _until_failed_connects(store: Store, count: int) -> None:
    """Until the pool has failed ``count`` times to connect (its own retries)."""
    while store.pool.get_stats().get("connections_errors", 0) < count:
        await asyncio.sleep(0.05)


async def test_the_first_operation_after_a_long_outage_is_served(
    cluster: EmbeddedPostgres,
) -> None:
    dsn = cluster.start()
    apply_migrations(dsn, "wayline")
    store = await Store.open(dsn, "wayline", deadlines=Deadlines(pool_wait=WAIT_FOR_A_CONNECTION))
    try:
        assert await _read(store) == 1
        cluster.stop()
        with pytest.raises(StoreUnavailable):
            await _read(store)  # the pooled connection ended with the server
        with pytest.raises(StoreUnavailable):
            await _read(store)  # no connection comes within the wait: the pool grows
        await asyncio.wait_for(_until_failed_connects(store, FAILED_CONNECTS), timeout=60)
        cluster.start()
        assert await _read(store) == 1
    finally:
        await store.close()


async def test_a_worker_logs_each_failure_of_an_outage_in_one_line(
    cluster: EmbeddedPostgres, caplog: pytest.LogCaptureFixture
) -> None:
    """A traceback for every sweep and heartbeat (and claim, which waits for the owner
    lock the outage broke) buried the log of an outage."""
    dsn = cluster.start()
    apply_migrations(dsn, "wayline")
    store = await Store.open(dsn, "wayline", deadlines=Deadlines(pool_wait=WAIT_FOR_A_CONNECTION))
    config = WorkerConfig(worker_id="outlived", poll_interval=timedelta(milliseconds=100))
    worker = Worker(store, ActivityRegistry(), config)
    stop = asyncio.Event()
    running = asyncio.create_task(worker.run(stop))
    try:
        await asyncio.wait_for(_until_looping(worker), timeout=30)
        caplog.set_level(logging.WARNING, "wayline.worker")
        cluster.stop()
        failures = await asyncio.wait_for(_until_logged(caplog, 3), timeout=60)
        cluster.start()
    finally:
        stop.set()
        await running
        await store.close()
    for record in failures:  # e.g. "sweep failed: hold drain failed: the database did
        said = record.getMessage()  # not answer; nothing was written"
        assert record.exc_info is None, said
        assert said.startswith(("sweep failed: ", "heartbeat failed: ", "claim (")), said
        assert "\n" not in said and "server" not in said, said  # no driver text


async def _until_looping(worker: Worker) -> None:
    """Until the worker is past its start (a first heartbeat, which fails the start
    when the database does not answer) and holds its owner lock: its loop clears
    ``wake`` before each claim."""
    worker.wake.set()
    while worker.wake.is_set():
        await asyncio.sleep(0.02)
    await worker.owner_locked.wait()


async def _until_logged(caplog: pytest.LogCaptureFixture, count: int) -> list[logging.LogRecord]:
    """The worker's first ``count`` warnings, once logged."""
    while True:
        found = [r for r in caplog.records if r.name == "wayline.worker"]
        if len(found) >= count:
            return found[:count]
        await asyncio.sleep(0.05)
