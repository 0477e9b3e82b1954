"""Statements of a commit: the ledger, the history, the instance's move, and the parts
a lease-fenced transition statement (``statements.leases``) shares with them.

A transition statement reads its values from somewhere: its own parameters when it
writes one transition (``param``), or a member's row of its input when it writes a set
(``member``). The parts below take that source, so the single statements and the set
statement are built from one text of each rule (see ``engine.store.commits`` for the
order of a commit and what each statement returns).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from engine.store.rows import HISTORY_FIELDS, WORK_FIELDS, WorkState
from engine.store.statements.catalog import LATEST_ACTIVE

OPEN = f"{WorkState.AVAILABLE}, {WorkState.HELD}"
"""Unleased work an instance's end retires: due or not, and held by an incident hold."""

Source = Callable[[str], str]
"""Where a transition statement reads the value of a name."""


def param(name: str) -> str:
    """A value sent as the statement's parameter ``name``."""
    return f"%({name})s"


def member(name: str) -> str:
    """A value of the set member ``i`` (a row of the set statement's input)."""
    return f"i.{name}"


def one_line(statement: str) -> str:
    """``statement`` with its runs of whitespace made single spaces (it has no comments
    or literals with spaces to change). psycopg caches its parsing of a statement's
    placeholders only up to 4096 characters; the longest statements, sent at every
    step, stay under that."""
    return " ".join(statement.split())


def found_by_key(conditions: str) -> str:
    """``conditions`` as one ``IS TRUE`` test, for a statement that finds its work rows by
    their key (or their instance) and checks the rest on each row found.

    A worker's statements are prepared, and PostgreSQL soon plans them generically, the
    store's clock a parameter of unknown value. Written plainly, conditions such as
    ``w.state = 2`` or ``w.deadline > now`` imply a partial index's predicate and give
    an index a range, and with few open rows at the last ANALYZE the small partial
    indexes on open work looked as cheap as the key: the statement then read every open
    row's index entry to find its own. ``IS TRUE`` keeps the same rows (a WHERE keeps
    only a true one) and no index can answer it (``tests/integration/test_lease_plans.py``)."""
    return f"({conditions}) IS TRUE"


def insert_rows(
    table: str,
    names: tuple[str, ...],
    rows: str,
    extra: tuple[tuple[str, str], ...] = (),
    returning: str = "",
) -> str:
    """``INSERT`` of rows sent as one JSON array of objects (``commits.json_rows``): one
    value whatever the number of rows and columns, cheap to send and to read; each value
    is read as its column's type (the table's row type). ``rows`` is the FROM clause
    that yields them as ``r``, joined with ``ok``: no row goes in unless the instance is
    where the transition expects it, and every row takes its tenant. ``extra`` adds
    columns computed in SQL (name, expression over ``r``)."""
    columns = ", ".join([*names, *(name for name, _ in extra)])
    values = ", ".join(
        [*("ok.tenant_id" if n == "tenant_id" else f"r.{n}" for n in names), *(v for _, v in extra)]
    )
    alias = " AS w" if returning else ""
    return f"INSERT INTO {table}{alias} ({columns})\n    SELECT {values}\n    FROM {rows}" + (
        f"\n    RETURNING {returning}" if returning else ""
    )


def sent_rows(table: str, param: str) -> str:
    """The FROM clause of ``insert_rows`` for rows sent as the parameter ``param``."""
    return f"json_populate_recordset(NULL::{table}, %({param})s::json) AS r CROSS JOIN ok"


def member_rows(table: str) -> str:
    """The FROM clause of ``insert_rows`` for each written member's nested rows."""
    return (
        "input i JOIN ok ON ok.m = i.m\n"
        f"        CROSS JOIN LATERAL json_populate_recordset(NULL::{table}, i.{table}) AS r"
    )


LEDGER_COLUMNS = """transitions (transition_id, instance_id, fingerprint, expected_sequence,
                             committed_sequence, xact_id)"""


def ledger_values(v: Source) -> str:
    """The ledger row of the transition (its id, position and transaction id)."""
    return (
        f"{v('id')}, {v('instance')}, {v('fingerprint')}, {v('expected')}, {v('committed')}, "
        "pg_current_xact_id()"
    )


