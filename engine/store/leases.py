"""Leases on due work: claim, renew, fence, complete, retry and dead-letter.

A work row is available, leased, completed or dead-lettered (``rows.WorkState``).
Claiming it bumps its fencing token and attempt counter in the statement that locks it;
every later write by the owner names owner + token and needs an unexpired lease
(``statements.leases.held``), so a stale owner (expired, reclaimed, finished) fails
closed with StaleLease and changes nothing. Every such write goes through ``_fenced``:
no row back means the lease is no longer held. The statements are in
``engine.store.statements.leases``; the sweeps that expire leases and dead-letter
overdue work are in ``engine.store.sweeps``.

Time is the store's clock, compared in SQL: every statement takes ``NOW_SQL`` (the
manual clock's instant in tests, PostgreSQL's ``statement_timestamp()`` otherwise), so
workers on different machines cannot skew each other's leases. Expiry is
authoritative: at ``lease_expires_at`` the lease is gone even without a competitor.

The claim is one statement (``CLAIM``) in two passes:

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
- Work whose deadline has passed is never claimed; ``sweeps.sweep_expired_deadlines``
  turns it into a dead letter (``deadline-exceeded``) so it is never stranded.

Claims and the store's epoch. A claim changes nothing anyone outside the worker sees:
nothing runs under a lease before the holder's first write under it commits (an
activity's ``attempt_started``, a timer's firing, ...), and that commit is synchronous,
so it flushes the WAL up to its own record, the claim's included. The claim itself
therefore commits without waiting for its flush (``synchronous_commit`` off for its
transaction), which takes one WAL flush off the path of every instance that is not
already being worked on: what stays on it are the flushes the rules require (the start,
the first attempt's start, and each step's outcome with the next attempt's start). What
a crash can lose is only a claim, before its holder wrote: the row then reverts to its
previous state, and the next claim of it, even by the same owner, gives the same token
again. So a claim names the store's epoch (migration 0029: a random value that
PostgreSQL's crash recovery deletes) and, until its holder's first synchronous commit
succeeds (``confirm``), every write under the lease also requires that epoch
(``statements.leases.held``). After a crash the stale holder fails closed
with StaleLease; the work is claimed again once it is free (at once if the crash lost
the claim, after the lease's expiry otherwise). The first claim after a crash makes the
new epoch (``claim_epoch``); a claim that gets none waits for its flush.

Fencing a commit (``LeaseFence``, plain data: the lease and what the commit does with
it): the lease must still be this owner's in the same transaction that writes the
outcome. A worker's commit comes here (``commit``, or ``stage`` and ``stage_set`` for
the members of a group commit, ``engine.store.group_commit``), and its first transition
carries the fence in its own statement (``FENCED_WRITE``, or ``FENCED_SET`` for a
group's members): the lease's work row is locked first, with the predicates of
``held``, and the transition is written only while they hold; when it is, the same
statement completes the lease (an outcome) and, for eager dispatch, inserts the next
activity's work row already leased to the same owner, so the worker runs it right after
this commit without a claim. An outcome can never be durable while its work is still
claimable, nor the work complete without its outcome; no row back means the lease was
lost and the whole transaction rolls back. The row lock holds until COMMIT, so nobody
can reclaim the work in between. Crash semantics are unchanged: a lease never completed
expires, the attempt is in flight, and redelivery records it as unknown. Without a
transition to carry it (nothing to record), or when the transition had been written
before (an exact replay, which writes nothing), statements of its own do the same
(``CHECK_LEASE``, ``COMPLETE_LEASE``, ``COMPLETE_AND_LEASE_NEXT``).

A fencing token's path is therefore short and one way: ``claim`` hands it to the
worker (``engine.worker.loop``), whose processor (``engine.worker.processors``) commits
through ``engine.worker.leased_commits``, which queues the commit with its fence in the
group commit (``engine.store.group_commit``), which hands it back here to be written.
The store's transaction runner and message batching carry these statements without
knowing what a lease is.

``NOTIFY`` on the store's channel is sent when a retry makes work due now; it is a
wake-up hint only, workers also poll.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from itertools import groupby
from typing import Any

import psycopg

from engine.model.canonical import utc
from engine.model.errors import WaylineError
from engine.model.events import Event
from engine.model.identifiers import id_problem
from engine.model.limits import MAX_FAILURE_DETAIL_LENGTH, MAX_LEASE_DURATION, MAX_WORK_CLAIM_ITEMS
from engine.model.transitions import Transition, WorkKind
from engine.store import batches, commits, offers, seams
from engine.store.commits import CommitResult
from engine.store.errors import CorruptStore, StaleLease, StoreError
from engine.store.rows import event_from_row, payload_text, work_kind
from engine.store.statements import leases as sql
from engine.store.statements import transitions as transition_sql
from engine.store.store import Store, one_statement, ready_to_write
from engine.store.transactions import transact

log = logging.getLogger("wayline.leases")


class WorkRequestInvalid(WaylineError, ValueError):
    """A lease or dead-letter request breaks a bound or a rule; nothing reached the database."""


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
    pending: PendingClaim | None = field(default=None, compare=False)
    """Set when the claim committed without waiting for its flush (see the module);
    None when the lease was durable from the start (a synchronous claim, or handed on
    by a fenced write)."""
    offer: Offer | None = field(default=None, compare=False)
    """Set when this lease was offered to the worker rather than claimed
    (``engine.store.offers``): until its first write is committed, the worker does not
    hold it, and that write takes it (``TAKING_WRITE``)."""


@dataclass
class PendingClaim:
    """A claim committed without waiting for its WAL to be flushed, in the store's
    ``epoch``. ``durable`` once a synchronous commit under its lease has succeeded: that
    commit flushed the WAL up to its own record, the claim's included. Shared by every
    copy of the lease (a renewal's, say), so one confirmation serves them all."""

    epoch: str
    durable: bool = False


@dataclass
class Offer:
    """A lease offered to the worker with a new instance's first step, taken by the
    worker's first write under it. ``taken`` once that write committed; shared by every
    copy of the lease, like ``PendingClaim``."""

    taken: bool = False


def confirm(lease: Lease) -> None:
    """Note that a synchronous commit under ``lease`` has succeeded: its claim is
    durable, and later writes no longer require the epoch it was claimed in (a crash
    after this point must not cost the holder a lease the server still has); an offered
    lease is held from then on."""
    if lease.pending is not None:
        lease.pending.durable = True
    if lease.offer is not None:
        lease.offer.taken = True


def offered(text: str, owner: str, lease_for: timedelta, now: datetime) -> Lease | None:
    """The lease ``owner`` would hold for ``lease_for`` by taking the offer a NOTIFY
    payload ``text`` makes (``engine.store.offers``), untaken; None when it offers
    nothing due ``now``."""
    offer = offers.read(text, now)
    if offer is None:
        return None
    work = offer.work
    return Lease(
        work_id=work["work_id"],
        kind=WorkKind(work["kind"]),
        instance_id=work["instance_id"],
        sequence=work["sequence"],
        payload=payload_text(work["payload"]),
        tenant_id=offer.tenant,
        target=work["target"],
        owner=owner,
        token=1,  # as ``TAKING_WRITE`` leases it: the work's first lease, and attempt
        attempt=1,
        claimed_at=now,
        expires_at=min(now + lease_for, work["deadline"]),
        deadline=work["deadline"],
        events=offer.events,
        offer=Offer(),
    )


def untaken(lease: Lease) -> bool:
    """Whether ``lease`` is an offer no write has taken yet: the worker does not hold it."""
    return lease.offer is not None and not lease.offer.taken


def _never_taken(lease: Lease, why: str = "") -> StaleLease:
    """The refusal of a write under an offer no write has taken (``why`` says more)."""
    return StaleLease(f"work {lease.work_id} was offered to {lease.owner}, who never took it{why}")


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
    check_owner(owner)
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
        return await (await conn.execute(sql.CLAIM, params)).fetchall()

    rows = await transact(store, "claim", body, single_statement=True)
    items = [list(group) for _, group in groupby(rows, key=lambda row: row[0])]
    return [
        _lease(item[0], _claimed_history(item), _pending(item[0]))
        for item in items
        if _leased(item[0])
    ]


def _pending(row: tuple[Any, ...]) -> PendingClaim | None:
    """How durable a claimed row's lease is: its last column is the store's epoch when
    the claim committed without waiting for its flush, NULL when it waited."""
    epoch = row[-1]
    return None if epoch is None else PendingClaim(epoch)


def _claimed_history(rows: list[tuple[Any, ...]]) -> tuple[Event, ...]:
    """The events that came with a claimed item (none when its history was long). A row
    that breaks the model leaves them out: the processor then reads the history itself
    and meets the damage there, for that item alone."""
    try:
        head = sql.CLAIM_COLUMNS
        return tuple(event_from_row(row[head:-1]) for row in rows if row[head] is not None)
    except CorruptStore:
        return ()


CLAIM_HISTORY_EVENTS = 16
"""A claim also returns the history of each claimed item's instance that has at most
this many events (a new instance's first step, typically): its processor starts from
that state instead of reading it (a stale one fails the commit's sequence check and is
then read). Longer histories are read, and cached, by the worker as before."""


def _leased(row: tuple[Any, ...]) -> bool:
    """Whether a row that starts with ``LEASE_COLUMNS`` is leased: a claim or a hand-on
    of work whose instance an incident hold covers parks the row instead (migration
    0017's trigger), and the row comes back with no owner."""
    return bool(row[7])


def _lease(
    row: tuple[Any, ...], events: tuple[Event, ...] = (), pending: PendingClaim | None = None
) -> Lease:
    """The Lease of a row that starts with ``LEASE_COLUMNS``, which are the Lease's
    fields in order: identity, payload, tenant and target, owner, token and attempt,
    then its times."""
    work_id, kind, instance, sequence, payload, *holder = row[:10]
    times = (utc(t) for t in row[10:13])
    # Engine payloads are canonical JSON; a damaged one must not fail the whole claim,
    # its processor rejects it and dead-letters that one item.
    text = payload_text(payload)
    return Lease(
        work_id, work_kind(kind), instance, sequence, text, *holder, *times, events, pending
    )


# The holder's writes --------------------------------------------------------------------


async def renew(store: Store, lease: Lease, extend: timedelta) -> Lease:
    """Extend a held lease to ``min(now + extend, deadline)``; the token is unchanged.

    StaleLease when the lease expired (even with no competitor), was reclaimed or was
    finished, or is an offer no write has taken (``_fenced``).
    """
    _check_duration("lease extension", extend)
    params = {**_held(lease, store.clock.sql_now()), "extend": extend}

    async def body(conn: psycopg.AsyncConnection) -> tuple[Any, ...]:
        return await _fenced(conn, sql.RENEW_LEASE, params, lease)

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


async def park(store: Store, lease: Lease, until: datetime, code: str, seen: int) -> None:
    """``retry_at`` for work of an instance its holder read paused at sequence ``seen``:
    pushed back to ``until`` only while the instance is still there, due now otherwise
    (``PARK_LEASE``: a resume that committed after the read re-armed everything but this
    leased row)."""
    params = {**_retry_params(lease, until, code, store.clock.sql_now()), "seen": seen}
    await transact(
        store,
        f"parking of {lease.work_id}",
        lambda conn: _retry(conn, lease, params, store.channel, sql.PARK_LEASE),
    )


async def dead_letter(store: Store, lease: Lease, code: str, detail: str = "") -> None:
    """Park the work as a dead letter (state 4) with ``code``, for an operator to resolve;
    ``detail`` says more where a code cannot (``work.failure_detail``, bounded)."""
    params = _dead_letter_params(lease, code, store.clock.sql_now(), detail)
    await transact(
        store,
        f"dead-lettering of {lease.work_id}",
        lambda conn: _fenced(conn, sql.DEAD_LETTER_LEASE, params, lease),
    )


async def check_on(conn: psycopg.AsyncConnection, lease: Lease, now: datetime | None) -> None:
    """Inside the caller's transaction: lock the work row, or raise StaleLease.

    ``now`` is the store clock's ``sql_now()`` (None: PostgreSQL's clock). Holding the
    row lock keeps the lease from being reclaimed while the caller stages its writes;
    the finishing write re-checks expiry, so a lease that expires meanwhile still fails.
    """
    await _fenced(conn, sql.CHECK_LEASE, _held(lease, now), lease)


async def complete_on(conn: psycopg.AsyncConnection, lease: Lease, now: datetime | None) -> None:
    """Complete the lease inside the caller's transaction (never commits).

    A worker records an outcome transition and completes its lease in one PostgreSQL
    transaction, so the outcome is durable if and only if the work is done. Raises
    StaleLease (the caller must roll back); driver errors propagate to the caller.
    """
    await _fenced(conn, sql.COMPLETE_LEASE, _held(lease, now), lease)


async def dead_letter_on(
    conn: psycopg.AsyncConnection, lease: Lease, code: str, now: datetime | None
) -> None:
    """``dead_letter`` inside the caller's transaction."""
    await _fenced(conn, sql.DEAD_LETTER_LEASE, _dead_letter_params(lease, code, now), lease)


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


def _dead_letter_params(
    lease: Lease, code: str, now: datetime | None, detail: str = ""
) -> dict[str, Any]:
    _check_code(code)
    return {**_held(lease, now), "code": code, "detail": detail[:MAX_FAILURE_DETAIL_LENGTH]}


async def _retry(
    conn: psycopg.AsyncConnection,
    lease: Lease,
    params: dict[str, Any],
    channel: str,
    statement: str = sql.RETRY_LEASE,
) -> None:
    (due,) = await _fenced(conn, statement, params, lease)
    if due and channel:
        await conn.execute(transition_sql.NOTIFY_WORK, {"channel": channel})


def _held(lease: Lease, now: datetime | None) -> dict[str, Any]:
    """The parameters of ``HELD``: the work's key, the lease and the store's clock; and
    the work's position, which a group commit's set finishes the lease by too. The
    work's instance is ``work_instance``, apart from a transition's ``instance``, which
    the statements of a fenced commit take too."""
    return {
        "work_instance": lease.instance_id,
        "work_id": lease.work_id,
        "work_sequence": lease.sequence,
        "owner": lease.owner,
        "token": lease.token,
        "epoch": None if lease.pending is None or lease.pending.durable else lease.pending.epoch,
        "now": now,
    }


async def _fenced(
    conn: psycopg.AsyncConnection,
    statement: str,
    params: dict[str, Any],
    lease: Lease,
    takes: bool = False,
) -> tuple[Any, ...]:
    """Run a statement guarded by ``HELD`` (``takes``: one that takes an offered lease,
    ``TAKING_WRITE``); no row means the lease is no longer held (or was never taken).

    An offer no write has taken holds nothing, so only a taking write runs under it: its
    owner and token can name a lease the same worker holds under a claim of its own (the
    work claimed again after a failover lost the write that took the offer), which a
    renewal, a release or a completion under the offer would then act on."""
    if untaken(lease) and not takes:
        raise _never_taken(lease)
    row = await seams.lease_write(conn, statement, params, takes)
    if row is None:
        if takes:
            raise StaleLease(
                f"work {lease.work_id} offered to {lease.owner} was taken by another "
                "worker, or its instance moved on, before the offer was taken"
            )
        raise StaleLease(
            f"lease {lease.token} of {lease.owner} on work {lease.work_id} is no longer "
            "held: it expired, was reclaimed or was finished"
        )
    return row


# Fencing a commit -------------------------------------------------------------------------


@dataclass(frozen=True)
class LeaseFence:
    """The lease a commit is fenced by, and what the commit does with it (see the
    module): ``finish`` completes it; ``lease_next`` names a work row the commit writes
    for the lease's own instance (its next step) that is leased on to the same owner for
    ``lease_for`` (eager dispatch)."""

    lease: Lease
    finish: bool = True
    lease_next: str = ""
    lease_for: timedelta = timedelta(seconds=30)

    def params(self, now: datetime | None) -> dict[str, Any]:
        """The lease's parameters in the statements that write under it."""
        held = _held(self.lease, now)
        return {**held, "next_id": self.lease_next, "lease": self.lease_for, "finish": self.finish}


@dataclass(frozen=True)
class Committed:
    """A commit's results, and the lease its fence handed on (None: none)."""

    results: list[CommitResult]
    next_lease: Lease | None = None


async def commit(store: Store, transitions: Sequence[Transition], fence: LeaseFence) -> Committed:
    """Commit ``transitions`` fenced by ``fence`` in one transaction of their own.

    A processor uses this to record an outcome, the decision that follows it and (for
    a child) its parent's news, while proving it still holds its lease and settling
    the lease in the same transaction. A lone transition that carries the fence is one
    statement sent alone (``Store.run_commit``); when its answer was lost and it settled
    as committed, the lease it handed on is read back (``_handed_on``)."""
    transitions = ready_to_write(transitions)
    handed: list[Lease | None] = [None]

    async def stage_it(conn: psycopg.AsyncConnection) -> tuple[list[CommitResult], str]:
        committed, xid = await stage(conn, store, transitions, fence)
        handed[0] = committed.next_lease
        return committed.results, xid

    alone = _carries(transitions) and one_statement(transitions)
    results, xid = await store.run_commit(
        transitions, stage_it, alone=alone, always=True, finished=finished_by(fence)
    )
    if alone and not xid:  # settled as committed without its answer
        return Committed(results, await _handed_on(store, fence))
    return Committed(results, handed[0])


async def commit_built(
    store: Store,
    fence: LeaseFence,
    build: Callable[[psycopg.AsyncConnection], Awaitable[Sequence[Transition]]],
    what: str,
) -> Committed:
    """Commit the transitions ``build`` returns, fenced by ``fence``, in one transaction
    that ``build`` runs in first: whatever ``build`` writes on the connection it is
    given commits exactly when those transitions do (a state machine's advance, whose
    database writes and new state are one step). The lease is proved by the fenced
    write at the end, not locked while ``build`` runs, so the worker keeps renewing it
    meanwhile (a lock held from the start would block every renewal until COMMIT). A
    lost lease, a conflict or a failure of ``build`` rolls all of it back; a lost COMMIT
    answer is settled like any other. ``what`` names the commit in errors."""
    built: list[Transition] = []
    handed: list[Lease | None] = [None]

    async def stage_it(conn: psycopg.AsyncConnection) -> tuple[list[CommitResult], str]:
        built[:] = ready_to_write(await build(conn))
        committed, xid = await stage(conn, store, built, fence)
        handed[0] = committed.next_lease
        return committed.results, xid

    results, _ = await store.run_commit(
        built, stage_it, alone=False, always=True, what=what, finished=finished_by(fence)
    )
    return Committed(results, handed[0])


def finished_by(fence: LeaseFence) -> tuple[commits.FinishedLease, ...]:
    """The lease a commit fenced by ``fence`` completes: when it finishes, or hands the
    next step on (which completes it too); none when the commit only proves it."""
    if not (fence.finish or fence.lease_next):
        return ()
    lease = fence.lease
    return (commits.FinishedLease(lease.instance_id, lease.work_id, lease.token),)


async def stage(
    conn: psycopg.AsyncConnection,
    store: Store,
    transitions: Sequence[Transition],
    fence: LeaseFence,
    xid: str = "",
) -> tuple[Committed, str]:
    """Write the transitions fenced by the lease, all in the caller's transaction
    (whose id ``xid`` is, when already known), which is not committed.

    The first transition's statement carries the fence (``FENCED_WRITE``): it writes
    only under the held lease, locks its work row and settles the lease in the same
    statement. Without a transition on an existing instance to carry it, the lease is
    checked first and settled last by statements of its own; when the carrying
    statement wrote nothing (an exact replay), it still proved the lease, which is
    then settled on its own. A start among them (a child created with its parent's news
    of it) belongs to the lease's team, as every instance a worker creates does.
    """
    now = store.clock.sql_now()
    carried = _carries(transitions)
    if untaken(fence.lease) and not (carried and _takes(fence)):
        raise _never_taken(fence.lease, ": only a transition that starts the work takes an offer")
    if not carried and not fence.finish:  # a finishing write proves the lease itself
        await check_on(conn, fence.lease, now)
    results, next_lease, settled = [], None, False
    for k, transition in enumerate(transitions):
        channel = _channel(store, transition, fence)
        if k == 0 and carried:
            write = commits.write_of(transition, channel, store.ended_channel)
            row = await _write_fenced(conn, write, fence, now)
            written, xid = await commits.written_by(conn, transition, channel, row)
            next_lease, settled = _handed_on_by(fence, row) if written else None, written
        else:
            written, xid = await commits.stage(
                conn, transition, channel, fence.lease.tenant_id, ended=store.ended_channel
            )
        results.append(CommitResult(transition.transition_id, replayed=not written))
    if not settled:
        next_lease = await _settle(conn, fence, now)
    return Committed(results, next_lease), xid or await commits.current_xact_id(conn)


async def stage_set(
    conn: psycopg.AsyncConnection, store: Store, members: Sequence[tuple[Transition, LeaseFence]]
) -> tuple[list[Committed], str] | None:
    """Write the lone transitions of several fenced commits (each carries its fence in
    one statement) in one transaction opened here and left open, in one round trip:
    ``FENCED_SET`` writes them together (see its docstring), members of one instance in
    successive statements of the message (``set_rounds``).

    None when any of them was not written cleanly (an exact replay, a moved instance, a
    lost lease, ...): the caller rolls back and commits each on its own, where every
    such case has its answer. Otherwise each member's result and the transaction id.
    """
    now = store.clock.sql_now()
    params = []
    for transition, fence in members:
        write = commits.write_of(
            transition, _channel(store, transition, fence), store.ended_channel
        )
        params.append({**write.params, **fence.params(now)})
    await conn.set_autocommit(True)  # the message opens the transaction itself
    rows = await write_set(conn, params)
    if not all(commits.written_cleanly(row) for row in rows):
        return None
    committed = [
        Committed([CommitResult(t.transition_id)], _handed_on_by(fence, row))
        for (t, fence), row in zip(members, rows, strict=True)
    ]
    return committed, rows[0][0]


async def write_set(
    conn: psycopg.AsyncConnection, members: Sequence[dict[str, Any]]
) -> Sequence[tuple[Any, ...] | None]:
    """``FENCED_WRITE`` for each member's parameters (one ``now``), as ``FENCED_SET``
    statements in one message on ``conn``; each member's row (None: its lease was not
    held, it wrote nothing). The caller commits."""
    rounds = set_rounds(members)

    async def send() -> list[tuple[Any, ...] | None]:
        calls = [(sql.FENCED_SET, set_params([members[k] for k in r])) for r in rounds]
        rows: list[tuple[Any, ...] | None] = [None] * len(members)
        for placed, answer in zip(rounds, await batches.send(conn, calls), strict=True):
            for k, row in zip(placed, answer, strict=True):
                rows[k] = row[2:] if row[1] else None  # in FENCED_WRITE's shape
        return rows

    writes = [seams.LeaseWrite(sql.FENCED_WRITE, params) for params in members]
    return await seams.lease_writes(conn, writes, send)


def set_rounds(members: Sequence[dict[str, Any]]) -> list[list[int]]:
    """The positions of ``members`` in statements whose members touch distinct
    instances, in order: a member's instance appears once per statement, and a later
    member of the same instance goes to a later statement."""
    placed: list[list[int]] = []
    levels: dict[str, int] = {}
    for k, params in enumerate(members):
        level = levels.get(params["instance"], 0)
        levels[params["instance"]] = level + 1
        if level == len(placed):
            placed.append([])
        placed[level].append(k)
    return placed


MEMBER_FIELDS_SENT = tuple(n for n, _ in sql.MEMBER_FIELDS if n not in ("m", "history", "work"))
"""The scalar values taken from each member's parameters as they are."""


def set_params(members: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The parameters of ``FENCED_SET`` for ``members`` (of one store: one ``now``). The
    history and work rows, already JSON, are nested as they are."""
    sent = []
    for m, values in enumerate(members):
        scalars = {name: values[name] for name in MEMBER_FIELDS_SENT}
        scalars["m"] = m
        head = commits.to_json(scalars)[:-1]
        sent.append(f'{head}, "history": {values["history"]}, "work": {values["work"]}}}')
    return {"members": "[" + ", ".join(sent) + "]", "now": members[0]["now"]}


async def _write_fenced(
    conn: psycopg.AsyncConnection, write: commits.Write, fence: LeaseFence, now: datetime | None
) -> tuple[Any, ...]:
    """``write`` with the lease's parts (``FENCED_WRITE``); StaleLease if not held."""
    with commits.id_taken(write.transition):
        params = {**write.params, **fence.params(now)}
        if untaken(fence.lease):  # leased as the offer said: its expiry is the worker's
            params["expires"] = fence.lease.expires_at
            return await _fenced(conn, sql.TAKING_WRITE, params, fence.lease, takes=True)
        return await _fenced(conn, sql.FENCED_WRITE, params, fence.lease)


def _takes(fence: LeaseFence) -> bool:
    """Whether a write fenced by ``fence`` may take an offered lease: one that keeps the
    lease and hands nothing on (``TAKING_WRITE`` never settles it)."""
    return not (fence.finish or fence.lease_next)


def _handed_on_by(fence: LeaseFence, row: tuple[Any, ...]) -> Lease | None:
    """The lease a fenced write that wrote its transition handed on, from its row."""
    columns = row[transition_sql.WRITE_COLUMNS :]
    handed = fence.lease_next and columns[0] is not None and _leased(columns)
    return _lease(columns) if handed else None


async def _settle(
    conn: psycopg.AsyncConnection, fence: LeaseFence, now: datetime | None
) -> Lease | None:
    """Settle the lease when no transition statement did: complete it, and lease the
    next work on (an exact replay with eager dispatch) in the same round trip."""
    if fence.lease_next:
        row = await _fenced(conn, sql.COMPLETE_AND_LEASE_NEXT, fence.params(now), fence.lease)
        return _lease(row) if _leased(row) else None
    if fence.finish:
        await complete_on(conn, fence.lease, now)
    return None


async def _handed_on(store: Store, fence: LeaseFence) -> Lease | None:
    """The lease a write settled as committed without its answer handed on: without
    it that step would sit leased to this worker until the lease expired and then
    count as unknown, though it never ran. The write has committed; if this read fails
    too, only that lease is left to expire."""
    if not fence.lease_next:
        return None
    try:
        async with asyncio.timeout(store.deadlines.operation), store.reading() as conn:
            row = await (
                await conn.execute(sql.HANDED_ON, fence.params(store.clock.sql_now()))
            ).fetchone()
    except (StoreError, psycopg.Error, OSError, TimeoutError):
        log.warning("the lease handed on by a settled write could not be read back")
        return None
    return _lease(row) if row is not None else None


def _carries(transitions: Sequence[Transition]) -> bool:
    """Whether the first transition's statement can carry a fence: it writes on an
    existing instance (a start has no lease to prove)."""
    return bool(transitions) and transitions[0].expected_sequence > 0


def _channel(store: Store, transition: Transition, fence: LeaseFence) -> str:
    """Where a transition's new work is announced: nowhere when its only work is the
    lease the fence hands on (eager dispatch), which no other worker could claim."""
    quiet = all(w.work_id == fence.lease_next for w in transition.work)
    return "" if quiet else store.channel


def check_owner(owner: str) -> None:
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
