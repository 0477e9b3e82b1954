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
   event is terminal), with the ``NOTIFY`` of step 3 when it made work. What it returns
   says which case it was: the same fingerprint in the ledger is an exact replay
   (success, nothing written), another a DuplicateTransition; a position mismatch or
   an existing instance is re-checked against the ledger in a fresh statement (a
   concurrent commit of the very same transition is an exact replay, not a conflict).
   A worker's commit fenced by its lease uses ``WRITE_TRANSITION`` with the lease's
   parts (``engine.store.fencing``): written only while the lease is held, and the
   lease settled in the same statement;
2. when the instance ends, retire its work that nobody holds (a losing race timer, a
   retry that will never run): nothing is left waiting for an instance that is over
   (in step 1's statement, or after it when the ending transition made work itself);
   on ``resumed``, make the instance's parked work (processors park work that arrives
   while the instance is paused) available again at once;
3. ``NOTIFY`` when work became due (a wake-up hint only), then COMMIT.

Any failure before COMMIT is NOT_COMMITTED. A failure of COMMIT itself is UNKNOWN until
settled: ``pg_xact_status`` on the transaction id from a fresh connection says
committed or aborted; if the server cannot say, the ledger is consulted
(``reconcile``); if nothing answers, CommitUnknown is raised and the caller must
reconcile before doing anything else.

