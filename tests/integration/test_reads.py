"""History pages, bounded inspection, export and instance lists against a real server."""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta

import psycopg
import pytest
from psycopg.abc import Query
from psycopg.pq import TransactionStatus

from engine.decide.operator_actions import Action
from engine.model.events import EventKind
from engine.model.instance import InstanceStatus
from engine.store import reads
from engine.store.errors import CorruptStore, HistoryLimitExceeded, InstanceNotFound
from engine.store.statements import instances as instance_sql
from engine.store.store import Store
from tests.integration.factories import open_store
from tests.integration.transition_builders import BASE_TIME, Catalog, catalog


@pytest.fixture
def store(default_store: Store) -> Store:
    return default_store


@pytest.fixture
def defs() -> Catalog:
    return catalog()


async def _paused_and_resumed(store: Store, defs: Catalog, instance_id: str, rounds: int) -> int:
    """Commit an instance whose history grows by two events per pause/resume round."""
    flow = defs.flow(defs.single, instance_id)
    start = flow.start({"n": 1})
    await store.commit(start)
    state = flow.after(start)
    for i in range(rounds):
        for action in (Action.PAUSE, Action.RESUME):
            transition = flow.command(state, f"{action.value}-{i}", action)
            await store.commit(transition)
            state = await flow.load(store)
    return state.sequence


async def test_pages_are_contiguous_and_has_more_only_when_an_event_follows(
    store: Store, defs: Catalog
) -> None:
    total = await _paused_and_resumed(store, defs, "paged", 3)  # 2 + 3 * 4 = 14 events
    assert total == 14
    seen, after, pages = [], 0, 0
    while True:
        page = await reads.history_page(store, "paged", after, limit=7)
        seen += [e.sequence for e in page.events]
        pages += 1
        if not page.has_more:
            break
        after = page.next_after
    assert seen == list(range(1, 15))
    assert pages == 2  # an exactly full last page does not claim more
    last = await reads.history_page(store, "paged", 7, limit=7)
    assert not last.has_more and last.next_after is None


async def test_filtered_pages_narrow_by_kind_and_step(store: Store, defs: Catalog) -> None:
    await _paused_and_resumed(store, defs, "filtered", 2)
    audits = await reads.history_page(store, "filtered", kinds=[EventKind.PAUSED])
    assert [e.kind for e in audits.events] == [EventKind.PAUSED, EventKind.PAUSED]
    scheduled = await reads.history_page(store, "filtered", step="a")
    assert [e.kind for e in scheduled.events] == [EventKind.ACTIVITY_SCHEDULED]


async def test_concurrent_appends_never_shift_a_cursor(store: Store, defs: Catalog) -> None:
    await _paused_and_resumed(store, defs, "growing", 1)
    first = await reads.history_page(store, "growing", 0, limit=3)
    await _append_round(store, defs, "growing")
    second = await reads.history_page(store, "growing", first.next_after, limit=3)
    assert second.events[0].sequence == first.events[-1].sequence + 1


async def _append_round(store: Store, defs: Catalog, instance_id: str) -> None:
    flow = defs.flow(defs.single, instance_id)
    state = await flow.load(store)
    for action in (Action.PAUSE, Action.RESUME):
        await store.commit(flow.command(state, f"late-{action.value}", action))
        state = await flow.load(store)


async def test_inspection_replays_through_pages_and_stops_at_its_bound(
    store: Store, defs: Catalog
) -> None:
    total = await _paused_and_resumed(store, defs, "long", 2)
    state = await reads.inspect(store, defs.registry, "long")
    assert state.sequence == total and state.status is InstanceStatus.RUNNING
    with pytest.raises(HistoryLimitExceeded, match="more than 5 events"):
        await reads.inspect(store, defs.registry, "long", max_events=5)


async def test_export_streams_every_event_in_order(store: Store, defs: Catalog) -> None:
    total = await _paused_and_resumed(store, defs, "exported", 2)
    events = [e async for e in reads.export_history(store, "exported", page_size=3)]
    assert [e.sequence for e in events] == list(range(1, total + 1))


