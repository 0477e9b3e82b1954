"""Keyset cursors in page links: ``<iso time>|<id>``, the position a page ended at.

Every list of the studio is keyset-paged (never OFFSET, never a count): a link to the
next page carries the sort key of the last row shown, and the next page starts
strictly after it, so rows added meanwhile never shift what a person sees.
"""

from __future__ import annotations

from datetime import datetime

from studio.errors import Invalid


def parse_cursor(cursor: str | None) -> tuple[datetime, str] | None:
    """``<iso time>|<id>`` from a page link, or None for the first page."""
    if not cursor:
        return None
    stamp, _, ident = cursor.partition("|")
    try:
        return datetime.fromisoformat(stamp), ident
    except ValueError:
        raise Invalid("the page cursor is not valid; start from the first page") from None


def format_cursor(cursor: tuple[datetime, str] | None) -> str:
    return "" if cursor is None else f"{cursor[0].isoformat()}|{cursor[1]}"