A transition that needs only step 1 and commits alone is sent as that one statement in
autocommit (``Store``): it is its own transaction. A failure the server answers wrote
nothing, since no statement writes part of a transition (every write is gated on
``ok``, and a ledger id taken meanwhile fails the whole statement). A lost answer is
settled by the session instead of a transaction id (``settle_session``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

import psycopg

from engine.model.events import EventKind
from engine.model.transitions import Transition
from engine.store import sessions
from engine.store.errors import (
    CommitUnknown,
    DuplicateTransition,
    InstanceExists,
    InstanceNotFound,
    Reconciliation,
    SequenceConflict,
    StoreError,
)
from engine.store.rows import (
    HISTORY_FIELDS,
    WORK_FIELDS,
    WorkState,
    event_row,
    status_after,
    work_row,
)
from engine.store.sessions import Session

LEDGER_KEY = "transitions_pkey"
LEDGER_READ = "SELECT fingerprint FROM transitions WHERE transition_id = %(id)s"


def one_line(statement: str) -> str:
    """``statement`` with its runs of whitespace made single spaces (it has no comments
    or literals with spaces to change). psycopg caches its parsing of a statement's
    placeholders only up to 4096 characters; the longest statements, sent at every
    step, stay under that."""
    return " ".join(statement.split())


def insert_rows(
    table: str,
    names: tuple[str, ...],
    param: str,
    extra: tuple[tuple[str, str], ...] = (),
    returning: str = "",
) -> str:
    """``INSERT`` of the rows sent as one JSON array of objects (``json_rows``): one
    parameter whatever the number of rows and columns, cheap to send and to read; each
    value is read as its column's type (the table's row type). Joined with ``ok``: no
    row goes in unless the instance is where the transition expects it, and every row
    takes its tenant. ``extra`` adds columns computed in SQL (name, expression over
    ``r``)."""
    columns = ", ".join([*names, *(name for name, _ in extra)])
    values = ", ".join(
        [*("ok.tenant_id" if n == "tenant_id" else f"r.{n}" for n in names), *(v for _, v in extra)]
    )
    alias = " AS w" if returning else ""
    return (
        f"INSERT INTO {table}{alias} ({columns})\n"
        f"    SELECT {values}\n"
        f"    FROM json_populate_recordset(NULL::{table}, %({param})s::json) AS r CROSS JOIN ok"
        + (f"\n    RETURNING {returning}" if returning else "")
    )


def gated_writes(work_insert: str = "") -> str:
    """The ledger row, the history rows and the work rows, written only when ``ok`` has
    its row (the instance's tenant): the shared middle of the transition statements.
    ``work_insert`` replaces the plain insert of the work rows (a fenced write leases
    one of them on as it inserts it)."""
    return f"""
ledger AS (
    INSERT INTO transitions (transition_id, instance_id, fingerprint, expected_sequence,
                             committed_sequence, xact_id)
    SELECT %(id)s, %(instance)s, %(fingerprint)s, %(expected)s, %(committed)s,
           pg_current_xact_id()
    FROM ok
),
events AS (
    {insert_rows("history", HISTORY_FIELDS, "history")}
),
new_work AS (
    {work_insert or insert_rows("work", WORK_FIELDS, "work")}
)"""


NOTIFY_IF_WRITTEN = (
    "CASE WHEN %(notify)s AND EXISTS (SELECT 1 FROM ok) THEN pg_notify(%(channel)s, '') END"
)

START_TRANSITION = one_line(f"""
WITH prior AS MATERIALIZED (
    SELECT fingerprint FROM transitions WHERE transition_id = %(id)s
),
created AS MATERIALIZED (
    INSERT INTO instances (instance_id, definition_name, definition_version,
                           definition_fingerprint, status, sequence, tenant_id, created_at,
                           updated_at, archived_at)
    SELECT %(instance)s, %(name)s, %(version)s, %(def_fingerprint)s, COALESCE(%(status)s, 1),
           %(committed)s, %(tenant)s, %(created)s, %(at)s,
           CASE WHEN %(terminal)s THEN %(at)s END
    WHERE NOT EXISTS (SELECT 1 FROM prior)
    ON CONFLICT (instance_id) DO NOTHING
    RETURNING tenant_id
),
ok AS MATERIALIZED (
    SELECT tenant_id FROM created
),
{gated_writes()}
SELECT pg_current_xact_id()::text, (SELECT fingerprint FROM prior),
       (SELECT count(*) FROM created), {NOTIFY_IF_WRITTEN}
""")
"""A start in one statement: the ledger lookup, then the instance row already at its
committed position and, only when it went in (``ok``), the writes: no row of the
instance exists without it (no foreign key says so: migration 0008). An instance id
that exists is left alone and re-checked against the ledger in a fresh statement: an
exact replay, or InstanceExists."""


@dataclass(frozen=True)
class LeaseParts:
    """What a lease-fenced write (``engine.store.fencing``) adds to ``write_transition``."""

    held: str
    """A CTE named ``held`` that locks the lease's work row while the lease is held: the
    transition is written only then, and the statement returns no row otherwise."""
    work_insert: str
    """The insert of the work rows (it may lease one of them on as it inserts it)."""
    finish: str
    """CTEs that settle the lease, run only when the transition is written."""
    columns: str
    """Columns appended to the statement's row (after ``WRITE_COLUMNS``)."""
    join: str
    """What the final SELECT joins to read ``columns``."""


UNFENCED = LeaseParts("", "", "", "", "")
"""No lease: the plain transition statement."""


def write_transition(lease: LeaseParts | None = None) -> str:
    """The statement of a transition on an existing instance (see ``WRITE_TRANSITION``),
    with a lease's parts when it is fenced."""
    lease = lease or UNFENCED
    held = "\n      AND EXISTS (SELECT 1 FROM held)" if lease.held else ""
    only_held = "WHERE EXISTS (SELECT 1 FROM held)" if lease.held else ""
    return f"""
WITH locked AS MATERIALIZED (
    SELECT sequence, definition_name, definition_version, definition_fingerprint, tenant_id
    FROM instances WHERE instance_id = %(instance)s
    FOR UPDATE
),{lease.held}
prior AS MATERIALIZED (
    SELECT fingerprint FROM transitions WHERE transition_id = %(id)s
),
ok AS MATERIALIZED (
    SELECT tenant_id FROM locked
    WHERE sequence = %(expected)s AND definition_name = %(pin_name)s
      AND definition_version = %(pin_version)s
      AND definition_fingerprint = %(pin_fingerprint)s
      AND NOT EXISTS (SELECT 1 FROM prior){held}
),
{gated_writes(lease.work_insert)},{lease.finish}
retired AS (
    UPDATE work
    SET state = {WorkState.COMPLETED}, completed_at = %(at)s, failure_code = 'instance-ended'
    WHERE instance_id = %(instance)s AND state = {WorkState.AVAILABLE} AND %(retire)s
      AND EXISTS (SELECT 1 FROM ok)
),
moved AS (
    UPDATE instances
    SET sequence = %(committed)s,
        updated_at = %(at)s,
        status = COALESCE(%(status)s, status),
        definition_name = %(name)s,
        definition_version = %(version)s,
        definition_fingerprint = %(def_fingerprint)s,
        archived_at = CASE WHEN %(terminal)s THEN COALESCE(archived_at, %(at)s)
                           ELSE archived_at END
    WHERE instance_id = %(instance)s AND sequence = %(expected)s AND EXISTS (SELECT 1 FROM ok)
    RETURNING 1
)
SELECT pg_current_xact_id()::text, (SELECT fingerprint FROM prior),
       locked.sequence, locked.definition_name, locked.definition_version,
       locked.definition_fingerprint,
       (SELECT count(*) FROM moved), {NOTIFY_IF_WRITTEN}
       {lease.columns}
FROM (SELECT 1) AS one LEFT JOIN locked ON true {lease.join}
{only_held}
"""


WRITE_TRANSITION = one_line(write_transition())
"""A transition in one statement, one round trip, whatever the number of events and
work items: the instance lock, the ledger lookup and, only when both allow it
(``ok``), the writes. The parts cannot see each other's rows, and need not: each
writes its own table (every work row points at a history row the same statement
writes). The ledger lookup reads the statement's snapshot, taken before the lock was
granted: a commit of this very transition that the lock waited for shows as a position
mismatch, which ``_recheck`` settles in a fresh statement. The count says whether the
instance moved. An id taken meanwhile by a concurrent transaction (of another instance:
one of the same instance waits for the lock and then finds the instance moved) fails
the ledger's primary key, and with it the whole statement, which thus never writes part
of a transition."""
WRITE_COLUMNS = 8
"""The columns of the transition statement's row before a lease's ``LeaseParts.columns``."""
REARM_PARKED_WORK = f"""
UPDATE work SET available_at = %(at)s
WHERE instance_id = %(instance)s AND state = {WorkState.AVAILABLE} AND available_at > %(at)s
"""
RETIRE_OPEN_WORK = f"""
UPDATE work
SET state = {WorkState.COMPLETED}, completed_at = %(at)s, failure_code = 'instance-ended'
WHERE instance_id = %(instance)s AND state = {WorkState.AVAILABLE}
"""
NOTIFY_WORK = "SELECT pg_notify(%(channel)s, '')"
XACT_STATUS = "SELECT pg_xact_status(%(xid)s::xid8)"
CURRENT_XACT = "SELECT pg_current_xact_id()::text"

SETTLE_ATTEMPTS = 20
SETTLE_INTERVAL_SECONDS = 0.1
"""How long to wait for the old backend to finish before calling an outcome unknown."""


@dataclass(frozen=True)
class CommitResult:
    """A committed transition. ``replayed``: it had been committed before (exact replay)."""

    transition_id: str
    replayed: bool = False


class FencedWrite(Protocol):
    """A lease's part in a transition statement (``engine.store.fencing``)."""

    statement: str
    """``write_transition`` with the lease's parts."""
    done: bool
    """The statement wrote the transition, and settled the lease with it."""

    def params(self) -> dict[str, Any]:
        """The lease's parameters of ``statement``."""

    async def run(
        self, conn: psycopg.AsyncConnection, statement: str, params: dict[str, Any]
    ) -> tuple[Any, ...]:
        """Execute ``statement``: its row, or StaleLease when it returned none."""

    def wrote(self, lease_columns: tuple[Any, ...]) -> None:
        """The transition was written, and with it the lease's own writes."""


async def stage(
    conn: psycopg.AsyncConnection,
    transition: Transition,
    channel: str = "",
    tenant: str = "",
    fenced: FencedWrite | None = None,
) -> tuple[bool, str]:
    """Write ``transition`` in the caller's open transaction; never commits.

    Returns (written, xid): ``written`` is False for an exact replay (nothing written).
    Raises a NOT_COMMITTED StoreError for conflicts; the caller's transaction must then
    be rolled back. ``tenant`` (a team) is recorded when the transition creates the
    instance; every work row takes its instance's tenant, which claims use for fairness.
    ``fenced`` (not for a start) makes the statement write only under a held lease.
    """
    if transition.expected_sequence == 0:
        written, xid = await _start(conn, transition, channel, tenant)
    else:
        written, xid = await _write(conn, transition, channel, fenced)
    if written:
        await _after_write(conn, transition, channel)
    return written, xid


async def _start(
    conn: psycopg.AsyncConnection, transition: Transition, channel: str, tenant: str
) -> tuple[bool, str]:
    """Run ``START_TRANSITION``: (True, xid) when written, (False, xid) for an exact
    replay; raises InstanceExists or DuplicateTransition."""
    params = {
        **_params(transition, channel),
        "tenant": tenant,
        "created": transition.events[0].occurred_at,
    }
    with _id_taken(transition):
        row = await (await conn.execute(START_TRANSITION, params)).fetchone()
    xid, existing, created, _ = row
    if existing is not None:
        _check_replay(transition, existing)
        return False, xid
    if not created:
        exists = InstanceExists(f"instance {transition.instance_id} already exists")
        await _recheck(conn, transition, exists)
        return False, xid
    return True, xid


@contextmanager
def _id_taken(transition: Transition) -> Iterator[None]:
    """A statement that failed the ledger's key: the id was committed meanwhile for
    another instance (the statement, and so its transaction, wrote nothing)."""
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
        f"transition {transition.transition_id} was already committed with other content"
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
    row = await (await conn.execute(LEDGER_READ, {"id": transition.transition_id})).fetchone()
    if row is None:
        raise conflict
    _check_replay(transition, row[0])


@dataclass(frozen=True)
class Write:
    """The statement of a transition on an existing instance, ready to run: a plain one
    (``WRITE_TRANSITION``) or a lease-fenced one (``fenced``)."""

    transition: Transition
    statement: str
    params: dict[str, Any]
    fenced: FencedWrite | None = None

    def clean(self, row: tuple[Any, ...] | None) -> bool:
        """Whether ``row`` (the statement's answer) says the transition was written now,
        and with it the lease's part: no exact replay, no position to re-check."""
        if row is None:
            return False
        existing, moved = row[1], row[WRITE_COLUMNS - 2]
        return existing is None and moved == 1


def write_of(transition: Transition, channel: str, fenced: FencedWrite | None = None) -> Write:
    """The statement and parameters that write ``transition`` (fenced by ``fenced``)."""
    pin = transition.definition
    params = {
        **_params(transition, channel),
        "pin_name": pin.name,
        "pin_version": pin.version,
        "pin_fingerprint": pin.fingerprint,
        "retire": transition.terminal and not transition.work,
    }
    if fenced is None:
        return Write(transition, WRITE_TRANSITION, params)
    return Write(transition, fenced.statement, {**params, **fenced.params()}, fenced)


async def _write(
    conn: psycopg.AsyncConnection,
    transition: Transition,
    channel: str,
    fenced: FencedWrite | None = None,
) -> tuple[bool, str]:
    """Run ``WRITE_TRANSITION`` (or the fenced one): (True, xid) when written, (False,
    xid) for an exact replay; raises when the instance, the pin or the id do not allow
    it, or the lease is not held."""
    write = write_of(transition, channel, fenced)
    with _id_taken(transition):
        if fenced is None:
            row = await (await conn.execute(write.statement, write.params)).fetchone()
        else:
            row = await fenced.run(conn, write.statement, write.params)
    xid, existing, *position, moved, _ = row[:WRITE_COLUMNS]
    if existing is not None:
        _check_replay(transition, existing)
        return False, xid
    if moved != 1:
        await _check_position(conn, transition, *position)
        return False, xid
    if fenced is not None:
        fenced.wrote(row[WRITE_COLUMNS:])
    return True, xid


def _params(transition: Transition, channel: str) -> dict[str, Any]:
    """What both transition statements take: the ledger row, the rows, the move."""
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
        "notify": bool(transition.work and channel),
        "channel": channel,
        "history": json_rows(HISTORY_FIELDS, (event_row(e) for e in transition.events)),
        "work": json_rows(WORK_FIELDS, (work_row(w) for w in transition.work)),
    }


