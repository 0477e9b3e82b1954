"""Keyset cursors in page links: ``<iso time>|<id>``, the position a page ended at.

Every list of the studio is keyset-paged (never OFFSET, never a count): a link to the
next page carries the sort key of the last row shown, and the next page starts
strictly after it, so rows added meanwhile never shift what a person sees.
"""

from __future__ import annotations

from datetime import UTC, datetime

from studio.errors import BadRequest

CURSOR_REFUSED = "the page cursor is not valid; start from the first page"


def cursor_time(instant: datetime) -> str:
    """An instant as a cursor writes it: ISO 8601 in UTC with ``Z``, so that a cursor
    pasted into a URL unencoded still reads back (the ``+`` of ``+00:00`` arrived as a
    space, and the cursor was refused)."""
    return instant.astimezone(UTC).isoformat().replace("+00:00", "Z")


class NoTimeZone(ValueError):
    """A cursor's time without a zone (edited by hand): never guessed."""


def read_cursor_time(text: str) -> datetime:
    """``cursor_time`` read back (ValueError when it is not an instant, NoTimeZone when
    it has no zone); a ``+`` a URL turned into a space is read as the ``+`` it was."""
    instant = datetime.fromisoformat(text.replace(" ", "+"))
    if instant.tzinfo is None:
        raise NoTimeZone
    return instant


def parse_cursor(cursor: str | None) -> tuple[datetime, str] | None:
    """``<iso time>|<id>`` from a page link, or None for the first page.

    A cursor is only ever made by ``format_cursor``, with a time zone; one without
    (edited by hand) is refused like any other malformed cursor (400), never guessed.
    """
    if not cursor:
        return None
    stamp, _, ident = cursor.partition("|")
    try:
        return read_cursor_time(stamp), ident
    except NoTimeZone:
        raise BadRequest(f"{CURSOR_REFUSED} (its time has no time zone)") from None
    except ValueError:
        raise BadRequest(CURSOR_REFUSED) from None


def format_cursor(cursor: tuple[datetime, str] | None) -> str:
    return "" if cursor is None else f"{cursor_time(cursor[0])}|{cursor[1]}"
