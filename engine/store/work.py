"""Leases on due work: claim, renew, finish, and the sweeps that keep work moving.

A work row is 1 available, 2 leased, 3 completed or 4 dead-lettered. Claiming it bumps
its fencing token and attempt counter in the statement that locks it; every later
write by the owner names owner + token and needs an unexpired lease, so a stale owner
(expired, reclaimed, finished) fails closed with StaleLease and changes nothing.

Time is the store's clock, compared in SQL: every statement takes ``NOW_SQL`` (the
manual clock's instant in tests, PostgreSQL's ``statement_timestamp()`` otherwise), so
workers on different machines cannot skew each other's leases. Expiry is
authoritative: at ``lease_expires_at`` the lease is gone even without a competitor.

The claim is one statement (see ``CLAIM``) in two passes:

- *Choosing* reads without locks from two indexes: each tenant's oldest ``limit`` due
  rows (a skip scan over the tenants that have available work, then one index range
  per tenant) and the oldest ``limit`` expired leases. They are ranked within their
  tenant by (available_at, work_id) and the first ``limit`` in (rank, available_at,
  work_id) order are chosen, so a claim of N serves N tenants round-robin before it
  takes a second item of any tenant. That fixes each tenant's quota. Within a tenant an
  expired lease ranks before due rows: it is work an instance already started (a dead
  worker's step), so a backlog of new work never holds a recovered instance back.
- *Locking* takes each tenant's quota of due rows in due order with ``FOR UPDATE SKIP
  LOCKED``, walking past rows other claimers hold (concurrent claimers take the next
  rows instead of starving on one window), and the chosen expired leases by id. Both
  locking queries state the eligibility predicates (state, due/expiry, deadline) at
  their own level, and the UPDATE states them again: under READ COMMITTED a row
  changed after the statement's snapshot is re-evaluated (EvalPlanQual) against
  exactly those predicates, so a row completed, dead-lettered or re-leased
  concurrently is skipped instead of resurrected (go-workflow gap f.1).
- Work whose deadline has passed is never claimed; ``sweep_expired_deadlines`` turns
  it into a dead letter (``deadline-exceeded``) so it is never stranded.

Dead workers are noticed quickly: a worker holds a session-level advisory lock named by
its owner id (``hold_owner_lock``) on a dedicated connection. ``expire_leases_of_dead_owners``
tries each registered owner's lock with ``pg_try_advisory_xact_lock``: success means no
session holds it, so that owner's leases expire now. The sweeper's lock is
transaction-scoped and released by its own COMMIT (it never keeps an owner's lock), and
while it is held an owner that comes back waits for it instead of racing the sweep.
This is only a speed-up: a live owner whose lock connection dropped loses its leases,
and fencing rejects its later writes.

``NOTIFY`` on the store's channel is sent when a retry makes work due now; it is a
wake-up hint only, workers also poll.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from itertools import groupby
from typing import Any, TypeVar

import psycopg

from engine.model.canonical import utc
from engine.model.errors import WaylineError
from engine.model.events import Event
from engine.model.identifiers import id_problem
from engine.model.limits import MAX_LEASE_DURATION, MAX_WORK_CLAIM_ITEMS
from engine.model.transitions import WorkKind
from engine.store import seams
from engine.store.clock import NOW_SQL as NOW
from engine.store.commits import NOTIFY_WORK, one_line
from engine.store.errors import (
    CommitUnknown,
    CorruptStore,
    StaleLease,
    StoreError,
    StoreUnavailable,
)
from engine.store.rows import HISTORY_FIELDS, WorkState, event_from_row, lease_columns
from engine.store.store import Store

DEADLINE_EXCEEDED = "deadline-exceeded"
"""Failure code of work whose deadline passed before it was done."""

SWEEP_BATCH = 500
"""Rows one deadline-sweep transaction turns into dead letters (it repeats while full)."""

OWNER_LOCK_WAIT = timedelta(seconds=10)
"""How long ``hold_owner_lock`` waits for a sweeper's momentary hold on the same key
before it decides that another live session already uses the owner id."""

T = TypeVar("T")


class WorkRequestInvalid(WaylineError, ValueError):
    """A lease or dead-letter request breaks a bound or a rule; nothing reached the database."""


class OwnerLockHeld(StoreError):
    """Another live session holds this owner id's lock: two workers share one id."""