def one_statement(transition: Transition) -> bool:
    """Whether writing ``transition`` takes its statement alone (no ``_after_write``)."""
    return not (transition.terminal and transition.work) and not _resumes(transition)


def _resumes(transition: Transition) -> bool:
    return any(e.kind is EventKind.RESUMED for e in transition.events)


async def _after_write(conn: psycopg.AsyncConnection, transition: Transition, channel: str) -> None:
    """The rare follow-ups a transition statement cannot do itself."""
    at = {"at": transition.events[-1].occurred_at, "instance": transition.instance_id}
    if transition.terminal and transition.work:  # ``retired`` cannot see rows it wrote
        await conn.execute(RETIRE_OPEN_WORK, at)
    if _resumes(transition):
        rearmed = (await conn.execute(REARM_PARKED_WORK, at)).rowcount
        if rearmed and channel and not transition.work:
            await conn.execute(NOTIFY_WORK, {"channel": channel})


def json_rows(names: tuple[str, ...], rows: Iterable[tuple[Any, ...]]) -> str:
    """Rows as the JSON array of objects ``insert_rows`` reads (times in ISO 8601 with
    their offset, to the microsecond; bytes in bytea's hex form; text as it is, so that
    it reaches the server in the connection's encoding like any other text parameter)."""
    return to_json([dict(zip(names, row, strict=True)) for row in rows])


