"""How values read in the studio: times and durations, the same on every page."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from urllib.parse import quote

from markupsafe import Markup, escape

SEPARATOR = re.compile(r"([_./:@-])(?=.)")
NOT_PLAIN = re.compile(r"[^A-Za-z0-9 ._@+-]")
"""What a download's plain (ASCII) file name replaces: anything a header or a quoted
string could take for syntax (quotes, backslashes, ``;``, line breaks) or could not
carry (letters beyond Latin-1), and path separators."""


def format_when(value: datetime | None) -> str:
    """A time as people read it in a table: UTC, to the second."""
    if value is None:
        return "—"
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def when_markup(value: datetime | None) -> Markup:
    """``format_when`` on a page: a line may break before the time, never inside the
    date (a narrow column wrapped ``2026-12-`` away from ``07`` at its hyphen). Text
    only: an attribute takes ``format_when``."""
    date, space, rest = format_when(value).partition(" ")
    if not space:
        return Markup(escape(date))
    return Markup('<span class="date">{}</span> {}').format(date, rest)


def format_duration(value: timedelta | float | None) -> str:
    """A duration in its largest sensible unit: ``850 ms``, ``12.4 s``, ``3 min 5 s``."""
    if value is None:
        return "—"
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {rest} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def breakable(value: object) -> Markup:
    """An identifier or event kind that may wrap after its separators (``_ . - / : @``)
    and nowhere else: ``instance_<wbr>started``, never ``instanc`` / ``e_started``."""
    return Markup(SEPARATOR.sub(r"\1<wbr>", str(escape(value))))


def attachment(filename: str) -> str:
    """The ``Content-Disposition`` of a download named ``filename`` (RFC 6266): a plain
    ASCII name with every other character as ``_``, for every client, and the name
    itself, percent-encoded as UTF-8, for the clients that read ``filename*``. A name
    taken from what a person typed (a drill plan's) went into the header as it was:
    one with a letter beyond Latin-1 (``計画``) could not be sent and answered 500, one
    with a line break cut the connection."""
    printable = "".join(c if c.isprintable() else "_" for c in filename)
    plain = NOT_PLAIN.sub("_", printable).strip() or "download"
    return f"attachment; filename=\"{plain}\"; filename*=UTF-8''{quote(printable, safe='')}"
