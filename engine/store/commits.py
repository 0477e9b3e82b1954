"""Committing transitions: one PostgreSQL transaction, all of it or none.

The order inside the transaction:
1. one statement writes the transition: ``START_TRANSITION`` for a start (the instance
   row is created at its committed position), ``WRITE_TRANSITION`` for the rest (the
   instance row is locked ``FOR UPDATE``). Either reads the ledger row of the
   transition id and the transaction id (``pg_current_xact_id``, kept to settle an
   unknown COMMIT), and writes only when the id is new and, for ``WRITE_TRANSITION``,
   the instance is at the expected sequence and pinned definition: the ledger row, the
   history rows, the work rows (with the instance's tenant) and the instance's move
   (position, status, pinned definition after a migration, archive time when the last
   event is terminal), with the ``NOTIFY`` of step 3. What it returns
   says which case it was: the same fingerprint in the ledger is an exact replay
   (success, nothing written), another a DuplicateTransition; a position mismatch or
   an existing instance is re-checked against the ledger in a fresh statement (a
   concurrent commit of the very same transition is an exact replay, not a conflict).
   A worker's commit fenced by its lease uses ``WRITE_TRANSITION`` with the lease's
   parts (``FENCED_WRITE``, ``engine.store.leases``): written only while the lease is
   held, and the lease settled in the same statement. The statements are in
   ``engine.store.statements.transitions``;
2. when the instance ends, retire its work that nobody holds (a losing race timer, a
   retry that will never run): nothing is left waiting for an instance that is over
   (in step 1's statement, or after it when the ending transition made work itself);
   on ``resumed``, make the instance's parked work (processors park work that arrives
   while the instance is paused) available again at once; when the transition crosses
   a snapshot interval, write the snapshot of the state it ends in
   (``engine.store.snapshots``), so the snapshot commits exactly when it does;
3. ``NOTIFY`` (a wake-up hint only), then COMMIT: on the store's work channel when
   work became due, or, when the transition ends the instance, on its end channel with
   the instance id (``engine.store.channels``; the end retires the instance's unleased
   work, so no worker is woken for it). Either rides in step 1's statement.

Any failure before COMMIT is NOT_COMMITTED. A failure of COMMIT itself is UNKNOWN until
settled (``engine.store.transactions`` runs every transaction and calls ``settle``):
``pg_xact_status`` on the transaction id from a fresh connection says committed or
aborted, checked against the ledger (after a failover the id may be another
transaction's); if the server cannot say, the ledger is consulted (``reconcile_on``); a
commit that wrote no transition but completed leases is settled by their work rows; a
commit found committed is said committed only once the server confirms it durable,
synchronous standbys included (``durable``); if nothing answers, CommitUnknown is raised
and the caller must reconcile before doing anything else.

A transition that needs only step 1 and commits alone is sent as that one statement in
autocommit (``Store``): it is its own transaction. A failure the server answers wrote
nothing, since no statement writes part of a transition (every write is gated on
``ok``, and a ledger id taken meanwhile fails the whole statement). A lost answer is
settled by the session instead of a transaction id (``settle_session``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import msgspec
import psycopg

from engine.model.events import EventKind
from engine.model.pinned_code import pinned_targets
from engine.model.transitions import Transition
from engine.store import offers, sessions, snapshots
from engine.store.errors import (
    ActiveExecutionExists,
    CommitUnknown,
    DuplicateTransition,
    InstanceExists,
    InstanceNotFound,
    Reconciliation,
    SequenceConflict,
    StartVersionMoved,
    StoreError,
)
from engine.store.rows import HISTORY_FIELDS, WORK_FIELDS, event_row, status_after, work_row
from engine.store.sessions import Session
from engine.store.statements import holds as hold_sql
from engine.store.statements import leases as lease_sql
from engine.store.statements import transitions as sql

LEDGER_KEY = "transitions_pkey"
"""The ledger's key, (instance_id, transition_id) since migration 0027, which kept its
name: a statement that fails it lost the race for its transition id."""

SETTLE_ATTEMPTS = 20
SETTLE_INTERVAL_SECONDS = 0.1
"""How long to wait for the old backend to finish before calling an outcome unknown."""


@dataclass(frozen=True)
class FinishedLease:
    """A lease a commit completes: its work row's key and fencing token. A commit that
    writes no transition (an exact replay, an obsolete step) is settled by these rows,
    which say what it wrote, rather than by its transaction id (see ``settle``)."""

    instance_id: str
    work_id: str
    token: int


@dataclass(frozen=True)
class CommitResult:
    """A committed transition. ``replayed``: it had been committed before (exact replay)."""

    transition_id: str
    replayed: bool = False


async def stage(
    conn: psycopg.AsyncConnection,
    transition: Transition,
    channel: str = "",
    tenant: str = "",
    *,
    ended: str = "",
) -> tuple[bool, str]:
    """Write ``transition`` in the caller's open transaction; never commits.

    Returns (written, xid): ``written`` is False for an exact replay (nothing written).
    Raises a NOT_COMMITTED StoreError for conflicts; the caller's transaction must then
    be rolled back. ``tenant`` (a team) is recorded when the transition creates the
    instance; every work row takes its instance's tenant, which claims use for fairness.
    A worker's write under its lease is ``leases.stage``: the same statement with the
    lease's parts, whose answer ``written_by`` reads the same way.
    """
    if transition.expected_sequence == 0:
        written, xid = await _start(conn, transition, channel, tenant, ended)
        if written:
            await _after_write(conn, transition, channel)
        return written, xid
    write = write_of(transition, channel, ended)
    with id_taken(transition):
        row = await (await conn.execute(write.statement, write.params)).fetchone()
    return await written_by(conn, transition, channel, row)


async def _start(
    conn: psycopg.AsyncConnection, transition: Transition, channel: str, tenant: str, ended: str
) -> tuple[bool, str]:
    """Run ``START_TRANSITION``: (True, xid) when written, (False, xid) for an exact
    replay; raises InstanceExists, DuplicateTransition or (a ``latest_only`` start)
    StartVersionMoved."""
    params = {
        **_params(transition, channel, ended),
        "tenant": tenant,
        "created": transition.events[0].occurred_at,
        "parent_key": transition.parent_key,
        "latest_only": transition.latest_only,
    }
    if params["notify"] and params["channel"] == channel:  # its new work, announced
        params["payload"] = offers.payload(transition, tenant, params["history"], params["work"])
    with id_taken(transition):
        row = await (await conn.execute(sql.START_TRANSITION, params)).fetchone()
    xid, existing, created, _, startable = row
    if existing is not None:
        _check_replay(transition, existing)
        return False, xid
    if not startable:
        raise StartVersionMoved(
            f"{transition.definition} is no longer the latest active version of "
            f"{transition.definition.name}: nothing was written"
        )
    if not created:
        await _recheck(conn, transition, await _blocked(conn, params))
        return False, xid
    return True, xid


async def _blocked(conn: psycopg.AsyncConnection, params: dict[str, Any]) -> StoreError:
    """Why a start was not written (``START_BLOCKED``): its id exists, or an active
    instance of the definition holds its parent key."""
    row = await (await conn.execute(sql.START_BLOCKED, params)).fetchone()
    taken, active = row
    if taken is not None:
        return InstanceExists(f"instance {params['instance']} already exists")
    if active is None:  # the one that held the key ended meanwhile
        return StoreError(f"start of {params['instance']} was not written: it is safe to retry")
    return ActiveExecutionExists(
        f"{params['name']} already has an active execution for parent "
        f"{params['parent_key']}: {active}",
        active,
    )


@contextmanager
def id_taken(transition: Transition) -> Iterator[None]:
    """A statement that failed the ledger's key: the instance's transition id was
    committed meanwhile by a transaction its snapshot did not see (the statement, and
    so its transaction, wrote nothing). Ids are derived from their instance's id
    (``transitions.derived_from``), so no other instance can hold it."""
    try:
        yield
    except psycopg.errors.UniqueViolation as exc:
        if exc.diag.constraint_name == LEDGER_KEY:
            raise _duplicate(transition) from exc
        raise


def _check_replay(transition: Transition, fingerprint: str) -> None:
    if fingerprint != transition.fingerprint:
        raise _duplicate(transition)


def _duplicate(transition: Transition) -> DuplicateTransition:
    return DuplicateTransition(
        f"transition {transition.transition_id} was already committed with other content",
        transition.instance_id,
    )


async def _check_position(
    conn: psycopg.AsyncConnection,
    transition: Transition,
    sequence: int | None,
    name: str,
    version: str,
    fingerprint: str,
) -> None:
    """Raise unless the locked instance row is at the expected position and pin; return
    when the mismatch is this very transition, committed meanwhile (an exact replay)."""
    ref = transition.definition
    if sequence is None:
        raise InstanceNotFound(f"instance {transition.instance_id} does not exist")
    if sequence != transition.expected_sequence:
        await _recheck(
            conn,
            transition,
            SequenceConflict(
                f"instance {transition.instance_id} is at {sequence}, not "
                f"{transition.expected_sequence}: another transition committed first"
            ),
        )
        return
    if (name, version, fingerprint) != (ref.name, ref.version, ref.fingerprint):
        raise SequenceConflict(
            f"instance {transition.instance_id} is pinned to {name}@{version}, not {ref}"
        )
    raise StoreError(f"transition {transition.transition_id} was not written")


async def _recheck(
    conn: psycopg.AsyncConnection, transition: Transition, conflict: StoreError
) -> None:
    """After losing a race: our own transition committed meanwhile is an exact replay."""
    key = {"instance": transition.instance_id, "id": transition.transition_id}
    row = await (await conn.execute(sql.LEDGER_READ, key)).fetchone()
    if row is None:
        raise conflict
    _check_replay(transition, row[0])


@dataclass(frozen=True)
class Write:
    """The statement of a transition on an existing instance, ready to run
    (``WRITE_TRANSITION``; a lease adds its parts to it in ``engine.store.leases``)."""

    transition: Transition
    statement: str
    params: dict[str, Any]


def written_cleanly(row: tuple[Any, ...] | None) -> bool:
    """Whether ``row`` (a transition statement's answer) says the transition was written
    now, and with it a lease's part: no exact replay, no position to re-check."""
    if row is None:
        return False
    existing, moved = row[1], row[sql.WRITE_COLUMNS - 2]
    return existing is None and moved == 1


def write_of(transition: Transition, channel: str, ended: str = "") -> Write:
    """The statement and parameters that write ``transition`` on its instance (new work
    announced on ``channel``, an end on ``ended``; "": nowhere)."""
    pin = transition.definition
    params = {
        **_params(transition, channel, ended),
        "pin_name": pin.name,
        "pin_version": pin.version,
        "pin_fingerprint": pin.fingerprint,
        "retire": transition.terminal and not transition.work,
    }
    return Write(transition, sql.WRITE_TRANSITION, params)


async def written_by(
    conn: psycopg.AsyncConnection, transition: Transition, channel: str, row: tuple[Any, ...]
) -> tuple[bool, str]:
    """What the answer ``row`` of ``transition``'s statement says: (True, xid) when it was
    written (the follow-ups the statement cannot do are done here), (False, xid) for an
    exact replay; raises when the instance, the pin or the id did not allow it."""
    xid, existing, *position, moved, _ = row[: sql.WRITE_COLUMNS]
    if existing is not None:
        _check_replay(transition, existing)
        return False, xid
    if moved != 1:
        await _check_position(conn, transition, *position)
        return False, xid
    await _after_write(conn, transition, channel)
    return True, xid


def _params(transition: Transition, channel: str, ended: str) -> dict[str, Any]:
    """What both transition statements take: the ledger row, the rows, the move, and
    the one NOTIFY the statement sends when it writes (``sql.NOTIFY_IF_WRITTEN``)."""
    ref = transition.migration_target or transition.definition
    status = status_after(transition)
    return {
        "id": transition.transition_id,
        "instance": transition.instance_id,
        "fingerprint": transition.fingerprint,
        "expected": transition.expected_sequence,
        "committed": transition.committed_sequence,
        "at": transition.events[-1].occurred_at,
        "status": None if status is None else int(status),
        "name": ref.name,
        "version": ref.version,
        "def_fingerprint": ref.fingerprint,
        "terminal": transition.terminal,
        **_notice(transition, channel, ended),
        "history": json_rows(HISTORY_FIELDS, (event_row(e) for e in transition.events)),
        "work": json_rows(WORK_FIELDS, (work_row(w) for w in transition.work)),
    }


def _notice(transition: Transition, channel: str, ended: str) -> dict[str, Any]:
    """The statement's NOTIFY: an end on ``ended``, naming the instance (its waiters,
    ``Client.wait``), else new work on ``channel`` (idle workers). Not both: an end
    retires the unleased work it made (``_after_write``), so no worker has anything to
    claim for it. A transition that does neither sends none."""
    if transition.terminal and ended:
        return {"notify": True, "channel": ended, "payload": transition.instance_id}
    return {"notify": bool(transition.work and channel), "channel": channel, "payload": ""}


def one_statement(transition: Transition) -> bool:
    """Whether writing ``transition`` takes its statement alone (no ``_after_write``)."""
    return (
        not (transition.terminal and transition.work)
        and not _resumes(transition)
        and transition.migration_target is None
        and not snapshots.carried(transition)
    )


def _resumes(transition: Transition) -> bool:
    return any(e.kind is EventKind.RESUMED for e in transition.events)


async def _after_write(conn: psycopg.AsyncConnection, transition: Transition, channel: str) -> None:
    """The rare follow-ups a transition statement cannot do itself: retiring work an
    ending transition made, moving the work of a migrated instance's code to its new
    version (``engine.model.pinned_code``), re-arming parked work on resume (with the
    work a hold parked that no hold covers once a migration moved the instance), and the
    snapshot of a transition that crosses an interval (``engine.store.snapshots``)."""
    at = {"at": transition.events[-1].occurred_at, "instance": transition.instance_id}
    if transition.terminal and transition.work:  # ``retired`` cannot see rows it wrote
        await conn.execute(sql.RETIRE_OPEN_WORK, at)
    if (moved_to := transition.migration_target) is not None:
        pinned = pinned_targets(transition.definition)
        await conn.execute(
            sql.RETARGET_PINNED_WORK, {**at, "pinned": pinned, "version": moved_to.version}
        )
    if _resumes(transition):
        rearmed = (await conn.execute(sql.REARM_PARKED_WORK, at)).rowcount
        now = {**at, "now": at["at"]}  # the store's clock: the transition's time
        rearmed += (await conn.execute(hold_sql.UNPARK_RESUMED, now)).rowcount
        if rearmed and channel and not transition.work:
            await conn.execute(sql.NOTIFY_WORK, {"channel": channel})
    if snapshots.carried(transition):
        await snapshots.write(conn, transition)


def json_rows(names: tuple[str, ...], rows: Iterable[tuple[Any, ...]]) -> str:
    """Rows as the JSON array of objects ``insert_rows`` reads (``to_json``)."""
    return to_json([dict(zip(names, row, strict=True)) for row in rows])


def to_json(value: Any) -> str:
    """JSON text of column values as PostgreSQL reads them into their types: times in
    RFC 3339 with their offset, to the microsecond; intervals as ISO 8601 durations; text
    as it is, so that it reaches the server in the connection's encoding like any other
    text parameter. Bytes have no such form here: a bytea value is sent as its hex text
    (``rows.bytea_text``).

    msgspec, not ``json``: every step encodes its rows here, and the standard encoder
    calls back into Python for each time value, several times slower (issue 23)."""
    return _WIRE.encode(value).decode()


_WIRE = msgspec.json.Encoder()


async def reconcile_on(
    conn: psycopg.AsyncConnection, instance_id: str, transition_id: str, fingerprint: str
) -> Reconciliation:
    """What the ledger holds for ``transition_id`` of ``instance_id``: missing, committed
    or conflicting."""
    key = {"instance": instance_id, "id": transition_id}
    row = await (await conn.execute(sql.LEDGER_READ, key)).fetchone()
    if row is None:
        return Reconciliation.MISSING
    return Reconciliation.COMMITTED if row[0] == fingerprint else Reconciliation.CONFLICTING


async def xact_status(conn: psycopg.AsyncConnection, xid: str) -> str | None:
    """``committed``, ``aborted``, ``in progress`` or None (too old to tell).

    An id newer than any this server has seen ("in the future") was given by another
    server: a primary lost before the transaction reached this standby, since promoted.
    Here it never ran, so it is ``aborted`` (``conn`` is rolled back: the error ended its
    transaction)."""
    try:
        row = await (await conn.execute(sql.XACT_STATUS, {"xid": xid})).fetchone()
    except psycopg.errors.InvalidParameterValue:
        await conn.rollback()
        return "aborted"
    return row[0]


async def current_xact_id(conn: psycopg.AsyncConnection) -> str:
    row = await (await conn.execute(sql.CURRENT_XACT)).fetchone()
    return row[0]


async def settle(
    connect,
    written: list[Transition],
    xid: str,
    finished: Sequence[FinishedLease] = (),
    within: float | None = None,
) -> None:
    """Decide an unknown COMMIT: return (committed), or raise NOT_COMMITTED / CommitUnknown.

    ``finished``: the leases the commit completes. When it wrote no transition, their
    work rows decide (``_leases_done``), since no ledger row can show the transaction
    id's answer to be another transaction's (``_judge_commit``). Committed is said only once
    it is also durable (``durable``, within ``within`` seconds)."""
    label = _label(written)
    try:
        async with connect() as conn:
            for _ in range(SETTLE_ATTEMPTS):
                status = await xact_status(conn, xid)
                if status != "in progress":
                    break
                await asyncio.sleep(SETTLE_INTERVAL_SECONDS)
            if status == "in progress":
                raise CommitUnknown(
                    f"commit of {label} is still in progress: reconcile before retrying"
                )
            verdicts = await _verdicts(conn, written)
            if written or not finished:
                _judge_commit(label, written, status, verdicts)
            else:
                _judge_leases(label, *await _leases_done(conn, finished))
            await durable(conn, label, within)
    except (psycopg.Error, OSError, TimeoutError) as exc:
        raise CommitUnknown(
            f"commit of {label} has an unknown outcome: reconcile before retrying"
        ) from exc


def _judge_commit(
    label: str, written: list[Transition], status: str | None, verdicts: list[Reconciliation]
) -> None:
    """Return when the transaction committed what it wrote; raise otherwise (``_judge``).

    PostgreSQL's "committed" is believed only where the ledger holds every transition
    as written: a standby promoted after its primary was lost gives out again the ids
    that primary used and never sent it, so the id's answer may be another
    transaction's. That one wrote nothing of the lost commit (the ledger lacks it), or
    wrote another transition under the same id (the work was claimed again on the
    promoted server and the same attempt started there at another time): either way the
    lost commit did not take effect. (A lease-only update writes no ledger row; what it
    wrote is read instead, ``_leases_done``.)"""
    if status == "committed" and all(v is Reconciliation.COMMITTED for v in verdicts):
        return
    _judge(label, written, verdicts, told=status is not None)


async def durable(conn: psycopg.AsyncConnection, label: str, within: float | None) -> None:
    """Return once what the server committed so far is as durable as an engine commit
    must be; CommitUnknown when that is not confirmed ``within`` seconds.

    A transaction the server says committed may exist on it alone: PostgreSQL commits it
    locally, visible there, when its wait for a synchronous standby ends early (a
    client's deadline ran out and psycopg cancelled the COMMIT, or a settlement ended
    the session that ran it). A standby promoted then lacks it, so "committed" would be
    a write that can be lost. The mark (``DURABLE_MARK``) commits a WAL record of its
    own, after the one settled; its COMMIT returns once the local flush and every
    synchronous standby have it, and WAL reaches them in order."""
    try:
        await conn.commit()  # the settlement's reads: the mark is a transaction of its own
        async with asyncio.timeout(within):
            await conn.execute(sql.DURABLE_MARK)
            await conn.commit()
    except (psycopg.Error, OSError, TimeoutError) as exc:
        raise CommitUnknown(
            f"commit of {label} took effect on the server, which did not confirm it "
            "durable (a synchronous standby may lack it): reconcile before retrying"
        ) from exc


async def _leases_done(
    conn: psycopg.AsyncConnection, finished: Sequence[FinishedLease]
) -> tuple[int, int]:
    """How many of the ``finished`` leases are completed under their token, of how many."""
    params = {
        "instances": [f.instance_id for f in finished],
        "works": [f.work_id for f in finished],
        "tokens": [f.token for f in finished],
    }
    row = await (await conn.execute(lease_sql.FINISHED_LEASES, params)).fetchone()
    return row[0], row[1]


def _judge_leases(label: str, completed: int, named: int) -> None:
    """A lease-only commit's verdict from its work rows: it completed all of its leases
    or none (one transaction), so a mix is something else's doing and stays unknown."""
    if completed == named:
        return
    if completed == 0:
        raise _not_taken(label)
    raise CommitUnknown(f"commit of {label} has an unknown outcome")


async def settle_session(
    connect, written: list[Transition], session: Session | None, within: float | None = None
) -> None:
    """Decide a write sent as one autocommit statement whose answer was lost.

    There is no transaction id to ask about (see ``engine.store.sessions``): the session
    that ran it is ended and waited for, and then the ledger says whether it committed
    (and ``durable`` whether it is durable, within ``within`` seconds). Returns
    (committed), or raises NOT_COMMITTED / CommitUnknown like ``settle``.
    """
    label = _label(written)
    if session is None:  # a connection the pool did not open: nothing names its backend
        raise CommitUnknown(f"write of {label} has an unknown outcome: reconcile it")
    try:
        async with connect() as conn:
            if not await sessions.end(conn, session):
                raise CommitUnknown(f"write of {label} is still running: reconcile before retrying")
            _judge(label, written, await _verdicts(conn, written), told=False)
            await durable(conn, label, within)
    except (psycopg.Error, OSError, TimeoutError) as exc:
        raise CommitUnknown(
            f"write of {label} has an unknown outcome: reconcile before retrying"
        ) from exc


def _label(written: list[Transition]) -> str:
    return ", ".join(t.transition_id for t in written) or "lease update"


async def _verdicts(
    conn: psycopg.AsyncConnection, written: list[Transition]
) -> list[Reconciliation]:
    return [
        await reconcile_on(conn, t.instance_id, t.transition_id, t.fingerprint) for t in written
    ]


def _judge(
    label: str, written: list[Transition], verdicts: list[Reconciliation], told: bool
) -> None:
    """The ledger's verdict once the transaction has ended; ``told``: PostgreSQL said
    it did not commit (nothing else tells an update that wrote no transition and
    completed no lease)."""
    if written and all(v is Reconciliation.COMMITTED for v in verdicts):
        return
    if any(v is Reconciliation.CONFLICTING for v in verdicts):
        raise DuplicateTransition(f"{label}: the id holds other content")
    if not told and not written:
        raise CommitUnknown(f"commit of {label} has an unknown outcome")
    raise _not_taken(label)


def _not_taken(label: str) -> StoreError:
    return StoreError(f"commit of {label} did not take effect: it is safe to retry")
