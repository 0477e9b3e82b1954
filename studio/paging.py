"""Keyset cursors in page links: ``<iso time>|<id>``, the position a page ended at.

Every list of the studio is keyset-paged (never OFFSET, never a count): a link to the
next page carries the sort key of the last row shown, and the next page starts
strictly after it, so rows added meanwhile never shift what a person sees.
"""

from __future__ import annotations

from datetime import datetime

from studio.errors import BadRequest

CURSOR_REFUSED = "the page cursor is not valid; start from the first page"


def parse_cursor(cursor: str | None) -> tuple[datetime, str] | None:
    """``<iso time>|<id>`` from a page link, or None for the first page.

    A cursor is only ever made by ``format_cursor``, with a time zone; one without
    (edited by hand) is refused like any other malformed cursor (400), never guessed.
    """
    if not cursor:
        return None
    stamp, _, ident = cursor.partition("|")
    try:
        instant = datetime.fromisoformat(stamp)
    except ValueError:
        raise BadRequest(CURSOR_REFUSED) from None
    if instant.tzinfo is None:
        raise BadRequest(f"{CURSOR_REFUSED} (its time has no time zone)")
    return instant, ident


def format_cursor(cursor: tuple[datetime, str] | None) -> str:
    return "" if cursor is None else f"{cursor[0].isoformat()}|{cursor[1]}"
