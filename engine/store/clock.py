"""The one clock authority for lease and due-time comparisons.

By default every comparison happens in SQL against PostgreSQL's clock
(``statement_timestamp()``), so workers on different machines cannot skew each other:
queries take ``COALESCE(%(now)s, statement_timestamp())`` and the database clock passes
NULL. Tests and drills install a ManualClock whose instant is passed instead.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from engine.model.canonical import utc

NOW_SQL = "COALESCE(%(now)s, statement_timestamp())"
"""The store's clock in SQL. The parameter takes its type, timestamptz, from
``statement_timestamp()``: a cast would only lengthen the statements that repeat it
(``tests/unit/test_statement_sizes.py``)."""


class DatabaseClock:
    """PostgreSQL's clock: the parameter is NULL and SQL reads the server time.

    Event times (which the pure core needs as values) follow the server too, without a
    round trip per decision: the store reads the server's time (``sync``), and ``now``
    adds the time elapsed since on this process's *monotonic* clock. A jump of the
    machine's wall clock therefore moves nothing; the store syncs again when a reading
    finds its sync older than ``Deadlines.clock_resync`` (and a worker with every
    heartbeat), so a server clock that was stepped or drifts is followed.
    """

    def __init__(self, wall: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        """``wall`` is this machine's clock, read once for a first guess before ``sync``
        (a drill gives one that jumps)."""
        self._server = wall()
        self._at = time.monotonic()

    def sync(self, server_time: datetime, answered_at: float) -> None:
        """The server read ``server_time`` during a round trip whose answer arrived when
        the monotonic clock read ``answered_at``.

        The reading is taken as of the answer, so this clock is behind the server's by
        at most the round trip and never ahead of it. Ahead would hide work: what this
        process makes due "now" is due at its own instant, and a worker's claim, which
        compares with the server's clock, would not see it until the server caught up,
        that is until a later poll instead of the NOTIFY that announced it."""
        self._server = utc(server_time)
        self._at = answered_at

    def sql_now(self) -> datetime | None:
        return None

    def now(self) -> datetime:
        return self._server + timedelta(seconds=time.monotonic() - self._at)


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
