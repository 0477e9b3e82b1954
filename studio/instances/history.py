"""An instance's history as people read it: filtered pages, and the whole of it as JSON.

Histories can be long (ui-anchors ask 1: hundreds of events overload a browser), so
the page shows one keyset page at a time (``after`` is the last sequence shown, which
appends never shift), narrowed on the server by event kind and step, with the
filters in the URL. Each event is addressable as ``#event-<sequence>`` on the page
that starts at it. The export streams every event, one store page in memory at a time.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from engine.api.queries import HistoryPage
from engine.model.events import Event, EventKind, event_to_json
from engine.model.identifiers import local_instance_id
from engine.model.limits import MAX_HISTORY_PAGE_EVENTS
from engine.model.words import counted
from studio.errors import Invalid
from studio.instances.service import require_row
from studio.reads import Reads

PAGE_EVENTS = 50
KIND_LABELS = tuple(k.label for k in EventKind)
DATA_PREVIEW = 160


@dataclass(frozen=True)
class HistoryFilter:
    """Which events a history view shows, as the URL carries them."""

    kinds: tuple[str, ...] = ()
    step: str = ""
    after: int = 0
    limit: int = PAGE_EVENTS

    def __post_init__(self) -> None:
        unknown = [k for k in self.kinds if k not in KIND_LABELS]
        if unknown:
            raise Invalid(f"unknown event kind {unknown[0]!r}")
        if self.after < 0:
            raise Invalid("after must be a sequence number (0 for the start)")
        if not 1 <= self.limit <= MAX_HISTORY_PAGE_EVENTS:
            raise Invalid(f"limit must be from 1 to {MAX_HISTORY_PAGE_EVENTS}")

    @property
    def narrowed(self) -> bool:
        return bool(self.kinds or self.step)

    @property
    def event_kinds(self) -> list[EventKind] | None:
        return [EventKind[k.upper()] for k in self.kinds] if self.kinds else None

    def previous_query(self) -> str | None:
        """The query of the events just before this page, as many as it holds (fewer
        at the start, so no event is shown twice), or None on the first page or when
        filters narrow the pages (their events are not contiguous: only reading
        backwards would find where the previous page starts)."""
        if self.narrowed or not self.after:
            return None
        start = max(0, self.after - self.limit)
        return self.query(after=start, limit=self.after - start)

    def latest_query(self, last: int) -> str | None:
        """The query of the full page ending with event ``last``, the newest: a history
        of thousands of events is otherwise as many pages away from where the instance
        stands now. None when filters narrow the pages or this page reaches ``last``."""
        if self.narrowed or self.after + self.limit >= last:
            return None
        return self.query(after=last - self.limit)

    def query(self, **changes: Any) -> str:
        values: dict[str, Any] = {"kind": list(self.kinds), "step": self.step}
        if self.limit != PAGE_EVENTS:
            values["limit"] = self.limit
        values.update(changes)
        return urlencode({k: v for k, v in values.items() if v}, doseq=True)


def check_cursor(chosen: HistoryFilter, last: int) -> None:
    """Refuse (Invalid at ``after``) a cursor past the instance's last event ``last``: a
    position copied from a longer instance, or typed, names no page of this one, and an
    empty page would read as a history with nothing there. ``after`` equal to ``last``
    is the end itself (nothing newer yet), which is a page."""
    if chosen.after > last:
        raise Invalid.at(
            "after",
            f"after {chosen.after} is past the end of this history: the instance has "
            f"{counted(last, 'event')}, so after is from 0 (the first page) to {last}",
        )


async def history_page(
    reads: Reads, team: str, instance_id: str, chosen: HistoryFilter
) -> HistoryPage:
    """The page of the instance's history ``chosen`` names; Invalid when its cursor is
    past the instance's last event (``check_cursor``)."""
    row = await require_row(reads, team, instance_id)
    check_cursor(chosen, row.sequence)
    return await reads.queries.history_page(
        row.instance_id,
        chosen.after,
        chosen.limit,
        kinds=chosen.event_kinds,
        step=chosen.step or None,
    )


async def export(reads: Reads, team: str, instance_id: str) -> AsyncIterator[bytes]:
    """The whole history as a JSON array, streamed (the team is checked first)."""
    row = await require_row(reads, team, instance_id)
    return _json_array(reads.queries.history(row.instance_id), team)


async def _json_array(events: AsyncIterator[Event], team: str) -> AsyncIterator[bytes]:
    first = True
    yield b"[\n"
    async for event in events:
        prefix = "" if first else ",\n"
        first = False
        yield (prefix + json.dumps(event_document(event, team))).encode()
    yield b"\n]\n"


def event_document(event: Event, team: str) -> dict[str, Any]:
    """An event as JSON, its instance and successor (child or parent) ids the ones
    ``team`` knows (keys stay as activity handlers receive them)."""
    document = event_to_json(event)
    for name in ("instance_id", "successor_id"):
        if name in document:
            document[name] = local_instance_id(team, document[name])
    return document


@dataclass(frozen=True)
class EventView:
    """One event as a history row: the fields that are set, and a short data preview."""

    event: Event
    fields: tuple[tuple[str, str], ...]
    data: str

    @property
    def preview(self) -> str:
        return self.data if len(self.data) <= DATA_PREVIEW else self.data[: DATA_PREVIEW - 1] + "…"


def event_views(events: Iterable[Event], team: str = "") -> list[EventView]:
    """The rows of ``events`` as ``team`` reads them (a child or parent id is the one
    the team knows; keys stay as activity handlers receive them)."""
    return [_view(e, team) for e in events]


def _view(event: Event, team: str) -> EventView:
    document = event_document(event, team)
    data = document.pop("data", None)
    for name in ("sequence", "instance_id", "kind", "occurred_at", "step"):
        document.pop(name, None)
    fields = tuple((k, v if isinstance(v, str) else json.dumps(v)) for k, v in document.items())
    shown = "" if data is None else json.dumps(data, sort_keys=True)
    return EventView(event, fields, shown)