def at_position(v: Source, row: str = "") -> str:
    """The locked instance ``row`` is where the transition expects it: position and pin."""
    return (
        f"{row}sequence = {v('expected')} AND {row}definition_name = {v('pin_name')}\n"
        f"      AND {row}definition_version = {v('pin_version')}\n"
        f"      AND {row}definition_fingerprint = {v('pin_fingerprint')}"
    )


RETIRED_CODE = "instance-ended"
"""The failure code of work an instance's end retired: completed, but by no holder."""


def retired_values(v: Source) -> str:
    """What retiring open work sets: completed when the instance ended."""
    completed = f"state = {WorkState.COMPLETED}, completed_at = {v('at')}"
    return f"{completed}, failure_code = '{RETIRED_CODE}'"


def moved_values(v: Source, status: str = "status") -> str:
    """The instance's move: position, status (``status``: its current one), pin, archive."""
    return f"""sequence = {v("committed")},
        updated_at = {v("at")},
        status = COALESCE({v("status")}, {status}),
        definition_name = {v("name")},
        definition_version = {v("version")},
        definition_fingerprint = {v("def_fingerprint")},
        archived_at = CASE WHEN {v("terminal")} THEN COALESCE(archived_at, {v("at")})
                           ELSE archived_at END"""


def ledger_read(v: Source) -> str:
    """The ledger's fingerprint of the transition id, if it was committed: a probe of
    the ledger's key (instance id, transition id)."""
    return (
        "SELECT fingerprint FROM transitions "
        f"WHERE instance_id = {v('instance')} AND transition_id = {v('id')}"
    )


LEDGER_READ = ledger_read(param)


def gated_writes(work_insert: str = "") -> str:
    """The ledger row, the history rows and the work rows, written only when ``ok`` has
    its row (the instance's tenant): the shared middle of the transition statements.
    ``work_insert`` replaces the plain insert of the work rows (a fenced write leases
    one of them on as it inserts it)."""
    return f"""
ledger AS (
    INSERT INTO {LEDGER_COLUMNS}
    SELECT {ledger_values(param)}
    FROM ok
),
events AS (
    {insert_rows("history", HISTORY_FIELDS, sent_rows("history", "history"))}
),
new_work AS (
    {work_insert or insert_rows("work", WORK_FIELDS, sent_rows("work", "work"))}
)"""


NOTIFY_IF_WRITTEN = (
    "CASE WHEN %(notify)s AND EXISTS (SELECT 1 FROM ok) "
    "THEN pg_notify(%(channel)s, %(payload)s) END"
)
"""The statement's one NOTIFY, sent only when it wrote the transition: new work on the
work channel (payload ''), or an instance's end on the end channel (payload: its id);
``commits._notice`` picks which, or none (then nothing is evaluated but the flag)."""

START_TRANSITION = one_line(f"""
WITH prior AS MATERIALIZED (
    {LEDGER_READ}
),
startable AS MATERIALIZED (
    SELECT 1 WHERE NOT %(latest_only)s OR (%(version)s, %(def_fingerprint)s) = ({LATEST_ACTIVE})
),
created AS MATERIALIZED (
    INSERT INTO instances (instance_id, definition_name, definition_version,
                           definition_fingerprint, status, sequence, tenant_id, created_at,
                           updated_at, archived_at, parent_key)
    SELECT %(instance)s, %(name)s, %(version)s, %(def_fingerprint)s, COALESCE(%(status)s, 1),
           %(committed)s, %(tenant)s, %(created)s, %(at)s,
           CASE WHEN %(terminal)s THEN %(at)s END, %(parent_key)s
    WHERE NOT EXISTS (SELECT 1 FROM prior) AND EXISTS (SELECT 1 FROM startable)
    ON CONFLICT DO NOTHING
    RETURNING tenant_id
),
ok AS MATERIALIZED (
    SELECT tenant_id FROM created
),
{gated_writes()}
SELECT pg_current_xact_id()::text, (SELECT fingerprint FROM prior),
       (SELECT count(*) FROM created), {NOTIFY_IF_WRITTEN}, (SELECT count(*) FROM startable)
""")
"""A start in one statement: the ledger lookup, then the instance row already at its
committed position and, only when it went in (``ok``), the writes: no row of the
instance exists without it (no foreign key says so: migration 0008). An instance id
that exists is left alone and re-checked against the ledger in a fresh statement: an
exact replay, or InstanceExists. So is a start whose ``parent_key`` an active instance
of the definition holds (the unique index of migration 0010): ``ON CONFLICT`` names no
index, so either conflict writes nothing (never an error), and ``START_BLOCKED`` then
says which it was. A concurrent start of the same key waits for the other to end; the
one that commits first is admitted. A ``latest_only`` start (``Transition.latest_only``)
is written only while its version is the one ``catalog.LATEST_ACTIVE`` reads
(``startable``)."""
START_BLOCKED = """
SELECT (SELECT instance_id FROM instances WHERE instance_id = %(instance)s),
       (SELECT instance_id FROM instances
        WHERE definition_name = %(name)s AND parent_key = %(parent_key)s
          AND parent_key <> '' AND archived_at IS NULL)
"""
"""Why a start wrote nothing, read in a fresh statement (which sees the start that won):
its instance id exists, or the active instance that holds its ``parent_key``."""


