"""A primary and a standby from Debian's binaries, and the store across a promotion.

``StandbyPair`` (``verification.standby``) builds two private clusters; these tests
kill the primary with SIGKILL, promote the standby, and look at what users would: what
survived, where a multi-host conninfo now connects, whether the store goes on by itself,
and how a COMMIT whose answer was lost with the primary is settled on the new one.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from engine.store.embedded import EmbeddedPostgresError, find_pg_bin
from engine.store.errors import CommitUnknown, DuplicateTransition, StoreError
from engine.store.migrations import apply_migrations
from engine.store.store import Deadlines, Store
from tests.integration.transition_builders import catalog, ledger
from verification.standby import StandbyPair

try:
    find_pg_bin()
except EmbeddedPostgresError:
    if os.environ.get("WAYLINE_TEST_DSN"):
        pytest.skip("PostgreSQL server binaries are not installed here", allow_module_level=True)

CATALOG = catalog()
SCHEMA = "failover"
RECOVER_SECONDS = 20.0
"""How long the store may take to reach the promoted server."""
APPLY_DELAY = 1.0
LATER = timedelta(seconds=1)


@pytest.fixture
def sync_pair(tmp_path: Path) -> Iterator[StandbyPair]:
    with StandbyPair.start(tmp_path, synchronous=True) as pair:
        yield pair


def rows(dsn: str, table: str = "t") -> list[int]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        query = sql.SQL("SELECT x FROM {} ORDER BY x").format(sql.Identifier(table))
        return [x for (x,) in conn.execute(query).fetchall()]


def write(dsn: str, *statements: str) -> int:
    """Run ``statements`` on whichever server ``dsn`` connects to; that server's port."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement.encode())
        return conn.info.port


def port_of(dsn: str) -> int:
    return int(psycopg.conninfo.conninfo_to_dict(dsn)["port"])


def test_a_synchronous_standby_takes_over_with_every_acknowledged_commit(
    sync_pair: StandbyPair,
) -> None:
    first = write(sync_pair.multi_host_dsn, "CREATE TABLE t (x int)", "INSERT INTO t VALUES (1)")
    assert first == port_of(sync_pair.primary_dsn)
    sync_pair.kill_primary()
    sync_pair.promote()
    for dsn in (sync_pair.multi_host_dsn, sync_pair.multi_host_url):
        assert write(dsn, "SELECT 1") == port_of(sync_pair.standby_dsn)
    write(sync_pair.multi_host_url, "INSERT INTO t VALUES (2)")
    assert rows(sync_pair.standby_dsn) == [1, 2]


def test_an_asynchronous_standby_loses_what_it_was_never_sent(tmp_path: Path) -> None:
    with StandbyPair.start(tmp_path, synchronous=False) as pair:
        write(pair.multi_host_dsn, "CREATE TABLE t (x int)", "INSERT INTO t VALUES (1)")
        pair.wait_caught_up()
        pair.pause_shipping()
        write(pair.multi_host_dsn, "INSERT INTO t VALUES (2)")  # acknowledged at once
        assert rows(pair.primary_dsn) == [1, 2]
        pair.kill_primary()
        pair.promote()
        assert rows(pair.multi_host_dsn) == [1]


def test_an_apply_delay_makes_a_replica_that_lags_then_catches_up(tmp_path: Path) -> None:
    with StandbyPair.start(tmp_path, synchronous=True, apply_delay=APPLY_DELAY) as pair:
        write(pair.primary_dsn, "CREATE TABLE t (x int)")
        pair.wait_caught_up()
        started = time.monotonic()
        write(pair.primary_dsn, "INSERT INTO t VALUES (1)")  # synchronous: flushed, not applied
        assert rows(pair.standby_dsn) == []
        pair.wait_caught_up()
        assert rows(pair.standby_dsn) == [1]
        assert time.monotonic() - started >= APPLY_DELAY * 0.9


PAUSES = 20
"""Pauses of shipping tried before giving up on one that stops inside a record: some
stop at a record's end instead (12 runs on a loaded 2-core host took 1 to 4 tries, 20
in all)."""
STUCK = """
SELECT pg_last_wal_replay_lsn() < pg_last_wal_receive_lsn() FROM pg_stat_activity
WHERE backend_type = 'startup' AND wait_event = 'RecoveryRetrieveRetryInterval'
"""
"""Once the standby's startup process waits for WAL that will not come: whether what
it received ends inside a record (replayed up to its start, received past it)."""


BATCH = 100_000
FILL = f"INSERT INTO filled SELECT g, repeat('x', 200) FROM generate_series(1, {BATCH}) g"
"""A batch of about 25 MB of WAL. Between commits the primary flushes its WAL, and so
sends it, where the WAL writer's writes end, mostly inside a record (a commit flushes
up to its own record's end, so small batches would stop the sending at a record's end)."""


