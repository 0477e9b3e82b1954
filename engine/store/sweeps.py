"""The sweeps that keep work moving, and the owner lock that lets them see a dead worker.

Dead workers are noticed quickly: a worker holds a session-level advisory lock named by
its owner id (``hold_owner_lock``) on a dedicated connection. ``expire_leases_of_dead_owners``
tries each registered owner's lock with ``pg_try_advisory_xact_lock``: success means no
session holds it, so that owner's leases expire now. The sweeper's lock is
transaction-scoped and released by its own COMMIT (it never keeps an owner's lock), and
while it is held an owner that comes back waits for it instead of racing the sweep.
This is only a speed-up: a live owner whose lock connection dropped loses its leases,
and fencing rejects its later writes. Work past its deadline is never claimed;
``sweep_expired_deadlines`` turns it into a dead letter so it is never stranded.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg
import psycopg.sql

from engine.store.errors import StoreError, StoreUnavailable
from engine.store.leases import WorkRequestInvalid, check_owner
from engine.store.statements import leases as sql
from engine.store.store import Store
from engine.store.transactions import transact

DEADLINE_EXCEEDED = "deadline-exceeded"
"""Failure code of work whose deadline passed before it was done."""

SWEEP_BATCH = 500
"""Rows one deadline-sweep transaction turns into dead letters (it repeats while full)."""

OWNER_LOCK_WAIT = timedelta(seconds=10)
"""How long ``hold_owner_lock`` waits for a sweeper's momentary hold on the same key
before it decides that another live session already uses the owner id."""
RESTART_GRACE = timedelta(seconds=30)
"""How long after the database server began serving the store (it started, or a standby
was promoted: ``serving_since``, migration 0032) the dead-owner sweep spares a worker
that took its owner lock before then: the restart or failover ended its session, and it
takes the lock again within its poll interval of the database coming back. Without it
the first sweep after a restart expired the leases of every worker, and every attempt in
flight across the restart was recorded unknown."""


class OwnerLockHeld(StoreError):
    """Another live session holds this owner id's lock: two workers share one id."""


async def sweep_expired_deadlines(store: Store) -> int:
    """Turn open work past its deadline into dead letters; returns how many.

    Runs in batches of SWEEP_BATCH, each its own transaction, until a batch is not full.
    Rows another transaction holds are skipped and caught by the next sweep.
    """
    params = {"batch": SWEEP_BATCH, "code": DEADLINE_EXCEEDED}
    total = 0
    while True:
        params["now"] = store.clock.sql_now()
        swept = await transact(
            store, "deadline sweep", lambda conn: _rowcount(conn, sql.SWEEP_DEADLINES, params)
        )
        total += swept
        if swept < SWEEP_BATCH:
            return total


async def hold_owner_lock(conn: psycopg.AsyncConnection, schema: str, owner: str) -> None:
    """Take ``owner``'s session-level advisory lock on ``conn`` and keep it.

    ``conn`` must be a dedicated autocommit connection: the lock lives exactly as long as
    that session, so closing or losing it lets the sweep expire this owner's leases at
    once. A sweeper holds the key only for its own short transaction, so this waits up
    to OWNER_LOCK_WAIT for it; longer means another live session uses the same owner id
    (OwnerLockHeld). Take the lock before the first claim. A registered owner's row
    notes when (``workers.locked_at``: see ``RESTART_GRACE``).
    """
    check_owner(owner)
    if not conn.autocommit:
        raise WorkRequestInvalid(
            "the owner lock needs a dedicated autocommit connection: it lives as long as "
            "that session"
        )
    wait = f"{int(OWNER_LOCK_WAIT.total_seconds() * 1000)}ms"
    try:
        async with conn.transaction():
            await conn.execute(sql.LOCK_WAIT, {"wait": wait})
            await conn.execute(sql.TAKE_OWNER_LOCK, {"schema": schema, "owner": owner})
        # After the lock's transaction, whose lock_timeout a heartbeat's row lock is not.
        note = psycopg.sql.SQL(sql.NOTE_OWNER_LOCK).format(schema=psycopg.sql.Identifier(schema))
        await conn.execute(note, {"owner": owner})
    except psycopg.errors.LockNotAvailable as exc:
        raise OwnerLockHeld(f"owner id {owner} is in use by another live session") from exc
    except psycopg.OperationalError as exc:
        raise StoreUnavailable(f"could not take the lock of owner {owner}") from exc
    except psycopg.Error as exc:
        raise StoreError(f"could not take the lock of owner {owner}") from exc


async def expire_leases_of_dead_owners(store: Store) -> int:
    """Expire now every live lease of a registered worker whose owner lock is free
    (for ``RESTART_GRACE`` after the server began serving the store, only of one that
    took it since).

    Returns how many leases were expired; they are claimable at once. Only a speed-up
    over waiting out the leases: if the owner is alive after all, fencing rejects it.
    """
    params = {"schema": store.schema, "now": store.clock.sql_now(), "grace": RESTART_GRACE}
    return await transact(
        store, "dead-owner sweep", lambda conn: _rowcount(conn, sql.EXPIRE_DEAD_OWNERS, params)
    )


async def _rowcount(conn: psycopg.AsyncConnection, statement: str, params: dict[str, Any]) -> int:
    return (await conn.execute(statement, params)).rowcount
