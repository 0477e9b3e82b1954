"""Issue 26: a worker's metrics port answers ``/healthz`` (the process answers) and
``/readyz`` (database reachable, schema current, owner lock held), for orchestrators."""

from __future__ import annotations

import asyncio
import functools
import logging
from datetime import timedelta

import psycopg
import pytest
from psycopg import sql

from engine.store.store import Store
from engine.worker.activities import ActivityRegistry
from engine.worker.health import NOT_LOCKED, worker_readiness
from engine.worker.loop import SHARED_ID, Worker, WorkerConfig
from tests.integration.factories import open_store
from verification.proxy import DrillProxy


async def get(port: int, path: str) -> tuple[int, str]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    await writer.drain()
    response = (await reader.read()).decode()
    writer.close()
    head, _, body = response.partition("\r\n\r\n")
    return int(head.split(" ", 2)[1]), body


async def claim_latency_served(port: int) -> bool:
    """Whether ``/metrics`` shows the claim latency histogram within a few seconds (the
    worker's first claim follows its owner lock)."""
    deadline = asyncio.get_running_loop().time() + 20
    while asyncio.get_running_loop().time() < deadline:
        status, text = await get(port, "/metrics")
        if status == 200 and 'wayline_claim_seconds_bucket{le="0.001"}' in text:
            return True
        await asyncio.sleep(0.02)
    return False


async def test_a_worker_is_ready_only_with_its_owner_lock_and_a_current_schema(
    db_store: Store, pg_dsn: str, schema: str
) -> None:
    config = WorkerConfig(worker_id="health-1", poll_interval=timedelta(milliseconds=50))
    worker = Worker(db_store, ActivityRegistry(), config)
    server = await worker.metrics.serve("127.0.0.1", 0, functools.partial(worker_readiness, worker))
    port = server.sockets[0].getsockname()[1]
    stop = asyncio.Event()
    running = asyncio.create_task(worker.run(stop))
    try:
        await asyncio.wait_for(worker.owner_locked.wait(), 20)
        assert await get(port, "/healthz") == (200, "ok\n")
        assert await get(port, "/readyz") == (200, "ok\n")
        assert await claim_latency_served(port)

        ledger = sql.Identifier(schema, "schema_migrations")
        async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
            hide = "UPDATE {} SET version = -version WHERE version = (SELECT max(version) FROM {})"
            await conn.execute(sql.SQL(hide).format(ledger, ledger))
            try:
                behind = await get(port, "/readyz")
            finally:
                restore = "UPDATE {} SET version = -version WHERE version < 0"
                await conn.execute(sql.SQL(restore).format(ledger))
        assert behind == (503, "the schema is not current: run `wayline migrate`\n")
        assert await get(port, "/readyz") == (200, "ok\n")
    finally:
        stop.set()
        await running
    assert await get(port, "/readyz") == (503, f"{NOT_LOCKED}\n")
    assert await get(port, "/healthz") == (200, "ok\n")  # the process still answers
    server.close()
    await server.wait_closed()


async def test_a_second_worker_with_the_same_id_says_why_it_claims_nothing(
    db_store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    """Two workers given one --worker-id: the second cannot hold the id's owner lock, so
    it claims nothing. It says so once in its log and in /readyz, rather than running
    silently, and takes over once the first stops."""
    config = WorkerConfig(worker_id="twin", poll_interval=timedelta(milliseconds=50))
    first, second = (
        Worker(db_store, ActivityRegistry(), config),
        Worker(db_store, ActivityRegistry(), config),
    )
    stops = asyncio.Event(), asyncio.Event()
    caplog.set_level(logging.WARNING, logger="wayline.worker")
    running = [asyncio.create_task(first.run(stops[0]))]
    try:
        await asyncio.wait_for(first.owner_locked.wait(), 20)
        running.append(asyncio.create_task(second.run(stops[1])))
        said = SHARED_ID.format("twin")
        deadline = asyncio.get_running_loop().time() + 20
        while await worker_readiness(second) != said:
            assert asyncio.get_running_loop().time() < deadline, "the twin never said why"
            await asyncio.sleep(0.02)
        assert [r.getMessage() for r in caplog.records].count(said) == 1
        assert "--worker-id" in said

        stops[0].set()
        await running[0]
        await asyncio.wait_for(second.owner_locked.wait(), 20)
        assert await worker_readiness(second) == ""
        assert "worker id twin is free again: claiming" in caplog.messages
    finally:
        for stop in stops:
            stop.set()
        await asyncio.gather(*running)


async def test_a_worker_whose_database_is_down_says_so_not_that_its_lock_is_not_held(
    pg_dsn: str, schema: str
) -> None:
    """A database that stops answering also costs a worker its owner lock; /readyz names
    the database, the cause, rather than the lock, which sent an operator looking for a
    twin worker."""
    async with DrillProxy(pg_dsn) as proxy, open_store(proxy.conninfo(), schema) as store:
        worker = Worker(store, ActivityRegistry(), WorkerConfig(worker_id="outage-1"))
        proxy.refusing = True  # the database is unreachable from here on
        proxy.sever_all()
        assert await worker_readiness(worker) == "the database is not reachable"