def _json_value(value: Any) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, bytes):
        return "\\x" + value.hex()
    if isinstance(value, timedelta):
        return f"{value.days} days {value.seconds} seconds {value.microseconds} microseconds"
    raise TypeError(f"no JSON form for a {type(value).__name__} column value")


to_json = json.JSONEncoder(ensure_ascii=False, default=_json_value).encode
"""JSON of column values as PostgreSQL reads them into their types (``_json_value``
for times, bytes and intervals), with one encoder for every call: ``json.dumps`` with
options builds a new one each time, a cost paid several times per step."""


async def reconcile_on(
    conn: psycopg.AsyncConnection, transition_id: str, fingerprint: str
) -> Reconciliation:
    """What the ledger holds for ``transition_id``: missing, committed or conflicting."""
    row = await (await conn.execute(LEDGER_READ, {"id": transition_id})).fetchone()
    if row is None:
        return Reconciliation.MISSING
    return Reconciliation.COMMITTED if row[0] == fingerprint else Reconciliation.CONFLICTING


async def xact_status(conn: psycopg.AsyncConnection, xid: str) -> str | None:
    """``committed``, ``aborted``, ``in progress`` or None (too old to tell)."""
    row = await (await conn.execute(XACT_STATUS, {"xid": xid})).fetchone()
    return row[0]


