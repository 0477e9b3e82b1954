"""Settling a COMMIT that wrote no transition, only its lease's completion.

Such a commit (an exact replay, an obsolete step) leaves no ledger row to check the
transaction id's answer against, and after a failover that id may have been given out
again and committed by another transaction. So the store settles it by what it wrote:
the lease's work row, completed under its token or not (``commits.settle``).
"""

from __future__ import annotations

import psycopg
import pytest

from engine.store import leases
from engine.store.errors import StoreError
from engine.store.leases import LeaseFence
from engine.store.rows import WorkState
from engine.store.store import Store
from tests.integration.test_fenced_writes import running_a


@pytest.fixture
def store(db_store: Store) -> Store:
    return db_store  # leases are taken on the database's clock


async def committed_xid(store: Store) -> str:
    """The id of a transaction that committed and wrote nothing of the lease's."""
    async with store.connection() as conn:
        row = await (await conn.execute("SELECT pg_current_xact_id()::text")).fetchone()
        await conn.commit()
    return row[0]


async def test_an_id_another_transaction_committed_does_not_settle_a_lease_only_commit(
    store: Store,
) -> None:
    """As after a failover: the id says committed, but the lease is still held, not
    completed, so the commit did not take effect and the holder may write again."""
    _, lease = await running_a(store, "lease-reused")
    fence = LeaseFence(lease, finish=True)
    with pytest.raises(StoreError, match="did not take effect"):
        await store.settle_commit([], await committed_xid(store), leases.finished_by(fence))
    await leases.commit(store, [], fence)  # the lease was still this holder's


async def test_a_lease_only_commit_that_completed_its_lease_is_settled_committed(
    store: Store, pg_dsn: str, schema: str
) -> None:
    """The precise side: a commit that did complete the lease is not called lost."""
    _, lease = await running_a(store, "lease-done")
    fence = LeaseFence(lease, finish=True)
    async with store.connection() as conn:
        await leases.stage(conn, store, [], fence)
        xid = (await (await conn.execute("SELECT pg_current_xact_id()::text")).fetchone())[0]
        await conn.commit()
    await store.settle_commit([], xid, leases.finished_by(fence))
    async with await psycopg.AsyncConnection.connect(pg_dsn) as check:
        query = f"SELECT state FROM {schema}.work WHERE work_id = %s"
        (state,) = await (await check.execute(query, [lease.work_id])).fetchone()
    assert state == WorkState.COMPLETED
