"""Durations in the exchange format: ``500ms``, ``30s``, ``5m``, ``72h``, ``7d``.

A duration string is one positive whole number and one unit. Definitions keep them as
``timedelta``; the canonical form used for fingerprints is whole microseconds, so
``60s`` and ``1m`` are the same definition.
"""

from __future__ import annotations

import re
from datetime import timedelta

UNITS = {
    "ms": timedelta(milliseconds=1),
    "s": timedelta(seconds=1),
    "m": timedelta(minutes=1),
    "h": timedelta(hours=1),
    "d": timedelta(days=1),
}
_PATTERN = re.compile(r"([0-9]{1,12})(ms|s|m|h|d)")
ALLOWED = "a whole number followed by ms, s, m, h or d, e.g. 500ms, 30s, 5m, 72h, 7d"


def parse_duration(text: str) -> timedelta:
    """Parse a duration string; raise ValueError saying what is allowed."""
    match = _PATTERN.fullmatch(text) if isinstance(text, str) else None
    if not match:
        raise ValueError(f"expected a duration: {ALLOWED}")
    try:
        return int(match.group(1)) * UNITS[match.group(2)]
    except OverflowError as exc:  # e.g. 999999999999d: more days than a timedelta holds
        raise ValueError(f"is too long: at most {timedelta.max.days} days") from exc


def format_duration(value: timedelta) -> str:
    """The shortest exact string for a duration (inverse of parse_duration)."""
    micros = to_micros(value)
    for unit in ("d", "h", "m", "s", "ms"):
        size = to_micros(UNITS[unit])
        if micros % size == 0 and micros >= size:
            return f"{micros // size}{unit}"
    raise ValueError("durations finer than a millisecond have no exchange form")


def to_micros(value: timedelta) -> int:
    """Whole microseconds of a timedelta, exactly."""
    return (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
