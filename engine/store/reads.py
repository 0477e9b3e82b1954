"""Reading history and instances: keyset pages, bounded inspection, streaming export.

History pages ask for one row more than they return, so ``has_more`` is true only when
a later event exists (an exactly full page says false), and a cursor is a sequence
number, which concurrent appends never shift. Every page is re-validated: contiguous,
of the right instance. Instance lists are keyset-paged on (created_at, instance_id);
no page view counts rows or uses OFFSET.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

import psycopg

from engine.model.definitions import DefinitionRef
from engine.model.events import Event, EventKind
from engine.model.fan_out import FanOut
from engine.model.instance import Instance, InstanceStatus
from engine.model.limits import (
    MAX_HISTORY_PAGE_EVENTS,
    MAX_INSPECTION_HISTORY_EVENTS,
    MAX_PAGE_ITEMS,
)
from engine.model.registry import Registry
from engine.replay.fold import apply
from engine.replay.snapshots import restore
from engine.store import snapshots
from engine.store.errors import CorruptStore, HistoryLimitExceeded, InstanceNotFound
from engine.store.rows import event_from_row
from engine.store.statements import instances as sql
from engine.store.store import Store

MAX_INSTANCE_ROWS = 1_000


@dataclass(frozen=True)
class HistoryPage:
    events: tuple[Event, ...]
    has_more: bool

    @property
    def next_after(self) -> int | None:
        """The cursor for the next page, or None at the end."""
        return self.events[-1].sequence if self.has_more and self.events else None


class InstanceView(StrEnum):
    """Which instances a list shows: ended instances are archived in the commit that ends
    them, so the default list stays the ones still running."""

    ACTIVE = "active"
    ARCHIVED = "archived"
    ALL = "all"


@dataclass(frozen=True)
class InstanceRow:
    """What the instances table knows without replaying history."""

    instance_id: str
    definition: DefinitionRef
    status: InstanceStatus
    sequence: int
    tenant_id: str
    created_at: datetime
    updated_at: datetime
    archived_at: datetime | None


@dataclass(frozen=True)
class InstancePage:
    rows: tuple[InstanceRow, ...]
    next_cursor: tuple[Any, str] | None
    """The last row's sort value (a time, text or number) and id, when more follow."""


async def history_page(
    store: Store,
    instance_id: str,
    after: int = 0,
    limit: int = MAX_HISTORY_PAGE_EVENTS,
    kinds: list[EventKind] | None = None,
    step: str | None = None,
) -> HistoryPage:
    """Events after sequence ``after``, at most ``limit``; filters narrow the page."""
    if not 1 <= limit <= MAX_HISTORY_PAGE_EVENTS:
        raise ValueError(f"limit must be from 1 to {MAX_HISTORY_PAGE_EVENTS}")
    filtered = kinds is not None or step is not None
    async with store.reading() as conn:
        cur = await conn.execute(
            sql.HISTORY_PAGE,
            {
                "instance": instance_id,
                "after": after,
                "limit": limit + 1,
                "step": step,
                "kinds": None if kinds is None else [int(k) for k in kinds],
            },
        )
        rows = await cur.fetchall()
        if not rows:  # every instance has events: only an empty page needs the check
            await _require_instance(conn, instance_id)
    return _page(instance_id, after, rows, limit, contiguous=not filtered)


async def newest_events(
    store: Store,
    instance_id: str,
    limit: int,
    kinds: list[EventKind] | None = None,
    step: str | None = None,
) -> tuple[Event, ...]:
    """The newest ``limit`` events the filters keep, oldest first: the end of what
    ``history_page`` would page through, read without paging from the start (the
    latest attempts of a step retried many times). InstanceNotFound when there is no
    such instance."""
    if not 1 <= limit <= MAX_HISTORY_PAGE_EVENTS:
        raise ValueError(f"limit must be from 1 to {MAX_HISTORY_PAGE_EVENTS}")
    params = {
        "instance": instance_id,
        "limit": limit,
        "step": step,
        "kinds": None if kinds is None else [int(k) for k in kinds],
    }
    async with store.reading() as conn:
        rows = await (await conn.execute(sql.HISTORY_NEWEST, params)).fetchall()
        if not rows:
            await _require_instance(conn, instance_id)
    return tuple(event_from_row(r) for r in reversed(rows))


def _page(
    instance_id: str, after: int, rows: Sequence[tuple], limit: int, contiguous: bool
) -> HistoryPage:
    """The page of history ``rows`` (up to one more than ``limit``) after ``after``."""
    events = tuple(event_from_row(r) for r in rows[:limit])
    _check_page(instance_id, after, events, contiguous)
    return HistoryPage(events, has_more=len(rows) > limit)


async def _require_instance(conn: psycopg.AsyncConnection, instance_id: str) -> None:
    if (
        await (await conn.execute(sql.INSTANCE_EXISTS, {"instance": instance_id})).fetchone()
        is None
    ):
        raise InstanceNotFound(f"instance {instance_id} does not exist")


