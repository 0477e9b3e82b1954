"""How values read in the studio: times and durations, the same on every page."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from markupsafe import Markup, escape

SEPARATOR = re.compile(r"([_./:@-])(?=.)")


def format_when(value: datetime | None) -> str:
    """A time as people read it in a table: UTC, to the second."""
    if value is None:
        return "—"
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


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
