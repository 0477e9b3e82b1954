"""Fencing a commit by a lease: the lease must still be this owner's, in the same
transaction that writes the outcome.

The commit's first transition carries the fence in its own statement
(``FENCED_WRITE``): the lease's work row is locked first, with the predicates of a
check (owner, token, leased state, unexpired by the store's clock), and the transition
is written only while they hold; when it is, the same statement completes the lease
(an outcome) and, for eager dispatch, inserts the next activity's work row already
leased to the same owner, so the worker runs it right after this commit without a
claim. An outcome can never be durable while its work is still claimable, nor the work
complete without its outcome; no row back means the lease was lost (expired,
reclaimed, finished) and the whole transaction rolls back. The row lock holds until
COMMIT, so nobody can reclaim the work in between. Crash semantics are unchanged: a
lease never completed expires, the attempt is in flight, and redelivery records it as
unknown.

Without a transition to carry it (nothing to record), or when the transition had been
written before (an exact replay, which writes nothing), ``check`` and ``finish`` do the
same with statements of their own (``work.check_on``, ``work.complete_on``,
``COMPLETE_AND_LEASE_NEXT``).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg

from engine.store import commits, work
from engine.store.clock import NOW_SQL
from engine.store.rows import WORK_FIELDS, WorkState
from engine.store.store import Store

COMPLETE_AND_LEASE_NEXT = f"""
WITH completed AS (
    {work.COMPLETE_LEASE.strip()}
)
UPDATE work w
SET state = {WorkState.LEASED}, attempts = w.attempts + 1, lease_token = w.lease_token + 1,
    lease_owner = %(owner)s, lease_expires_at = LEAST({NOW_SQL} + %(lease)s::interval, w.deadline)
WHERE w.work_id = %(next_id)s AND w.state = {WorkState.AVAILABLE}
  AND EXISTS (SELECT 1 FROM completed)
RETURNING {work.LEASE_COLUMNS}
"""
"""Complete the held lease and lease the next work row to the same owner; no row when
the lease was no longer held (then nothing changed). Used when the commit's transition
had been written before (an exact replay); a transition written now does both in its
own statement (``FENCED_WRITE``)."""

LEASED_ON = "r.work_id = %(next_id)s"
LEASED = f"({LEASED_ON})::int"
"""1 for the row leased on as it is inserted (its token and attempts), else 0."""
LEASE_PARTS = commits.LeaseParts(
    held=f"""
held AS MATERIALIZED (
    SELECT w.work_id FROM work w WHERE {work.HELD} FOR UPDATE
),""",
    work_insert=commits.insert_rows(
        "work",
        WORK_FIELDS,
        "work",
        extra=(
            ("state", f"{WorkState.AVAILABLE} + {LEASED}"),
            ("attempts", LEASED),
            ("lease_token", LEASED),
            ("lease_owner", f"CASE WHEN {LEASED_ON} THEN %(owner)s ELSE '' END"),
            (
                "lease_expires_at",
                f"CASE WHEN {LEASED_ON} THEN "
                f"LEAST({NOW_SQL} + %(lease)s::interval, r.deadline) END",
            ),
        ),
        returning=work.LEASE_COLUMNS,
    ),
    finish=f"""
finished AS (
    UPDATE work w
    SET state = {WorkState.COMPLETED}, completed_at = {NOW_SQL}, lease_owner = '',
        lease_expires_at = NULL
    WHERE w.work_id = %(work_id)s AND %(finish)s AND EXISTS (SELECT 1 FROM ok)
),""",
    columns=", next_lease.*",
    join="LEFT JOIN new_work next_lease ON next_lease.work_id = %(next_id)s",
)
FENCED_WRITE = commits.one_line(commits.write_transition(LEASE_PARTS))
"""A transition written only while the lease is held, in one statement with what the
lease's holder does at that point: the work row is locked first (``held``); when the
transition is written, the lease is completed (``finished``, for an outcome) and the
next activity's work row, which the transition creates, is inserted already leased to
the same owner with token 1 (eager dispatch), as a claim would have left it. Without
the lease, nothing is written and no row comes back (StaleLease)."""


HANDED_ON = f"""
SELECT {work.LEASE_COLUMNS} FROM work w
WHERE w.work_id = %(next_id)s AND w.state = {WorkState.LEASED}
  AND w.lease_owner = %(owner)s AND w.lease_token = 1
"""
"""The lease ``FENCED_WRITE`` handed on (token 1, this owner), read back when the
write's answer was lost and it was settled as committed; no row once it expired and
was claimed again (then it is that claimer's)."""


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

    def write(self) -> FencedTransition:
        """This lease's part in the statement of the commit's first transition."""
        return FencedTransition(self)

    async def check(self, conn: psycopg.AsyncConnection) -> None:
        if self.finish_lease:  # the finishing write proves the lease (see the docstring)
            return
        await work.check_on(conn, self.lease, self.store.clock.sql_now())

    async def finish(self, conn: psycopg.AsyncConnection) -> None:
        if self.lease_next:  # the next lease takes the slot of the one it finishes
            self.next_lease = await self._complete_and_lease_next(conn)
        elif self.finish_lease:
            await work.complete_on(conn, self.lease, self.store.clock.sql_now())

    async def recover(self, conn: psycopg.AsyncConnection) -> None:
        """After a write settled as committed without its answer: the lease it handed on."""
        if self.lease_next:
            row = await (await conn.execute(HANDED_ON, self.params())).fetchone()
            self.next_lease = work._lease(row) if row is not None else None

    def params(self) -> dict[str, Any]:
        """The parameters of the statements that settle this lease."""
        return {
            "work_id": self.lease.work_id,
            "owner": self.lease.owner,
            "token": self.lease.token,
            "now": self.store.clock.sql_now(),
            "next_id": self.lease_next,
            "lease": self.lease_for,
        }

    async def _complete_and_lease_next(self, conn: psycopg.AsyncConnection) -> work.Lease:
        """The end of an attempt with eager dispatch when its transition was not written
        by this commit (an exact replay), in one round trip."""
        row = await work._fenced(conn, COMPLETE_AND_LEASE_NEXT, self.params(), self.lease)
        return work._lease(row)


class FencedTransition:
    """A ``commits.FencedWrite``: one staging of a transition under ``fence``'s lease.

    ``done`` says whether the statement also settled the lease (it wrote the transition);
    if not (an exact replay), the fence's ``finish`` still has to. The statement runs
    through ``work._fenced``, the choke point of every lease-holder write.
    """

    def __init__(self, fence: LeaseFence) -> None:
        self.fence = fence
        self.done = False

    @property
    def statement(self) -> str:
        return FENCED_WRITE

    def params(self) -> dict[str, Any]:
        return {**self.fence.params(), "finish": self.fence.finish_lease}

    async def run(
        self, conn: psycopg.AsyncConnection, statement: str, params: dict[str, Any]
    ) -> tuple[Any, ...]:
        return await work._fenced(conn, statement, params, self.fence.lease)

    def wrote(self, lease_columns: tuple[Any, ...]) -> None:
        self.done = True
        if self.fence.lease_next and lease_columns[0] is not None:
            self.fence.next_lease = work._lease(lease_columns)