def _check_page(instance_id: str, after: int, events: tuple[Event, ...], contiguous: bool) -> None:
    previous = after
    for event in events:
        if (
            event.instance_id != instance_id
            or event.sequence <= previous
            or (contiguous and event.sequence != previous + 1)
        ):
            raise CorruptStore(
                f"history of instance {instance_id} is not contiguous at {previous + 1}"
            )
        previous = event.sequence


async def export_history(
    store: Store, instance_id: str, page_size: int = MAX_HISTORY_PAGE_EVENTS, after: int = 0
) -> AsyncIterator[Event]:
    """Every event after sequence ``after`` (by default all of them) in order, one page
    in memory at a time."""
    first = await history_page(store, instance_id, after, page_size)
    async for event in _onwards(store, instance_id, first, page_size):
        yield event


async def _onwards(
    store: Store, instance_id: str, page: HistoryPage, page_size: int = MAX_HISTORY_PAGE_EVENTS
) -> AsyncIterator[Event]:
    """The events of ``page`` and of every page after it, in order."""
    while True:
        for event in page.events:
            yield event
        if page.next_after is None:
            return
        page = await history_page(store, instance_id, page.next_after, page_size)


@dataclass(frozen=True)
class Loaded:
    """A replayed instance, and what opening it read: the snapshot it started from
    (``snapshot_sequence``, 0 when none was usable) and the events folded after it."""

    state: Instance
    snapshot_sequence: int
    events_read: int


async def inspect(
    store: Store,
    registry: Registry,
    instance_id: str,
    max_events: int = MAX_INSPECTION_HISTORY_EVENTS,
) -> Instance:
    """The replayed instance (``load``); HistoryLimitExceeded past ``max_events``."""
    return (await load(store, registry, instance_id, max_events)).state


async def load(
    store: Store,
    registry: Registry,
    instance_id: str,
    max_events: int = MAX_INSPECTION_HISTORY_EVENTS,
) -> Loaded:
    """Replay an instance from its newest usable snapshot through the events after it,
    or from its first event when it has none (``opening``); refused with
    HistoryLimitExceeded when it has more than ``max_events`` events."""
    opened = await opening(store, registry, instance_id)
    state, start = opened.state, opened.start
    _check_length(instance_id, start, max_events)
    async for event in _onwards(store, instance_id, opened.page):
        _check_length(instance_id, event.sequence, max_events)
        state = apply(registry, state, event)
    if state is None:
        raise CorruptStore(f"instance {instance_id} has no history")
    return Loaded(state, start, state.sequence - start)


@dataclass(frozen=True)
class Opening:
    """What opening an instance reads first: the state of its newest snapshot this build
    may use (None: none, so every event is folded) and the first page of history after
    it."""

    state: Instance | None
    page: HistoryPage

    @property
    def start(self) -> int:
        """The position the page follows: the snapshot's, or 0."""
        return 0 if self.state is None else self.state.sequence


async def opening(
    store: Store, registry: Registry, instance_id: str, limit: int = MAX_HISTORY_PAGE_EVENTS
) -> Opening:
    """The start of a cold load, in one round trip: the newest snapshot and the page of
    history after it are read by one statement (``snapshots.opening``). A snapshot this
    build may not use (``engine.replay.snapshots.restore``: another fold version, damage,
    a pin the registry cannot resolve) costs a second round trip, for the first page of
    the whole history instead."""
    async with store.reading() as conn:
        snapshot, rows = await snapshots.opening(conn, instance_id, limit + 1)
        if snapshot is None and not rows:
            await _require_instance(conn, instance_id)
            # It was started between the two statements (a start writes its row and its
            # first events in one transaction): read it as it is now. Taken for an
            # instance with no history, it was reported as a corrupt store.
            snapshot, rows = await snapshots.opening(conn, instance_id, limit + 1)
    if snapshot is None:
        return Opening(None, _page(instance_id, 0, rows, limit, contiguous=True))
    state = restore(registry, snapshot)
    if state is None:
        return Opening(None, await history_page(store, instance_id, 0, limit))
    return Opening(state, _page(instance_id, state.sequence, rows, limit, contiguous=True))


def _check_length(instance_id: str, sequence: int, max_events: int) -> None:
    if sequence > max_events:
        raise HistoryLimitExceeded(
            f"instance {instance_id} has more than {max_events} "
            "events; continue it as new to keep it inspectable"
        )


async def get_instance(store: Store, instance_id: str) -> InstanceRow:
    async with store.reading() as conn:
        row = await (await conn.execute(sql.INSTANCE_ROW, {"instance": instance_id})).fetchone()
    if row is None:
        raise InstanceNotFound(f"instance {instance_id} does not exist")
    return _instance_row(row)


