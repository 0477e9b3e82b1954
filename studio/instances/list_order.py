"""The order of the instances list: a column and a direction, in the URL as ``sort``.

``sort=-started`` (the default) lists the newest first; ``sort=definition`` lists by
definition name, A to Z. Any column of the list sorts, and the list stays keyset-paged:
a page link carries the last row's sort value and id (``format_cursor``), read back by
the column's type (``parse_cursor``), never an offset.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote, unquote

from studio.errors import BadRequest, Invalid
from studio.paging import CURSOR_REFUSED, cursor_time, read_cursor_time

COLUMNS = {
    "id": "Instance",
    "definition": "Definition",
    "status": "Status",
    "events": "Events",
    "started": "Started",
    "updated": "Updated",
}
"""Every sortable column (the store's sort keys), with its heading, in table order."""
FIRST_DESCENDING = frozenset({"events", "started", "updated"})
"""Columns whose first click lists the largest (newest) first."""
TIMES = frozenset({"started", "updated"})
NUMBERS = frozenset({"status", "events"})
DEFAULT = "-started"
SORTS = tuple(f"{way}{key}" for key in COLUMNS for way in ("", "-"))
"""Every ``sort`` the list takes."""


@dataclass(frozen=True)
class ListOrder:
    key: str
    descending: bool

    @classmethod
    def parse(cls, text: str) -> ListOrder:
        """``sort`` from the URL ('' is the default, newest first)."""
        wanted = text.strip() or DEFAULT
        key = wanted.removeprefix("-")
        if key not in COLUMNS:
            raise Invalid(f"sort is one of {', '.join(COLUMNS)}, with a leading - for descending")
        return cls(key, wanted.startswith("-"))

    @property
    def text(self) -> str:
        return f"{'-' if self.descending else ''}{self.key}"

    @property
    def caption(self) -> str:
        if self.key in TIMES:
            way = "newest first" if self.descending else "oldest first"
        else:
            way = "descending" if self.descending else "ascending"
        return f"by {COLUMNS[self.key].lower()}, {way}"

    def toggled(self, key: str) -> str:
        """The ``sort`` a click on column ``key`` asks for: the other direction of the
        current column, else the column's own first direction."""
        descending = not self.descending if key == self.key else key in FIRST_DESCENDING
        return f"{'-' if descending else ''}{key}"

    def aria(self, key: str) -> str:
        """The column's ``aria-sort``."""
        if key != self.key:
            return "none"
        return "descending" if self.descending else "ascending"


def format_cursor(cursor: tuple[Any, str] | None) -> str:
    """A page link's cursor: ``<value>|<id>``, the value quoted so it holds no ``|``."""
    if cursor is None:
        return ""
    value, ident = cursor
    text = cursor_time(value) if isinstance(value, datetime) else str(value)
    return f"{quote(text, safe=':+-.')}|{ident}"


def parse_cursor(cursor: str | None, order: ListOrder) -> tuple[Any, str] | None:
    """A cursor made by ``format_cursor`` for ``order`` (a malformed one is refused)."""
    if not cursor:
        return None
    text, bar, ident = cursor.partition("|")
    if not bar:
        raise BadRequest(CURSOR_REFUSED)
    value = unquote(text)
    try:
        if order.key in TIMES:
            return read_cursor_time(value), ident
        return (int(value) if order.key in NUMBERS else value), ident
    except ValueError:
        raise BadRequest(CURSOR_REFUSED) from None
