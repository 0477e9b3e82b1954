"""Fencing a commit by a lease: the lease must still be this owner's, in the same
transaction that writes the outcome.

``finish`` completes the lease in the same transaction, with the same predicates as a
check (owner, token, leased state, unexpired by the store's clock), so an outcome can
never be durable while its work is still claimable, nor the work complete without its
outcome; no row means the lease was lost (expired, reclaimed, finished) and the whole
transaction rolls back. The completion locks the work row until COMMIT, so nobody can
reclaim it in between: for a commit that finishes its lease, that one statement is
the fence. A commit that keeps its lease (an attempt start, whose handler runs next)
has no finishing write, so ``check`` locks the work row first (``work.check_on``).

Eager dispatch: ``finish`` can also lease to the same owner a work row the transaction
just created (the next activity, whose attempt start is in the same transition), in
the statement that completes the finished lease, so the worker runs it right after
this commit without a claim round trip. Crash semantics are unchanged: a lease never
completed expires, the attempt is in flight, and redelivery records it as unknown.
"""

from __future__ import annotations

from datetime import timedelta

import psycopg

from engine.store import work
from engine.store.clock import NOW_SQL
from engine.store.store import Store

COMPLETE_AND_LEASE_NEXT = f"""
WITH completed AS (
    {work.COMPLETE_LEASE.strip()}
)
UPDATE work w
SET state = 2, attempts = w.attempts + 1, lease_token = w.lease_token + 1,
    lease_owner = %(owner)s, lease_expires_at = LEAST({NOW_SQL} + %(lease)s::interval, w.deadline)
WHERE w.work_id = %(next_id)s AND w.state = 1 AND EXISTS (SELECT 1 FROM completed)
RETURNING {work.LEASE_COLUMNS}
"""
"""Complete the held lease and lease the next work row to the same owner; no row when
the lease was no longer held (then nothing changed)."""


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
        if self.finish_lease:  # the finishing write proves the lease (see the docstring)
            return
        await work.check_on(conn, self.lease, self.store.clock.sql_now())

    async def finish(self, conn: psycopg.AsyncConnection) -> None:
        if self.lease_next:  # the next lease takes the slot of the one it finishes
            self.next_lease = await self._complete_and_lease_next(conn)
        elif self.finish_lease:
            await work.complete_on(conn, self.lease, self.store.clock.sql_now())

    async def _complete_and_lease_next(self, conn: psycopg.AsyncConnection) -> work.Lease:
        """The usual end of an attempt with eager dispatch, in one round trip."""
        params = {
            "work_id": self.lease.work_id,
            "owner": self.lease.owner,
            "token": self.lease.token,
            "now": self.store.clock.sql_now(),
            "next_id": self.lease_next,
            "lease": self.lease_for,
        }
        return work._lease(await work._fenced(conn, COMPLETE_AND_LEASE_NEXT, params, self.lease))
