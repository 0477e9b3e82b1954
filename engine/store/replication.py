"""Where a server stands in the WAL: how a console measures a replica's lag.

A primary's position is the WAL it has flushed (what a standby can receive); a
standby's is the WAL it has replayed (what its reads see), with the commit time of
the newest transaction it replayed. A standby is behind by the difference, in bytes;
nothing in the engine decides from a standby, this only says how stale a read is.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from engine.store.statements import replication as sql
from engine.store.store import Store


@dataclass(frozen=True)
class WalPosition:
    """One server's place in the WAL, read in one statement."""

    standby: bool
    """The server is in recovery (a streaming standby)."""
    lsn: int | None
    """Bytes into the WAL: flushed (a primary) or replayed (a standby; None before the
    standby replayed anything)."""
    replayed_at: datetime | None
    """A standby's newest replayed commit, by the primary's clock (None on a primary)."""
    server_now: datetime


async def wal_position(store: Store) -> WalPosition:
    """Where the store's server stands in the WAL now."""
    async with store.reading() as conn:
        row = await (await conn.execute(sql.WAL_POSITION)).fetchone()
    assert row is not None
    return WalPosition(*row)