async def list_instances(
    store: Store,
    view: InstanceView = InstanceView.ACTIVE,
    after: tuple[Any, str] | None = None,
    limit: int = MAX_PAGE_ITEMS,
    definition_name: str | None = None,
    definition_version: str | None = None,
    status: InstanceStatus | None = None,
    tenant: str | None = None,
    instance_id: str | None = None,
    started_from: datetime | None = None,
    started_before: datetime | None = None,
    instance_prefixes: Sequence[str] | None = None,
    sort: str = "started",
    descending: bool = False,
) -> InstancePage:
    """One keyset page of instances, oldest first unless ``sort`` (a key of
    ``INSTANCE_SORT_COLUMNS``) and ``descending`` say otherwise, with optional filters.

    ``started_from`` (inclusive) and ``started_before`` (exclusive) bound the creation
    time, which is the leading column of every instance index after its filter, so a
    range is an index range, never a scan of older rows. ``instance_id`` matches one id,
    ``instance_prefixes`` every id that starts with one of them. The cursor is the last row's sort
    value and id (``after``), the position the next page starts strictly after.
    """
    if sort not in sql.INSTANCE_SORT_COLUMNS:
        raise ValueError(f"sort is one of {', '.join(sql.INSTANCE_SORT_COLUMNS)}")
    if not 1 <= limit <= MAX_PAGE_ITEMS:
        raise ValueError(f"limit must be from 1 to {MAX_PAGE_ITEMS}")
    async with store.reading() as conn:
        cur = await conn.execute(
            sql.INSTANCE_PAGES[(sort, descending)],
            {
                "view": InstanceView(view).value,
                "name": definition_name,
                "version": definition_version,
                "status": None if status is None else int(status),
                "tenant": tenant,
                "instance": instance_id,
                "prefixes": None if instance_prefixes is None else list(instance_prefixes),
                "started_from": started_from,
                "started_before": started_before,
                "after_value": after[0] if after else None,
                "after_id": after[1] if after else None,
                "limit": limit + 1,
            },
        )
        rows = await cur.fetchall()
    page = tuple(_instance_row(r) for r in rows[:limit])
    cursor = (sort_value(page[-1], sort), page[-1].instance_id) if len(rows) > limit else None
    return InstancePage(page, cursor)


def sort_value(row: InstanceRow, sort: str) -> Any:
    """The value ``row`` is sorted by under ``sort`` (a page's cursor holds the last)."""
    return {
        "started": row.created_at,
        "updated": row.updated_at,
        "id": row.instance_id,
        "definition": row.definition.name,
        "status": int(row.status),
        "events": row.sequence,
    }[sort]


async def get_instances(store: Store, instance_ids: Collection[str]) -> dict[str, InstanceRow]:
    """The rows of the given instances that exist, by id (at most MAX_INSTANCE_ROWS ids)."""
    ids = sorted(set(instance_ids))
    if len(ids) > MAX_INSTANCE_ROWS:
        raise ValueError(f"at most {MAX_INSTANCE_ROWS} instances at a time")
    found = map(_instance_row, await store.read_ids(sql.INSTANCE_ROWS, ids))
    return {r.instance_id: r for r in found}


async def parents_of(store: Store, instance_ids: Collection[str]) -> dict[str, str]:
    """The parent of each of the given instances that is a child, by child id (at most
    MAX_INSTANCE_ROWS ids)."""
    ids = sorted(set(instance_ids))
    if len(ids) > MAX_INSTANCE_ROWS:
        raise ValueError(f"at most {MAX_INSTANCE_ROWS} instances at a time")
    return dict(await store.read_ids(sql.PARENTS, ids))


async def continued_as(store: Store, instance_id: str) -> str:
    """The successor ``instance_id`` continued as new as ('' when it did not)."""
    async with store.reading() as conn:
        row = await (await conn.execute(sql.CONTINUED_AS, {"instance": instance_id})).fetchone()
    return "" if row is None else row[0]


async def fan_out(store: Store, state: Instance) -> FanOut:
    """The children of ``state`` with the status each child instance has now, read in
    statements of at most MAX_INSTANCE_ROWS ids: what ``wayline inspect`` and the
    studio say of a parent's children and count of its fan-out (``engine.model.
    fan_out``), since the parent's history stops hearing of a child once it has ended."""
    ids = sorted({c.child_id for c in state.children.values()})
    statuses: dict[str, InstanceStatus] = {}
    for start in range(0, len(ids), MAX_INSTANCE_ROWS):
        chunk = ids[start : start + MAX_INSTANCE_ROWS]
        rows = await store.read_ids(sql.STATUSES, chunk)
        statuses.update((child_id, InstanceStatus(status)) for child_id, status in rows)
    return FanOut(state, statuses)


def _instance_row(row: tuple) -> InstanceRow:
    (
        instance_id,
        name,
        version,
        fingerprint,
        status,
        sequence,
        tenant,
        created,
        updated,
        archived,
    ) = row
    return InstanceRow(
        instance_id,
        DefinitionRef(name, version, fingerprint),
        InstanceStatus(status),
        sequence,
        tenant,
        created,
        updated,
        archived,
    )