@dataclass(frozen=True)
class LeaseParts:
    """What a lease-fenced write (``statements.leases.FENCED_WRITE``) adds to
    ``write_transition``."""

    held: str
    """A CTE named ``held`` that locks the lease's work row while the lease is held (or
    takes an offered lease, ``statements.leases.TAKING_WRITE``): the transition is
    written only then, and the statement returns no row otherwise. It follows
    ``locked`` and ``prior``, and may read them."""
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
),
prior AS MATERIALIZED (
    {LEDGER_READ}
),{lease.held}
ok AS MATERIALIZED (
    SELECT tenant_id FROM locked
    WHERE {at_position(param)}
      AND NOT EXISTS (SELECT 1 FROM prior){held}
),
{gated_writes(lease.work_insert)},{lease.finish}
retired AS (
    UPDATE work
    SET {retired_values(param)}
    WHERE instance_id = %(instance)s AND state IN ({OPEN}) AND %(retire)s
      AND EXISTS (SELECT 1 FROM ok)
),
moved AS (
    UPDATE instances
    SET {moved_values(param)}
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
mismatch, which ``commits._recheck`` settles in a fresh statement. The count says
whether the instance moved. An id taken meanwhile by a concurrent transaction that did
not move the instance (a transition that did is seen after the lock as a moved
instance) fails the ledger's primary key, (instance_id, transition_id), and with it the
whole statement, which thus never writes part of a transition."""
WRITE_COLUMNS = 8
"""The columns of the transition statement's row before a lease's ``LeaseParts.columns``."""
REARM_PARKED_WORK = f"""
UPDATE work SET available_at = %(at)s
WHERE instance_id = %(instance)s
  AND {found_by_key(f"state = {WorkState.AVAILABLE} AND available_at > %(at)s")}
"""
"""The instance's parked work due now (on resume), found through the instance
(``found_by_key``: as plain conditions, a generic plan read every due row of the cluster
through ``work_tenant_due_idx``)."""
RETIRE_OPEN_WORK = f"""
UPDATE work
SET {retired_values(param)}
WHERE instance_id = %(instance)s AND state IN ({OPEN})
"""
RETARGET_PINNED_WORK = f"""
UPDATE work SET target = left(target, strpos(target, '@')) || %(version)s
WHERE instance_id = %(instance)s
  AND {found_by_key(f"target = ANY(%(pinned)s) AND state <> {WorkState.COMPLETED}")}
"""
"""A migration's: the instance's unfinished work that names its old version's code
(``engine.model.pinned_code``) names the new version instead, so that version's
workers claim it (a dead letter retried later too)."""
NOTIFY_WORK = "SELECT pg_notify(%(channel)s, '')"
XACT_STATUS = "SELECT pg_xact_status(%(xid)s::xid8)"
CURRENT_XACT = "SELECT pg_current_xact_id()::text"
DURABLE_MARK = "SELECT pg_logical_emit_message(true, 'wayline.durable', '')"
"""A WAL record in a transaction of its own: its COMMIT waits for the local flush and
for the synchronous standbys, as every engine commit does (``commits.durable``). A
transactional message writes nothing a table or a reader sees."""
