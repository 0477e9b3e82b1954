"""Settling a write sent as one autocommit statement, by the session that ran it.

Such a write has no transaction id the client knew before it committed, so when its
answer is lost the store ends the backend that ran it (named by pid and start time),
waits until it has exited, and then believes the ledger (``commits.settle_session``).
Here the "lost answer" is a write still running (blocked on a row lock), one that
committed, and a pid whose start time no longer matches (a reused pid, never ended).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta

import psycopg
import pytest
from psycopg import sql

from engine.model.transitions import Transition
from engine.store import commits, sessions
from engine.store.errors import CommitOutcome, StoreError
from engine.store.store import Store
from tests.integration.transition_builders import catalog, ledger, rows_of

CATALOG = catalog()
WAIT_SECONDS = 10.0


@pytest.fixture
def store(db_store: Store) -> Store:
    """Events at PostgreSQL's time (settlement needs no clock of the test's)."""
    return db_store


@pytest.fixture
async def victim(pg_dsn: str, schema: str) -> AsyncIterator[psycopg.AsyncConnection]:
    """A connection the store would have pooled: its session recorded, in autocommit."""
    async with await psycopg.AsyncConnection.connect(pg_dsn) as conn:
        await sessions.remember(conn)
        await conn.set_autocommit(True)
        await conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        yield conn


async def started(store: Store, instance_id: str) -> tuple[Transition, Transition]:
    flow = CATALOG.flow(CATALOG.pair, instance_id)
    start = flow.start({"order": instance_id})
    await store.commit(start)
    return start, flow.attempt_started(flow.after(start), "x")


async def waiting_on_a_lock(aconn: psycopg.AsyncConnection, pid: int) -> None:
    query = "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = %s"
    while not (await (await aconn.execute(query, [pid])).fetchone())[0]:
        await asyncio.sleep(0.01)


async def alive(conn: psycopg.AsyncConnection) -> bool:
    try:
        await conn.execute("SELECT 1")
    except psycopg.OperationalError:
        return False
    return True


async def test_a_write_still_running_is_ended_and_settled_not_committed(
    store: Store, victim: psycopg.AsyncConnection, aconn: psycopg.AsyncConnection, pg_dsn: str
) -> None:
    start, step = await started(store, "blocked")
    async with await psycopg.AsyncConnection.connect(pg_dsn) as holder:
        await holder.execute(
            sql.SQL("SELECT 1 FROM {}.instances WHERE instance_id = %s FOR UPDATE").format(
                sql.Identifier(store.schema)
            ),
            [step.instance_id],
        )
        write = asyncio.create_task(commits.stage(victim, step))
        await asyncio.wait_for(waiting_on_a_lock(aconn, victim.info.backend_pid), WAIT_SECONDS)

        with pytest.raises(StoreError) as caught:
            await commits.settle_session(store.pool.connection, [step], sessions.of(victim))

        assert caught.value.outcome is CommitOutcome.NOT_COMMITTED
        with pytest.raises(psycopg.OperationalError):
            await asyncio.wait_for(write, WAIT_SECONDS)  # its session was ended
        await holder.rollback()
    assert (await ledger(aconn, step.instance_id)).rows == rows_of(start)
    assert not (await store.commit(step)).replayed


async def test_a_write_that_committed_settles_as_committed(
    store: Store, victim: psycopg.AsyncConnection, aconn: psycopg.AsyncConnection
) -> None:
    start, step = await started(store, "done")
    assert (await commits.stage(victim, step))[0]  # committed as it ended: autocommit

    await commits.settle_session(store.pool.connection, [step], sessions.of(victim))

    assert not await alive(victim)
    assert (await ledger(aconn, step.instance_id)).rows == rows_of(start, step)


async def test_a_pid_that_names_a_later_session_is_left_alone(
    store: Store, victim: psycopg.AsyncConnection, aconn: psycopg.AsyncConnection
) -> None:
    """A recorded session whose backend exited: its pid may serve a new session now."""
    start, step = await started(store, "reused")
    recorded = sessions.of(victim)
    assert recorded is not None
    earlier = sessions.Session(recorded.pid, recorded.started - timedelta(hours=1))

    with pytest.raises(StoreError) as caught:
        await commits.settle_session(store.pool.connection, [step], earlier)

    assert caught.value.outcome is CommitOutcome.NOT_COMMITTED
    assert await alive(victim)
    assert (await ledger(aconn, step.instance_id)).rows == rows_of(start)


async def test_a_session_that_exits_as_it_is_being_ended_counts_as_gone(
    pg_dsn: str, victim: psycopg.AsyncConnection, aconn: psycopg.AsyncConnection
) -> None:
    """The lookup saw the backend, which was gone by the time it was signalled: that
    is an ended session, not one still running (the race of a write's own exit)."""
    recorded = sessions.of(victim)
    assert recorded is not None
    async with await psycopg.AsyncConnection.connect(pg_dsn) as settler:
        await settler.execute("SELECT count(*) FROM pg_stat_activity")  # caches the view
        await victim.close()
        await asyncio.wait_for(exited(aconn, recorded.pid), WAIT_SECONDS)

        assert await sessions.end(settler, recorded)


async def exited(aconn: psycopg.AsyncConnection, pid: int) -> None:
    query = "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = %s)"
    while (await (await aconn.execute(query, [pid])).fetchone())[0]:
        await asyncio.sleep(0.01)
