"""How far a replica's reads are behind the primary, as pages and the API say it.

With a read replica (``WAYLINE_READ_DSN``) the pages that read from it measure, before
they read, the replica's replayed WAL against the primary's flushed WAL (``Queries.
wal_position`` on each, the replica first so the difference never understates). Zero
bytes behind is *up to date*: the page holds every change committed before it was
asked for. Otherwise the page is at most as old as the replica's newest replayed commit
(``pg_last_xact_replay_timestamp``, by the primary's clock): that age bounds how stale
it may be. Pages show the lag in a notice; API answers carry it in ``READ_LAG_HEADER``.
Nothing acts on what a replica says (``studio.reads``), so a stale page misleads the
eye at most, never an action.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from litestar.datastructures import MutableScopeHeaders
from litestar.types import Message, Scope

from engine import Queries
from engine.api.queries import WalPosition
from studio.formats import format_duration

READ_LAG_HEADER = "Wayline-Read-Lag"
"""On answers read from a replica: ``bytes=N; seconds=S`` (N bytes of the primary's WAL
not replayed yet; S bounds the staleness in seconds, absent when the standby has
replayed no commit since it started; both 0 when up to date), or ``unknown`` when the
read server is not a standby or has replayed nothing yet."""
STATE_KEY = "wayline_read_lag"
"""Where a request's measured lag waits for its page and its response headers."""


@dataclass(frozen=True)
class ReadLag:
    """How far one request's reads were behind the primary when they began."""

    behind_bytes: int | None
    """WAL bytes the replica had not replayed; None when that is unknown."""
    at_most: timedelta | None = None
    """The age of the replica's newest replayed commit, when it is behind."""

    @property
    def up_to_date(self) -> bool:
        return self.behind_bytes == 0

    @property
    def notice(self) -> str:
        """The page's sentence about where it was read."""
        if self.behind_bytes is None:
            return (
                "Read from a replica whose lag is unknown (not a standby, or nothing "
                "replayed yet); actions always act on the primary."
            )
        if self.up_to_date:
            return "Read from a replica, up to date with the primary."
        age = f"at most {format_duration(self.at_most)}" if self.at_most is not None else "some"
        return (
            f"Read from a replica {age} behind the primary ({self.behind_bytes:,} bytes not "
            "replayed yet): this page may be stale; actions always act on the primary."
        )

    @property
    def header(self) -> str:
        """``READ_LAG_HEADER``'s value."""
        if self.behind_bytes is None:
            return "unknown"
        if self.up_to_date:
            return "bytes=0; seconds=0.000"
        if self.at_most is None:
            return f"bytes={self.behind_bytes}"
        return f"bytes={self.behind_bytes}; seconds={self.at_most.total_seconds():.3f}"


def lag_between(primary: WalPosition, replica: WalPosition) -> ReadLag:
    """The lag of ``replica``'s reads behind ``primary`` (read after it)."""
    if not replica.standby or replica.lsn is None or primary.lsn is None:
        return ReadLag(None)
    behind = max(primary.lsn - replica.lsn, 0)
    if behind == 0:
        return ReadLag(0)
    if replica.replayed_at is None:
        return ReadLag(behind)
    return ReadLag(behind, max(primary.server_now - replica.replayed_at, timedelta(0)))


async def measure(primary: Queries, replica: Queries) -> ReadLag:
    """The replica's lag now: its position first, then the primary's."""
    replayed = await replica.wal_position()
    return lag_between(await primary.wal_position(), replayed)


async def add_read_lag_header(message: Message, scope: Scope) -> None:
    """Before-send hook: an answer read from a replica says how far behind it was."""
    lag = scope.get("state", {}).get(STATE_KEY)
    if message["type"] == "http.response.start" and isinstance(lag, ReadLag):
        MutableScopeHeaders.from_message(message)[READ_LAG_HEADER] = lag.header