@dataclass(frozen=True)
class Lease:
    """A claimed work item; ``owner`` + ``token`` fence every later write."""

    work_id: str
    kind: WorkKind | int
    """A WorkKind, or the raw number when this build does not know it (never guessed)."""
    instance_id: str
    sequence: int
    payload: str | None
    tenant_id: str
    target: str
    owner: str
    token: int
    attempt: int
    claimed_at: datetime
    expires_at: datetime
    deadline: datetime
    events: tuple[Event, ...] = ()
    """The instance's whole history as the claim read it, when that was short
    (``CLAIM_HISTORY_EVENTS``); else empty. Possibly outdated by the time it is used."""


# SQL ----------------------------------------------------------------------------------

WANTED = """(%(kinds)s::smallint[] IS NULL OR w.kind = ANY(%(kinds)s::smallint[]))
    AND (%(targets)s::text[] IS NULL OR w.target = '' OR w.target = ANY(%(targets)s::text[]))"""
"""Kinds and targets this worker can run (NULL: any); '' targets run anywhere."""

ELIGIBLE = f"""((w.state = {WorkState.AVAILABLE} AND w.available_at <= {NOW})
        OR (w.state = {WorkState.LEASED} AND w.lease_expires_at <= {NOW}))
    AND w.deadline > {NOW}"""
"""Claimable now; the UPDATE re-checks it on the row it locked, so a change committed
after the statement's snapshot is never undone."""

HELD = one_line(f"""w.work_id = %(work_id)s AND w.state = {WorkState.LEASED}
    AND w.lease_owner = %(owner)s AND w.lease_token = %(token)s
    AND w.lease_expires_at > {NOW} AND w.deadline > {NOW}""")
"""The caller still holds this exact lease (owner, token, unexpired)."""

LEASE_COLUMNS = lease_columns("w")