async def current_xact_id(conn: psycopg.AsyncConnection) -> str:
    row = await (await conn.execute(CURRENT_XACT)).fetchone()
    return row[0]


async def settle(connect, written: list[Transition], xid: str) -> None:
    """Decide an unknown COMMIT: return (committed), or raise NOT_COMMITTED / CommitUnknown."""
    label = _label(written)
    try:
        async with connect() as conn:
            for _ in range(SETTLE_ATTEMPTS):
                status = await xact_status(conn, xid)
                if status != "in progress":
                    break
                await asyncio.sleep(SETTLE_INTERVAL_SECONDS)
            verdicts = await _verdicts(conn, written)
    except (psycopg.Error, OSError, TimeoutError) as exc:
        raise CommitUnknown(
            f"commit of {label} has an unknown outcome: reconcile before retrying"
        ) from exc
    if status == "in progress":
        raise CommitUnknown(f"commit of {label} is still in progress: reconcile before retrying")
    if status != "committed":
        _judge(label, written, verdicts, told=status is not None)


async def settle_session(connect, written: list[Transition], session: Session | None) -> None:
    """Decide a write sent as one autocommit statement whose answer was lost.

    There is no transaction id to ask about (see ``engine.store.sessions``): the session
    that ran it is ended and waited for, and then the ledger says whether it committed.
    Returns (committed), or raises NOT_COMMITTED / CommitUnknown like ``settle``.
    """
    label = _label(written)
    if session is None:  # a connection the pool did not open: nothing names its backend
        raise CommitUnknown(f"write of {label} has an unknown outcome: reconcile it")
    try:
        async with connect() as conn:
            gone = await sessions.end(conn, session)
            verdicts = await _verdicts(conn, written) if gone else []
    except (psycopg.Error, OSError, TimeoutError) as exc:
        raise CommitUnknown(
            f"write of {label} has an unknown outcome: reconcile before retrying"
        ) from exc
    if not gone:
        raise CommitUnknown(f"write of {label} is still running: reconcile before retrying")
    _judge(label, written, verdicts, told=False)


def _label(written: list[Transition]) -> str:
    return ", ".join(t.transition_id for t in written) or "lease update"


async def _verdicts(
    conn: psycopg.AsyncConnection, written: list[Transition]
) -> list[Reconciliation]:
    return [await reconcile_on(conn, t.transition_id, t.fingerprint) for t in written]


def _judge(
    label: str, written: list[Transition], verdicts: list[Reconciliation], told: bool
) -> None:
    """The ledger's verdict once the transaction has ended; ``told``: PostgreSQL said
    it did not commit (without the ledger, nothing else tells a lease-only update)."""
    if written and all(v is Reconciliation.COMMITTED for v in verdicts):
        return
    if any(v is Reconciliation.CONFLICTING for v in verdicts):
        raise DuplicateTransition(f"{label}: the id holds other content")
    if not told and not written:
        raise CommitUnknown(f"commit of {label} has an unknown outcome")
    raise StoreError(f"commit of {label} did not take effect: it is safe to retry")
