"""A read-only store (``Store.open(read_only=True)``), as the studio opens on a replica:
it reads, and refuses every write even when its address names a primary."""

from __future__ import annotations

import psycopg
import pytest

from engine import Queries, Store
from engine.store import workers
from engine.store.errors import StoreError


async def test_a_read_only_store_reads_and_refuses_writes_on_a_primary(
    pg_dsn: str, schema: str, db_store: Store
) -> None:
    await workers.heartbeat(db_store, "w-1", ["t"], 1, "host", 1)  # the writable one writes
    store = await Store.open(pg_dsn, schema, read_only=True, max_size=1)
    try:
        queries = Queries(store)
        assert [w.worker_id for w in await queries.workers()] == ["w-1"]
        position = await queries.wal_position()
        assert not position.standby and position.lsn and position.lsn > 0
        with pytest.raises(StoreError) as refused:
            await workers.heartbeat(store, "w-2", ["t"], 1, "host", 2)
        assert isinstance(refused.value.__cause__, psycopg.errors.ReadOnlySqlTransaction)
    finally:
        await store.close()
    assert [w.worker_id for w in await Queries(db_store).workers()] == ["w-1"]