CLAIM = one_line(f"""
WITH RECURSIVE tenants AS (
    (SELECT w.tenant_id FROM work w WHERE w.state < {WorkState.LEASED} ORDER BY w.tenant_id LIMIT 1)
    UNION ALL
    SELECT (SELECT w.tenant_id FROM work w
            WHERE w.state < {WorkState.LEASED} AND w.tenant_id > t.tenant_id
            ORDER BY w.tenant_id LIMIT 1)
    FROM tenants t
    WHERE t.tenant_id IS NOT NULL
),
due AS (
    SELECT d.* FROM tenants t
    CROSS JOIN LATERAL (
        SELECT w.work_id, w.tenant_id, w.available_at, w.state FROM work w
        WHERE w.state < {WorkState.LEASED} AND w.tenant_id = t.tenant_id
          AND w.available_at <= {NOW} AND w.deadline > {NOW} AND {WANTED}
        ORDER BY w.available_at, w.work_id
        LIMIT %(limit)s
    ) d
),
expired AS (
    SELECT w.work_id, w.tenant_id, w.available_at, w.state FROM work w
    WHERE w.state = {WorkState.LEASED} AND w.lease_expires_at <= {NOW} AND w.deadline > {NOW}
      AND {WANTED}
    ORDER BY w.lease_expires_at, w.work_id
    LIMIT %(limit)s
),
chosen AS (
    SELECT c.work_id, c.tenant_id, c.state FROM (
        SELECT u.*, row_number() OVER (PARTITION BY u.tenant_id
                                       ORDER BY u.state DESC, u.available_at, u.work_id)
                    AS tenant_rank
        FROM (SELECT * FROM due UNION ALL SELECT * FROM expired) u
    ) c
    ORDER BY c.tenant_rank, c.state DESC, c.available_at, c.work_id
    LIMIT %(limit)s
),
quotas AS (
    SELECT c.tenant_id, count(*) AS quota FROM chosen c
    WHERE c.state = {WorkState.AVAILABLE} GROUP BY c.tenant_id
),
locked_due AS MATERIALIZED (
    SELECT d.work_id FROM quotas q
    CROSS JOIN LATERAL (
        SELECT w.work_id FROM work w
        WHERE w.state < {WorkState.LEASED} AND w.tenant_id = q.tenant_id
          AND w.available_at <= {NOW} AND w.deadline > {NOW} AND {WANTED}
        ORDER BY w.available_at, w.work_id
        LIMIT q.quota
        FOR UPDATE OF w SKIP LOCKED
    ) d
),
locked_expired AS MATERIALIZED (
    SELECT w.work_id FROM chosen c JOIN work w ON w.work_id = c.work_id
    WHERE c.state = {WorkState.LEASED}
      AND w.state = {WorkState.LEASED} AND w.lease_expires_at <= {NOW} AND w.deadline > {NOW}
    FOR UPDATE OF w SKIP LOCKED
),
claimed AS (
    UPDATE work w
    SET state = {WorkState.LEASED},
        attempts = w.attempts + 1,
        lease_token = w.lease_token + 1,
        lease_owner = %(owner)s,
        lease_expires_at = LEAST({NOW} + %(lease)s::interval, w.deadline)
    FROM (SELECT work_id FROM locked_expired
          UNION ALL SELECT work_id FROM locked_due
          LIMIT %(limit)s) l
    WHERE w.work_id = l.work_id AND {ELIGIBLE}
    RETURNING {LEASE_COLUMNS}
)
SELECT c.*, {", ".join(f"h.{name}" for name in HISTORY_FIELDS)}
FROM claimed c
LEFT JOIN LATERAL (
    SELECT * FROM history h
    WHERE h.instance_id = c.instance_id
      AND (SELECT i.sequence FROM instances i WHERE i.instance_id = c.instance_id)
          <= %(history)s
    ORDER BY h.sequence
    LIMIT %(history)s
) h ON true
ORDER BY c.available_at, c.work_id, h.sequence
""")
"""See the module docstring for the two passes. A claim costs index reads in proportion
to the tenants that have available work (not-yet-due timers included) times ``limit``,
never to the size of the backlog, and locks only what it claims.

Per-tenant scans say ``state < 2`` (the same rows as ``state = 1``, by the table's
CHECK) so that only ``work_tenant_due_idx`` matches them: with ``state = 1`` the planner
may pick the global due index and filter by tenant, which walks a large tenant's whole
backlog to find a small tenant's rows. The UPDATE's ``LIMIT`` changes nothing (at most
``limit`` rows are locked) but tells the planner how few rows it joins. So does the
``LIMIT`` of the history read (``CLAIM_HISTORY_EVENTS``): it keeps that read a lookup per
claimed item, which the planner would otherwise join with all of history (a hash join
over the whole table made a 16-item claim at 10^5 due rows take 20 ms instead of 2.5).
"""

RENEW_LEASE = f"""
UPDATE work w SET lease_expires_at = LEAST({NOW} + %(extend)s::interval, w.deadline)
WHERE {HELD}
RETURNING w.lease_expires_at
"""

CHECK_LEASE = f"SELECT 1 FROM work w WHERE {HELD} FOR UPDATE"

COMPLETE_LEASE = f"""
UPDATE work w
SET state = {WorkState.COMPLETED}, completed_at = {NOW}, lease_owner = '', lease_expires_at = NULL
WHERE {HELD}
RETURNING w.work_id
"""

RETRY_LEASE = f"""
UPDATE work w
SET state = {WorkState.AVAILABLE}, available_at = %(available_at)s, failure_code = %(code)s,
    lease_owner = '', lease_expires_at = NULL
WHERE {HELD}
RETURNING w.available_at <= {NOW}
"""
"""Back to available at an explicit time, same fence; the next claim bumps the token.
Returns whether the work is due now (then a NOTIFY wakes idle workers)."""