@contextmanager
def writing(dsn: str) -> Iterator[None]:
    """A table filled on ``dsn`` batch after batch in a thread, while the block runs:
    WAL the standby receives in pieces that end wherever its sending stopped."""
    stop, first = threading.Event(), threading.Event()

    def fill() -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE filled (x int, t text)")
            while not stop.is_set():
                conn.execute(FILL)
                first.set()

    writer = threading.Thread(target=fill)
    writer.start()
    try:
        assert first.wait(RECOVER_SECONDS), "the primary wrote nothing"
        yield
    finally:
        stop.set()
        writer.join()


def stuck(pair: StandbyPair) -> bool:
    """Whether the paused standby's WAL ends inside a record, once it waits for more."""
    with psycopg.connect(pair.standby_dsn, autocommit=True) as conn:
        deadline = time.monotonic() + RECOVER_SECONDS
        while (row := conn.execute(STUCK).fetchone()) is None:
            assert time.monotonic() < deadline, "the standby did not wait for more WAL"
            time.sleep(0.02)
    return row[0]


def resume_shipping(pair: StandbyPair, conninfo: str) -> None:
    with psycopg.connect(pair.standby_dsn, autocommit=True) as conn:
        setting = sql.SQL("ALTER SYSTEM SET primary_conninfo = {}")
        conn.execute(setting.format(sql.Literal(conninfo)))
        conn.execute("SELECT pg_reload_conf()")
    pair.wait_streaming()


def test_a_standby_whose_wal_ends_inside_a_record_is_promoted(tmp_path: Path) -> None:
    """A WAL receiver stopped while a record was being sent leaves the standby with WAL
    it can never replay, since the record's end never comes: promotion must not wait
    for it (``StandbyPair.promote`` did, until it gave up, failing an F1 drill)."""
    with StandbyPair.start(tmp_path, synchronous=False) as pair, writing(pair.primary_dsn):
        pair.wait_caught_up()  # the first batch, at least, is the standby's
        with psycopg.connect(pair.standby_dsn, autocommit=True) as conn:
            conninfo = conn.execute("SHOW primary_conninfo").fetchone()[0]
        for _ in range(PAUSES):
            pair.pause_shipping()
            if stuck(pair):
                break
            resume_shipping(pair, conninfo)
        else:
            pytest.fail(f"none of {PAUSES} pauses stopped the standby inside a record")
        pair.promote()
        with psycopg.connect(pair.standby_dsn, autocommit=True) as conn:
            assert conn.execute("SELECT count(*) FROM filled").fetchone()[0] >= BATCH


async def start(store: Store, instance_id: str) -> None:
    flow = CATALOG.flow(CATALOG.pair, instance_id)
    await store.commit(flow.start({"order": instance_id}))


async def until_committed(store: Store, instance_id: str) -> int:
    """Start ``instance_id`` until it commits; how many attempts failed, each known not
    to have committed (an unknown outcome fails the test)."""
    return await until_written(lambda: start(store, instance_id))


async def until_written(write: Callable[[], Awaitable[object]]) -> int:
    """``write`` until it commits; how many tries failed, each known not to have
    committed (an unknown outcome fails the test)."""
    failed, deadline = 0, time.monotonic() + RECOVER_SECONDS
    while True:
        try:
            await write()
            return failed
        except CommitUnknown:
            raise
        except StoreError:
            failed += 1
            assert time.monotonic() < deadline, "the store never reached the promoted server"
            await asyncio.sleep(0.05)


async def warm(store: Store, connections: int) -> None:
    """Hold ``connections`` pooled connections at once, so that many are idle after."""

    async def hold() -> None:
        async with store.connection() as conn:
            await conn.execute("SELECT pg_sleep(0.05)")

    await asyncio.gather(*(hold() for _ in range(connections)))


async def test_a_store_on_a_multi_host_conninfo_follows_the_promotion(
    sync_pair: StandbyPair,
) -> None:
    apply_migrations(sync_pair.multi_host_dsn, SCHEMA)
    store = await Store.open(sync_pair.multi_host_url, SCHEMA, max_size=6)
    try:
        await start(store, "before")
        await warm(store, 6)
        sync_pair.kill_primary()
        await asyncio.to_thread(sync_pair.promote)
        failed = await until_committed(store, "after")
        assert failed <= 1, "each dead pooled connection failed an operation of its own"
        async with store.connection() as conn:
            assert conn.info.port == port_of(sync_pair.standby_dsn)
            found = await (await conn.execute("SELECT instance_id FROM instances")).fetchall()
        assert sorted(found) == [("after",), ("before",)]
    finally:
        await store.close()


