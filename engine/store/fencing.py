"""Fencing a commit by a lease: the lease must still be this owner's, in the same
transaction that writes the outcome.

``check`` locks the work row where owner, token, leased state and an unexpired lease
all match, by the store's clock (``work.check_on``); no row means the lease was lost
(expired, reclaimed, finished) and nothing is written. ``finish`` completes the lease
in the same transaction, so an outcome can never be durable while its work is still
claimable, nor the work complete without its outcome.

Eager dispatch: ``finish`` can also lease to the same owner a work row the transaction
just created (the next activity, whose attempt start is in the same transition), so
the worker runs it right after this commit without a claim round trip. Crash
semantics are unchanged: a lease never completed expires, the attempt is in flight,
and redelivery records it as unknown.
"""

from __future__ import annotations

from datetime import timedelta

import psycopg

from engine.store import work
from engine.store.clock import NOW_SQL
from engine.store.errors import StaleLease
from engine.store.store import Store

LEASE_NEW_WORK = f"""
UPDATE work w
SET state = 2, attempts = w.attempts + 1, lease_token = w.lease_token + 1,
    lease_owner = %(owner)s, lease_expires_at = LEAST({NOW_SQL} + %(lease)s::interval, w.deadline)
WHERE w.work_id = %(work_id)s AND w.state = 1
RETURNING {work.LEASE_COLUMNS}
"""


class LeaseFence:
    """A Fence (see Store.commit_all) for one lease; ``finish`` completes it."""

    def __init__(
        self,
        store: Store,
        lease: work.Lease,
        finish: bool = True,
        lease_next: str = "",
        lease_for: timedelta = timedelta(seconds=30),
    ) -> None:
        self.store = store
        self.lease = lease
        self.finish_lease = finish
        self.lease_next = lease_next
        self.lease_for = lease_for
        self.next_lease: work.Lease | None = None

    async def check(self, conn: psycopg.AsyncConnection) -> None:
        await work.check_on(conn, self.lease, self.store.clock.sql_now())

    async def finish(self, conn: psycopg.AsyncConnection) -> None:
        if self.finish_lease:
            await work.complete_on(conn, self.lease, self.store.clock.sql_now())
        if self.lease_next:
            self.next_lease = await self._lease_next(conn)

    async def _lease_next(self, conn: psycopg.AsyncConnection) -> work.Lease:
        row = await (
            await conn.execute(
                LEASE_NEW_WORK,
                {
                    "work_id": self.lease_next,
                    "owner": self.lease.owner,
                    "lease": self.lease_for,
                    "now": self.store.clock.sql_now(),
                },
            )
        ).fetchone()
        if row is None:  # created in this very transaction: only a bug could get here
            raise StaleLease(f"work {self.lease_next} could not be leased eagerly")
        return work._lease(row)  # the claim's own row decoding