DEAD_LETTER_LEASE = f"""
UPDATE work w
SET state = {WorkState.DEAD_LETTERED}, failure_code = %(code)s, completed_at = {NOW},
    lease_owner = '', lease_expires_at = NULL
WHERE {HELD}
RETURNING w.work_id
"""

SWEEP_DEADLINES = f"""
WITH overdue AS MATERIALIZED (
    SELECT w.work_id FROM work w
    WHERE w.state IN ({WorkState.AVAILABLE}, {WorkState.LEASED}) AND w.deadline <= {NOW}
      AND (w.state = {WorkState.AVAILABLE} OR w.lease_expires_at <= {NOW})
    ORDER BY w.deadline, w.work_id
    LIMIT %(batch)s
    FOR UPDATE OF w SKIP LOCKED
)
UPDATE work w
SET state = {WorkState.DEAD_LETTERED}, failure_code = %(code)s, completed_at = {NOW},
    lease_owner = '', lease_expires_at = NULL,
    lease_token = GREATEST(w.lease_token, 1)
FROM overdue o
WHERE w.work_id = o.work_id AND w.state IN ({WorkState.AVAILABLE}, {WorkState.LEASED})
  AND w.deadline <= {NOW}
  AND (w.state = {WorkState.AVAILABLE} OR w.lease_expires_at <= {NOW})
"""
"""Open work past its deadline becomes a dead letter. Work never claimed has token 0;
its dead letter gets token 1, because a resolution names a fence (token >= 1)."""


def _owner_lock_key(owner_sql: str) -> str:
    """Two int4 keys: the schema (drills in other schemas never collide) and the owner.

    A hash collision can only make a dead owner look alive (its lock seems held), never
    a live owner look dead, so it costs at most the speed-up.
    """
    return f"hashtext('wayline-owner:' || %(schema)s::text), hashtext({owner_sql})"


TAKE_OWNER_LOCK = f"SELECT pg_advisory_lock({_owner_lock_key('%(owner)s::text')})"
LOCK_WAIT = "SELECT set_config('lock_timeout', %(wait)s, true)"

EXPIRE_DEAD_OWNERS = f"""
WITH leasing AS MATERIALIZED (
    SELECT r.worker_id FROM workers r
    WHERE EXISTS (SELECT 1 FROM work w
                  WHERE w.state = {WorkState.LEASED} AND w.lease_owner = r.worker_id
                    AND w.lease_expires_at > {NOW})
),
dead AS MATERIALIZED (
    SELECT l.worker_id FROM leasing l
    WHERE pg_try_advisory_xact_lock({_owner_lock_key("l.worker_id")})
)
UPDATE work w SET lease_expires_at = {NOW}
FROM dead d
WHERE w.lease_owner = d.worker_id AND w.state = {WorkState.LEASED} AND w.lease_expires_at > {NOW}
"""
"""Only registered workers (rows in ``workers``) are considered: registering is a
worker's promise that it holds its owner lock, so an ad-hoc owner that never took one
is never mistaken for a dead one."""


# Claiming -----------------------------------------------------------------------------


async def claim(
    store: Store,
    owner: str,
    lease: timedelta,
    limit: int,
    kinds: Collection[WorkKind] | None = None,
    targets: Collection[str] | None = None,
) -> list[Lease]:
    """Lease up to ``limit`` due items to ``owner`` for ``lease``; ordered by due time.

    ``kinds`` and ``targets`` narrow the claim to what the caller can run (None: any;
    work with an empty target is runnable by every worker). Each lease ends at
    ``min(now + lease, deadline)``.
    """
    _check_owner(owner)
    _check_duration("lease", lease)
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise WorkRequestInvalid("claim limit must be an integer")
    if not 1 <= limit <= MAX_WORK_CLAIM_ITEMS:
        raise WorkRequestInvalid(
            f"claim limit must be from 1 to MAX_WORK_CLAIM_ITEMS ({MAX_WORK_CLAIM_ITEMS}), "
            f"not {limit}"
        )
    params = {
        "owner": owner,
        "lease": lease,
        "limit": limit,
        "kinds": None if kinds is None else [int(k) for k in kinds],
        "targets": None if targets is None else list(targets),
        "now": store.clock.sql_now(),
        "history": CLAIM_HISTORY_EVENTS,
    }

    async def body(conn: psycopg.AsyncConnection) -> list[tuple[Any, ...]]:
        return await (await conn.execute(CLAIM, params)).fetchall()

    rows = await transact(store, "claim", body, single_statement=True)
    items = [list(group) for _, group in groupby(rows, key=lambda row: row[0])]
    return [_lease(item[0], _claimed_history(item)) for item in items]


