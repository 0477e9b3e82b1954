"""The store's seams (``engine.store.seams``): a statement filter every statement passes
through, prepared ones included, and hooks that see every lease holder's write; a
store opened without them keeps psycopg's own cursors."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from datetime import timedelta

import psycopg
import pytest
from psycopg.abc import Query

from engine.store import leases
from engine.store.clock import DatabaseClock
from engine.store.leases import LeaseFence
from engine.store.seams import LeaseWrites, Row, StoreHooks
from engine.store.statements import leases as lease_sql
from engine.store.store import Store
from tests.integration.test_fenced_sets import run_set
from tests.integration.test_fenced_writes import LEASE, a_succeeds_and_b_starts, running_a

PROBE = "SELECT 1 AS probe"


class Recording:
    """A statement filter that records what it sees and sends ``PROBE`` as 2."""

    def __init__(self) -> None:
        self.seen: list[Query] = []

    def __call__(self, query: Query) -> Query:
        self.seen.append(query)
        return "SELECT 2 AS probe" if query == PROBE else query


class Watching(StoreHooks):
    """Hooks that record every lease holder's write with its answer."""

    def __init__(self) -> None:
        self.writes: list[tuple[str, bool, bool]] = []

    async def lease_writes(self, sent: LeaseWrites) -> Sequence[Row | None]:
        rows = await sent.send()
        answered = zip(sent.writes, rows, strict=True)
        self.writes += [(w.statement, sent.alone, r is not None) for w, r in answered]
        return rows


@pytest.fixture
async def seamed(pg_dsn: str, schema: str) -> AsyncIterator[tuple[Store, Recording, Watching]]:
    statements, hooks = Recording(), Watching()
    store = await Store.open(
        pg_dsn, schema, clock=DatabaseClock(), statement_filter=statements, hooks=hooks
    )
    try:
        yield store, statements, hooks
    finally:
        await store.close()


async def test_a_store_without_seams_keeps_psycopg_cursors(db_store: Store) -> None:
    async with db_store.connection() as conn:
        assert type(conn.cursor()) is psycopg.AsyncCursor


async def test_the_statement_filter_decides_what_is_sent(
    seamed: tuple[Store, Recording, Watching],
) -> None:
    store, statements, _ = seamed
    async with store.reading() as conn:
        assert (await (await conn.execute(PROBE)).fetchone()) == (2,)
    async with await store.dedicated() as conn:
        assert (await (await conn.execute(PROBE)).fetchone()) == (2,)
    assert statements.seen.count(PROBE) == 2


async def test_a_lease_holders_lone_write_goes_through_the_hooks(
    seamed: tuple[Store, Recording, Watching],
) -> None:
    store, statements, hooks = seamed
    _, lease = await running_a(store, "seams-lone")
    hooks.writes.clear()

    await leases.renew(store, lease, timedelta(seconds=10))

    assert hooks.writes == [(lease_sql.RENEW_LEASE, False, True)]
    assert lease_sql.RENEW_LEASE in statements.seen


async def test_a_groups_statements_pass_the_filter_before_they_are_prepared(
    seamed: tuple[Store, Recording, Watching],
) -> None:
    store, statements, hooks = seamed
    flow, lease = await running_a(store, "seams-set")
    outcome, next_id = await a_succeeds_and_b_starts(store, flow)
    fence = LeaseFence(lease, lease_next=next_id, lease_for=LEASE)
    hooks.writes.clear()

    async with store.connection() as conn:
        [row] = await run_set(conn, store, [(outcome, fence)])

    assert row is not None
    assert lease_sql.FENCED_SET in statements.seen
    assert [(alone, answered) for _, alone, answered in hooks.writes] == [(False, True)]