async def test_missing_instance_and_corrupt_history_are_reported(
    store: Store, defs: Catalog
) -> None:
    with pytest.raises(InstanceNotFound):
        await reads.history_page(store, "nobody")
    await _paused_and_resumed(store, defs, "gappy", 1)
    async with store.connection() as conn:
        await conn.execute("DELETE FROM history WHERE instance_id = 'gappy' AND sequence = 3")
    with pytest.raises(CorruptStore, match="not contiguous at 3"):
        await reads.history_page(store, "gappy")


async def test_instance_lists_are_keyset_paged_and_filtered(store: Store, defs: Catalog) -> None:
    for i in range(5):
        flow = defs.flow(defs.single, f"inst-{i}")
        await store.commit(flow.start({"i": i}, at=BASE_TIME + timedelta(seconds=i)))
    ended = defs.flow(defs.single, "inst-2")
    await store.commit(ended.command(await ended.load(store), "stop", Action.TERMINATE))
    await store.commit(defs.flow(defs.pair, "pair-0").start())

    ids, cursor = [], None
    while True:
        page = await reads.list_instances(store, reads.InstanceView.ALL, cursor, limit=2)
        ids += [r.instance_id for r in page.rows]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert ids == ["inst-0", "pair-0", "inst-1", "inst-2", "inst-3", "inst-4"]

    active = await reads.list_instances(store, reads.InstanceView.ACTIVE)
    archived = await reads.list_instances(store, reads.InstanceView.ARCHIVED)
    assert "inst-2" not in [r.instance_id for r in active.rows]
    assert [r.instance_id for r in archived.rows] == ["inst-2"]
    assert archived.rows[0].status is InstanceStatus.TERMINATED
    only_pair = await reads.list_instances(store, definition_name=defs.pair.name)
    assert [r.instance_id for r in only_pair.rows] == ["pair-0"]
    terminated = await reads.list_instances(
        store, reads.InstanceView.ALL, status=InstanceStatus.TERMINATED
    )
    assert [r.instance_id for r in terminated.rows] == ["inst-2"]


async def test_page_bounds_are_checked_before_the_database(store: Store) -> None:
    with pytest.raises(ValueError, match="limit must be from 1 to 1000"):
        await reads.history_page(store, "x", limit=1001)
    with pytest.raises(ValueError, match="limit must be from 1 to 100"):
        await reads.list_instances(store, limit=0)


async def test_a_read_opens_no_transaction_and_the_connection_goes_back_transactional(
    pg_dsn: str, schema: str
) -> None:
    """Reads skip BEGIN and COMMIT; the same pooled connection then writes in a
    transaction again, even when the reader failed half-way."""
    async with open_store(pg_dsn, schema, max_size=1) as store:
        async with store.reading() as conn:
            await conn.execute("SELECT 1")
            assert conn.info.transaction_status is TransactionStatus.IDLE
        with pytest.raises(psycopg.errors.DivisionByZero):
            async with store.reading() as conn:
                await conn.execute("SELECT 1 / 0")
        async with store.connection() as conn:
            assert not conn.autocommit
            await conn.execute("SELECT 1")
            assert conn.info.transaction_status is TransactionStatus.INTRANS
            await conn.rollback()


async def test_an_instance_started_while_it_is_opened_is_read_as_started(
    pg_dsn: str, schema: str, defs: Catalog
) -> None:
    """Opening an instance reads its history, and asks whether it exists only when it
    found none. One started between the two statements (a start commits its row and
    its first events together) was taken for an instance without history, and the
    read said the store was corrupt (seen by a drill reading a successor as it started)."""
    start = defs.flow(defs.single, "racing").start({"n": 1})

    def commit_start() -> None:
        async def commit() -> None:
            async with open_store(pg_dsn, schema) as other:
                await other.commit(start)

        asyncio.run(commit())

    class StartsBetweenTheReads:
        """Commits the start, from another connection, as the reader asks whether the
        instance exists."""

        def __init__(self) -> None:
            self.started = False

        def __call__(self, statement: Query) -> Query:
            if statement == instance_sql.INSTANCE_EXISTS and not self.started:
                self.started = True
                starter = threading.Thread(target=commit_start)
                starter.start()
                starter.join()
            return statement

    between = StartsBetweenTheReads()
    reader = await Store.open(pg_dsn, schema, statement_filter=between)
    try:
        state = await reads.inspect(reader, defs.registry, "racing")
    finally:
        await reader.close()
    assert between.started, "the instance was not started between the two reads"
    assert state.sequence == start.committed_sequence