@pytest.mark.parametrize("rebuilt", [False, True], ids=["nothing-under-its-id", "a-rebuilt-start"])
async def test_a_commit_lost_with_the_primary_is_settled_not_committed_on_the_promoted_one(
    sync_pair: StandbyPair, rebuilt: bool
) -> None:
    """The COMMIT waits for the standby, which receives nothing, when the primary dies:
    the new primary never saw the transaction's id and soon gives it to another
    transaction, which commits. The settlement must not believe that one's status, whether
    the ledger lacks the lost transition or holds another under its id (``rebuilt``: the
    work was claimed again on the promoted server and the same attempt started there,
    at another time, as a drill's second worker did)."""
    apply_migrations(sync_pair.multi_host_dsn, SCHEMA)
    store = await Store.open(sync_pair.multi_host_dsn, SCHEMA)
    flow = CATALOG.flow(CATALOG.pair, "lost")
    begun = flow.start({"order": "lost"})
    step = flow.attempt_started(flow.after(begun), "x")
    again = flow.attempt_started(flow.after(begun), "x", at=step.events[0].occurred_at + LATER)
    try:
        await store.commit(begun)
        sync_pair.wait_caught_up()
        sync_pair.pause_shipping()
        conn = await psycopg.AsyncConnection.connect(
            sync_pair.primary_dsn, options=f"-c search_path={SCHEMA}"
        )
        await store.stage(conn, step)
        xid = (await (await conn.execute("SELECT pg_current_xact_id()::text")).fetchone())[0]
        committing = asyncio.create_task(conn.commit())
        await waiting_for_the_standby(sync_pair.primary_dsn)
        sync_pair.kill_primary()
        with pytest.raises(psycopg.Error):
            await committing
        await asyncio.to_thread(sync_pair.promote)
        if rebuilt:
            await until_written(lambda: store.commit(again))
        await until_committed(store, "other")  # the new primary hands the same xids out
        await reuse(sync_pair.standby_dsn, xid)
        if rebuilt:
            with pytest.raises(DuplicateTransition):
                await store.settle_commit([step], xid)
        else:
            with pytest.raises(StoreError, match="safe to retry"):
                await store.settle_commit([step], xid)
            await store.commit(step)
        async with store.connection() as check:
            assert len((await ledger(check, "lost")).transitions) == 2
    finally:
        await store.close()


async def waiting_for_the_standby(dsn: str) -> None:
    """Until a COMMIT on ``dsn`` waits for the synchronous standby to confirm it."""
    query = "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'"
    deadline = time.monotonic() + RECOVER_SECONDS
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        while not (await (await conn.execute(query)).fetchone())[0]:
            assert time.monotonic() < deadline, "no COMMIT waited for the standby"
            await asyncio.sleep(0.02)


async def reuse(dsn: str, xid: str) -> None:
    """Commit transactions on ``dsn`` until one has been given the id ``xid``."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        while True:
            taken = (await (await conn.execute("SELECT pg_current_xact_id()::text")).fetchone())[0]
            if int(taken) >= int(xid):
                return


UNCONFIRMED_DEADLINE = 1.0
"""The store's client-side deadline in the test that lets it run out on a COMMIT."""


@pytest.mark.parametrize("alone", [True, False], ids=["a-lone-write", "a-transaction"])
async def test_a_commit_its_synchronous_standby_never_confirmed_is_not_settled_committed(
    sync_pair: StandbyPair, alone: bool
) -> None:
    """The store's deadline runs out while the COMMIT waits for the standby, which
    receives nothing. Ending that wait (psycopg cancels the statement; the settlement of
    a lone write ends its session) makes PostgreSQL commit the transaction on the
    primary alone, visible there but not on the standby, so it is lost if the standby
    takes over: its outcome is unknown, never committed."""
    apply_migrations(sync_pair.multi_host_dsn, SCHEMA)
    deadlines = Deadlines(operation=UNCONFIRMED_DEADLINE)
    store = await Store.open(sync_pair.multi_host_dsn, SCHEMA, deadlines=deadlines)
    flow = CATALOG.flow(CATALOG.pair, "unconfirmed")
    begun = flow.start({"order": "unconfirmed"})
    step = flow.attempt_started(flow.after(begun), "x")
    companion = CATALOG.flow(CATALOG.pair, "companion").start({"order": "companion"})
    try:
        await store.commit(begun)
        sync_pair.wait_caught_up()
        sync_pair.pause_shipping()
        with pytest.raises(CommitUnknown):
            await store.commit_all([step] if alone else [step, companion])
    finally:
        await store.close()
    sync_pair.kill_primary()
    await asyncio.to_thread(sync_pair.promote)
    async with await psycopg.AsyncConnection.connect(
        sync_pair.standby_dsn, autocommit=True, options=f"-c search_path={SCHEMA}"
    ) as check:
        assert len((await ledger(check, "unconfirmed")).transitions) == 1
