"""A store whose opening is cancelled (a drill job stopped from the studio, Ctrl-C)
leaves no pool behind: psycopg_pool's workers swallow a cancellation that arrives while
they connect and then wait on their queue forever, so a pool left open kept
``asyncio.run`` from ever returning (seen: a stopped drill job that never ended)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import psycopg
import pytest

from engine.store.migrations import apply_migrations
from engine.store.store import Store

POOL_WORKER_END_SECONDS = 30.0
"""A bound on the wait for the pool's worker to end (it takes milliseconds)."""


@contextlib.asynccontextmanager
async def stalling_after_first(dsn: str) -> AsyncIterator[tuple[str, asyncio.Event]]:
    """A TCP front of the server at ``dsn`` that relays the first connection (the
    store's probe) and leaves every later one unanswered until it is left; the event is
    set when the second one arrives (the pool's first connection is then under way)."""
    info = psycopg.conninfo.conninfo_to_dict(dsn)
    host, port = info.get("host", "127.0.0.1"), int(info.get("port", 5432))
    stalled = asyncio.Event()
    seen = 0
    relays: set[asyncio.Task[None]] = set()
    unanswered: list[asyncio.StreamWriter] = []

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal seen
        seen += 1
        if seen > 1:
            unanswered.append(writer)
            stalled.set()
            return
        up_reader, up_writer = await asyncio.open_connection(host, port)
        for task in (pipe(reader, up_writer), pipe(up_reader, writer)):
            relay = asyncio.create_task(task)
            relays.add(relay)
            relay.add_done_callback(relays.discard)

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    front = server.sockets[0].getsockname()[1]
    try:
        yield psycopg.conninfo.make_conninfo(dsn, host="127.0.0.1", port=front), stalled
    finally:
        server.close()
        for writer in unanswered:
            writer.close()
        for relay in list(relays):
            relay.cancel()


def pool_tasks() -> list[asyncio.Task[object]]:
    return [t for t in asyncio.all_tasks() if t.get_name().startswith("pool-")]


async def test_a_cancelled_open_closes_its_pool(pg_dsn: str, schema: str) -> None:
    apply_migrations(pg_dsn, schema)
    async with stalling_after_first(pg_dsn) as (dsn, stalled):
        opening = asyncio.create_task(Store.open(dsn, schema))
        await stalled.wait()
        opening.cancel()
        with pytest.raises(asyncio.CancelledError):
            await opening
    # the pool's worker was connecting: it ends once its connection is refused, as it
    # was told to stop (left open, it would wait for more work forever)
    _, pending = await asyncio.wait(pool_tasks(), timeout=POOL_WORKER_END_SECONDS)
    assert not pending, "no pool worker outlives the cancelled open"
