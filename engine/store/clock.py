"""The one clock authority for lease and due-time comparisons.

By default every comparison happens in SQL against PostgreSQL's clock
(``statement_timestamp()``), so workers on different machines cannot skew each other:
queries take ``COALESCE(%(now)s, statement_timestamp())`` and the database clock passes
NULL. Tests and drills install a ManualClock whose instant is passed instead.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from engine.canonical import utc

NOW_SQL = "COALESCE(%(now)s::timestamptz, statement_timestamp())"


class DatabaseClock:
    """PostgreSQL's clock: the parameter is NULL and SQL reads the server time.

    Event times (which the pure core needs as values) follow the server too: the
    store measures the offset between this machine's clock and the server's when it
    opens, and ``now`` applies it, so no extra round trip is needed per decision.
    """

    def __init__(self) -> None:
        self.offset = timedelta(0)

    def sql_now(self) -> datetime | None:
        return None

    def now(self) -> datetime:
        return datetime.now(UTC) + self.offset


class ManualClock:
    """A controllable clock for tests and drills; only ``advance`` and ``set`` move it."""

    def __init__(self, start: datetime) -> None:
        self._now = utc(start)

    def sql_now(self) -> datetime | None:
        return self._now

    def now(self) -> datetime:
        return self._now

    def advance(self, delta: timedelta) -> None:
        self._now += delta

    def set(self, instant: datetime) -> None:
        self._now = utc(instant)


Clock = DatabaseClock | ManualClock