def _claimed_history(rows: list[tuple[Any, ...]]) -> tuple[Event, ...]:
    """The events that came with a claimed item (none when its history was long). A row
    that breaks the model leaves them out: the processor then reads the history itself
    and meets the damage there, for that item alone."""
    try:
        return tuple(
            event_from_row(row[CLAIM_COLUMNS:]) for row in rows if row[CLAIM_COLUMNS] is not None
        )
    except CorruptStore:
        return ()


CLAIM_HISTORY_EVENTS = 16
"""A claim also returns the history of each claimed item's instance that has at most
this many events (a new instance's first step, typically): its processor starts from
that state instead of reading it (a stale one fails the commit's sequence check and is
then read). Longer histories are read, and cached, by the worker as before."""
CLAIM_COLUMNS = 14
"""The lease columns at the head of a claim's row (``LEASE_COLUMNS``); a history row's
columns follow."""


def _lease(row: tuple[Any, ...], events: tuple[Event, ...] = ()) -> Lease:
    work_id, kind, instance, sequence, payload, tenant, target, owner, token, attempts = row[:10]
    claimed_at, expires_at, deadline = row[10:13]
    return Lease(
        work_id=work_id,
        kind=work_kind(kind),
        instance_id=instance,
        sequence=sequence,
        # Engine payloads are canonical JSON; a damaged one must not fail the whole
        # claim, its processor rejects it and dead-letters that one item.
        payload=None if payload is None else bytes(payload).decode(errors="replace"),
        tenant_id=tenant,
        target=target,
        owner=owner,
        token=token,
        attempt=attempts,
        claimed_at=utc(claimed_at),
        expires_at=utc(expires_at),
        deadline=utc(deadline),
        events=events,
    )


def work_kind(number: int) -> WorkKind | int:
    """The WorkKind of a stored number, or the number itself when this build lacks it."""
    try:
        return WorkKind(number)
    except ValueError:
        return number


# The holder's writes --------------------------------------------------------------------


async def renew(store: Store, lease: Lease, extend: timedelta) -> Lease:
    """Extend a held lease to ``min(now + extend, deadline)``; the token is unchanged.

    StaleLease when the lease expired (even with no competitor), was reclaimed or was
    finished.
    """
    _check_duration("lease extension", extend)
    params = {**_held(lease, store.clock.sql_now()), "extend": extend}

    async def body(conn: psycopg.AsyncConnection) -> tuple[Any, ...]:
        return await _fenced(conn, RENEW_LEASE, params, lease)

    row = await transact(store, f"renewal of {lease.work_id}", body)
    return replace(lease, expires_at=utc(row[0]))


async def complete(store: Store, lease: Lease) -> None:
    """Mark the work done (state 3) in its own transaction; StaleLease if not held."""
    await transact(
        store,
        f"completion of {lease.work_id}",
        lambda conn: complete_on(conn, lease, store.clock.sql_now()),
    )


async def retry_at(store: Store, lease: Lease, available_at: datetime, code: str) -> None:
    """Release the work to be claimed again at ``available_at``, recording ``code``."""
    params = _retry_params(lease, available_at, code, store.clock.sql_now())
    await transact(
        store, f"retry of {lease.work_id}", lambda conn: _retry(conn, lease, params, store.channel)
    )


