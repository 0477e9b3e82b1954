"""The store's clock follows PostgreSQL's and is never ahead of it.

A process stamps the work it makes due "now" with its own estimate of the server's
clock, and a worker's claim compares that with the server's clock. An estimate ahead
of the server's by d hides such work from every claim for d: the NOTIFY announcing it
wakes a worker whose claim finds nothing, and the work waits for a later poll.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta

from psycopg.abc import Query

from engine.store import leases
from engine.store.clock import DatabaseClock
from engine.store.statements.sessions import SERVER_TIME
from engine.store.store import Deadlines, Store
from tests.integration.factories import seed_work

SLOW_READING_SECONDS = 1.0
SLOW_SERVER_TIME = f"SELECT clock_timestamp() FROM pg_sleep({SLOW_READING_SECONDS})"
"""The round trip takes ``SLOW_READING_SECONDS`` before the server reads its clock, as a
fresh connection's first statement does while the server loads its catalogs. A clock
synced to the middle of that round trip would be half of it ahead."""


class FirstReadingSlow:
    """A statement filter that makes the store's first clock reading slow."""

    def __init__(self) -> None:
        self.slowed = 0

    def __call__(self, statement: Query) -> Query:
        if statement == SERVER_TIME and not self.slowed:
            self.slowed += 1
            return SLOW_SERVER_TIME
        return statement


async def server_now(store: Store) -> datetime:
    async with store.connection() as conn:
        return (await (await conn.execute(SERVER_TIME)).fetchone())[0]


async def test_a_slow_first_clock_reading_does_not_put_the_store_ahead(
    pg_dsn: str, schema: str
) -> None:
    slow = FirstReadingSlow()
    store = await Store.open(pg_dsn, schema, clock=DatabaseClock(), statement_filter=slow)
    try:
        assert slow.slowed == 1
        for _ in range(20):
            ours = store.now()
            assert ours <= await server_now(store)
    finally:
        await store.close()


async def test_work_a_store_makes_due_now_is_claimable_at_once(
    pg_dsn: str, schema: str, db_store: Store
) -> None:
    slow = FirstReadingSlow()
    store = await Store.open(pg_dsn, schema, clock=DatabaseClock(), statement_filter=slow)
    try:
        (work_id,) = await seed_work(store, 1)
        claimed = await leases.claim(db_store, "worker-1", timedelta(seconds=30), 1)
        assert [lease.work_id for lease in claimed] == [work_id]
    finally:
        await store.close()


async def test_a_store_follows_the_server_clock_when_its_sync_gets_old(
    pg_dsn: str, schema: str
) -> None:
    always_old = Deadlines(clock_resync=0.0)
    store = await Store.open(pg_dsn, schema, clock=DatabaseClock(), deadlines=always_old)
    try:
        # As if the server's clock had been stepped back a minute since the sync.
        assert isinstance(store.clock, DatabaseClock)
        store.clock.sync(await server_now(store) + timedelta(minutes=1), time.monotonic())
        store.now()  # a reading of an old sync starts a new one
        assert store.clock_sync is not None
        await store.clock_sync
        assert store.now() <= await server_now(store)
    finally:
        await store.close()
