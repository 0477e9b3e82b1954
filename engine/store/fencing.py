"""Fencing a commit by a lease: the lease must still be this owner's, in the same
transaction that writes the outcome.

``check`` locks the work row where owner, token, leased state and an unexpired lease
all match, by the store's clock (``work.check_on``); no row means the lease was lost
(expired, reclaimed, finished) and nothing is written. ``finish`` completes the lease
in the same transaction, so an outcome can never be durable while its work is still
claimable, nor the work complete without its outcome.
"""

from __future__ import annotations

import psycopg

from engine.store import work
from engine.store.store import Store


class LeaseFence:
    """A Fence (see Store.commit_all) for one lease; ``finish`` completes it."""

    def __init__(self, store: Store, lease: work.Lease, finish: bool = True) -> None:
        self.store = store
        self.lease = lease
        self.finish_lease = finish

    async def check(self, conn: psycopg.AsyncConnection) -> None:
        await work.check_on(conn, self.lease, self.store.clock.sql_now())

    async def finish(self, conn: psycopg.AsyncConnection) -> None:
        if self.finish_lease:
            await work.complete_on(conn, self.lease, self.store.clock.sql_now())