async def dead_letter(store: Store, lease: Lease, code: str) -> None:
    """Park the work as a dead letter (state 4) with ``code``, for an operator to resolve."""
    params = _dead_letter_params(lease, code, store.clock.sql_now())
    await transact(
        store,
        f"dead-lettering of {lease.work_id}",
        lambda conn: _fenced(conn, DEAD_LETTER_LEASE, params, lease),
    )


async def check_on(conn: psycopg.AsyncConnection, lease: Lease, now: datetime | None) -> None:
    """Inside the caller's transaction: lock the work row, or raise StaleLease.

    ``now`` is the store clock's ``sql_now()`` (None: PostgreSQL's clock). Holding the
    row lock keeps the lease from being reclaimed while the caller stages its writes;
    the finishing write re-checks expiry, so a lease that expires meanwhile still fails.
    """
    await _fenced(conn, CHECK_LEASE, _held(lease, now), lease)


async def complete_on(conn: psycopg.AsyncConnection, lease: Lease, now: datetime | None) -> None:
    """Complete the lease inside the caller's transaction (never commits).

    A worker records an outcome transition and completes its lease in one PostgreSQL
    transaction, so the outcome is durable if and only if the work is done. Raises
    StaleLease (the caller must roll back); driver errors propagate to the caller.
    """
    await _fenced(conn, COMPLETE_LEASE, _held(lease, now), lease)


async def retry_on(
    conn: psycopg.AsyncConnection,
    lease: Lease,
    available_at: datetime,
    code: str,
    now: datetime | None,
    channel: str = "",
) -> None:
    """``retry_at`` inside the caller's transaction; NOTIFY ``channel`` if due now."""
    await _retry(conn, lease, _retry_params(lease, available_at, code, now), channel)


async def dead_letter_on(
    conn: psycopg.AsyncConnection, lease: Lease, code: str, now: datetime | None
) -> None:
    """``dead_letter`` inside the caller's transaction."""
    await _fenced(conn, DEAD_LETTER_LEASE, _dead_letter_params(lease, code, now), lease)


def _retry_params(
    lease: Lease, available_at: datetime, code: str, now: datetime | None
) -> dict[str, Any]:
    _check_code(code)
    if available_at.tzinfo is None:
        raise WorkRequestInvalid("a retry time must carry a time zone")
    if available_at >= lease.deadline:
        raise WorkRequestInvalid(
            f"work {lease.work_id} must be retried before its deadline "
            f"{lease.deadline.isoformat()}; after it, the work becomes a dead letter"
        )
    return {**_held(lease, now), "available_at": utc(available_at), "code": code}


def _dead_letter_params(lease: Lease, code: str, now: datetime | None) -> dict[str, Any]:
    _check_code(code)
    return {**_held(lease, now), "code": code}


async def _retry(
    conn: psycopg.AsyncConnection, lease: Lease, params: dict[str, Any], channel: str
) -> None:
    (due,) = await _fenced(conn, RETRY_LEASE, params, lease)
    if due and channel:
        await conn.execute(NOTIFY_WORK, {"channel": channel})


def _held(lease: Lease, now: datetime | None) -> dict[str, Any]:
    return {"work_id": lease.work_id, "owner": lease.owner, "token": lease.token, "now": now}


async def _fenced(
    conn: psycopg.AsyncConnection, statement: str, params: dict[str, Any], lease: Lease
) -> tuple[Any, ...]:
    """Run a statement guarded by ``HELD``; no row means the lease is no longer held."""
    row = await seams.lease_write(conn, statement, params)
    if row is None:
        raise StaleLease(
            f"lease {lease.token} of {lease.owner} on work {lease.work_id} is no longer "
            "held: it expired, was reclaimed or was finished"
        )
    return row


# Recovery sweeps ------------------------------------------------------------------------


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
            store, "deadline sweep", lambda conn: _rowcount(conn, SWEEP_DEADLINES, params)
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
    (OwnerLockHeld). Take the lock before the first claim.
    """
    _check_owner(owner)
    if not conn.autocommit:
        raise WorkRequestInvalid(
            "the owner lock needs a dedicated autocommit connection: it lives as long as "
            "that session"
        )
    wait = f"{int(OWNER_LOCK_WAIT.total_seconds() * 1000)}ms"
    try:
        async with conn.transaction():
            await conn.execute(LOCK_WAIT, {"wait": wait})
            await conn.execute(TAKE_OWNER_LOCK, {"schema": schema, "owner": owner})
    except psycopg.errors.LockNotAvailable as exc:
        raise OwnerLockHeld(f"owner id {owner} is in use by another live session") from exc
    except psycopg.OperationalError as exc:
        raise StoreUnavailable(f"could not take the lock of owner {owner}") from exc
    except psycopg.Error as exc:
        raise StoreError(f"could not take the lock of owner {owner}") from exc


async def expire_leases_of_dead_owners(store: Store) -> int:
    """Expire now every live lease of a registered worker whose owner lock is free.

    Returns how many leases were expired; they are claimable at once. Only a speed-up
    over waiting out the leases: if the owner is alive after all, fencing rejects it.
    """
    params = {"schema": store.schema, "now": store.clock.sql_now()}
    return await transact(
        store, "dead-owner sweep", lambda conn: _rowcount(conn, EXPIRE_DEAD_OWNERS, params)
    )


async def _rowcount(conn: psycopg.AsyncConnection, statement: str, params: dict[str, Any]) -> int:
    return (await conn.execute(statement, params)).rowcount


# Transactions and checks ----------------------------------------------------------------


async def transact(
    store: Store,
    what: str,
    body: Callable[[psycopg.AsyncConnection], Awaitable[T]],
    single_statement: bool = False,
) -> T:
    """Run ``body`` in one short transaction on a pooled connection, then commit.

    Classified like every store mutation: an error raised by ``body`` (StaleLease, a
    conflict) or by the driver before COMMIT rolls back and is NOT_COMMITTED; a failed
    COMMIT is CommitUnknown. Messages name ``what``, never driver text.

    ``single_statement``: ``body`` runs one statement, in autocommit, so that statement
    is the whole transaction and no BEGIN or COMMIT round trip is spent; a connection
    lost while it runs is then CommitUnknown (it may have committed).
    """
    async with store.connection() as conn:
        if single_statement:
            await conn.set_autocommit(True)
        try:
            result = await body(conn)
        except psycopg.OperationalError as exc:
            if single_statement:
                raise CommitUnknown(f"{what}: the outcome is unknown") from exc
            await _rollback(conn)
            raise StoreUnavailable(
                f"{what} failed: the database is unavailable; nothing was written"
            ) from exc
        except psycopg.Error as exc:
            await _rollback(conn)
            raise StoreError(
                f"{what} failed: the database refused it; nothing was written"
            ) from exc
        except BaseException:
            await _rollback(conn)
            raise
        if single_statement:
            return result
        try:
            await conn.commit()
        except psycopg.Error as exc:
            raise CommitUnknown(f"{what}: the commit's outcome is unknown") from exc
    return result


async def _rollback(conn: psycopg.AsyncConnection) -> None:
    # A broken connection is discarded by the pool; nothing was committed either way.
    with contextlib.suppress(psycopg.Error):
        await conn.rollback()


def _check_owner(owner: str) -> None:
    problem = id_problem(owner)
    if problem:
        raise WorkRequestInvalid(f"lease owner {problem}")


def _check_duration(what: str, value: timedelta) -> None:
    if not isinstance(value, timedelta) or not timedelta(0) < value <= MAX_LEASE_DURATION:
        raise WorkRequestInvalid(
            f"{what} must be more than 0 and at most MAX_LEASE_DURATION "
            f"({MAX_LEASE_DURATION}), not {value}"
        )


def _check_code(code: str) -> None:
    problem = id_problem(code)
    if problem:
        raise WorkRequestInvalid(f"failure code {problem}")
