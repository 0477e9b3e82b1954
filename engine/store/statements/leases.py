"""Statements on work rows under leases: the claim, the holder's writes, the
lease-fenced transition (alone and as a set), and the sweeps that keep work moving.

Every holder's write names its lease by ``held``: the row is leased to this owner
under this token and neither the lease nor the deadline has passed by the store's
clock (``NOW``). A lone fenced transition (``FENCED_WRITE``) and a group commit's set
(``FENCED_SET``) are built from the same parts (``held``, ``leased_on``,
``COMPLETED_BY_HOLDER`` and the transition parts of ``statements.transitions``). They
stay two statements: sent for one transition, the set's JSON input and lateral joins
cost about twice the server time of the single statement at every step.
"""

from __future__ import annotations

from engine.store.clock import NOW_SQL as NOW
from engine.store.rows import HISTORY_COLUMNS, HISTORY_FIELDS, WORK_FIELDS, WorkState
from engine.store.statements.transitions import (
    LEDGER_COLUMNS,
    OPEN,
    RETIRED_CODE,
    LeaseParts,
    Source,
    at_position,
    found_by_key,
    insert_rows,
    ledger_read,
    ledger_values,
    member,
    member_rows,
    moved_values,
    one_line,
    param,
    retired_values,
    sent_rows,
    write_transition,
)


def held(v: Source) -> str:
    """The work row ``w`` is the lease named by ``v``'s work_instance and work_id (the
    work's key), owner and token, and it is unexpired (lease and deadline) by the
    store's clock; the row is found by its key (``found_by_key``). A lease whose claim
    may not be durable yet names the store's epoch it was claimed in (``epoch``; NULL
    once durable), and holds only while the store is still in that epoch (migration
    0029). Written out, not as a function: a SQL function costs every statement that
    calls it about 0.08 ms of server time to set up, an inline test a microsecond."""
    lease = f"w.state = {WorkState.LEASED} AND w.lease_expires_at > {NOW} AND w.deadline > {NOW}"
    epoch = f"{v('epoch')}::uuid"
    return one_line(f"""w.instance_id = {v("work_instance")} AND w.work_id = {v("work_id")}
    AND w.lease_owner = {v("owner")} AND w.lease_token = {v("token")}
    AND {found_by_key(lease)}
    AND ({epoch} IS NULL OR {epoch} IN (SELECT epoch FROM store_epoch))""")


HELD = held(param)
"""The caller still holds this exact lease (owner, token, unexpired)."""
SET_HELD = held(member)
"""A set's member still holds its lease: ``HELD`` per member."""


def lease_columns(alias: str) -> str:
    """The columns of a lease (``leases._lease`` reads them in this order) from the
    work row ``alias``, with the store's clock as the claim time."""
    head = ("work_id", "kind", "instance_id", "sequence", "payload", "tenant_id", "target")
    lease = ("lease_owner", "lease_token", "attempts")
    tail = ("lease_expires_at", "deadline", "available_at")
    columns = [*(f"{alias}.{n}" for n in (*head, *lease)), f"{NOW} AS claimed_at"]
    return ", ".join([*columns, *(f"{alias}.{n}" for n in tail)])


LEASE_COLUMNS = lease_columns("w")
CLAIM_COLUMNS = 14
"""The lease columns at the head of a claim's row (``LEASE_COLUMNS``); a history row's
columns follow."""

COMPLETED_BY_HOLDER = (
    f"state = {WorkState.COMPLETED}, completed_at = {NOW}, lease_owner = '', "
    "lease_expires_at = NULL"
)
"""What completing a lease sets: done, and nobody's any more."""


def leased_on(v: Source, lease: str) -> tuple[tuple[str, str], ...]:
    """The lease columns of an inserted work row ``r``: the row named by ``v``'s
    next_id goes in leased to ``v``'s owner for ``lease`` with token 1 (eager
    dispatch, as a claim would have left it); every other row goes in available."""
    on = f"r.work_id = {v('next_id')}"
    leased = f"({on})::int"
    return (
        ("state", f"{WorkState.AVAILABLE} + {leased}"),
        ("attempts", leased),
        ("lease_token", leased),
        ("lease_owner", f"CASE WHEN {on} THEN {v('owner')} ELSE '' END"),
        ("lease_expires_at", f"CASE WHEN {on} THEN LEAST({NOW} + {lease}, r.deadline) END"),
    )


# Claiming -----------------------------------------------------------------------------

WANTED = """(%(kinds)s::smallint[] IS NULL OR w.kind = ANY(%(kinds)s::smallint[]))
    AND (%(targets)s::text[] IS NULL OR w.target = '' OR w.target = ANY(%(targets)s::text[]))"""
"""Kinds and targets this worker can run (NULL: any); '' targets run anywhere."""

ELIGIBLE = found_by_key(f"""((w.state = {WorkState.AVAILABLE} AND w.available_at <= {NOW})
        OR (w.state = {WorkState.LEASED} AND w.lease_expires_at <= {NOW}))
    AND w.deadline > {NOW}""")
"""Claimable now; the UPDATE re-checks it on the row it locked by its key
(``found_by_key``), so a change committed after the statement's snapshot is never
undone."""

EXPIRED = f"w.state = {WorkState.LEASED} AND w.lease_expires_at <= {NOW} AND w.deadline > {NOW}"
"""A lease that ran out before the work's deadline: the work may be claimed again."""

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
        SELECT w.instance_id, w.work_id, w.tenant_id, w.available_at, w.state FROM work w
        WHERE w.state < {WorkState.LEASED} AND w.tenant_id = t.tenant_id
          AND w.available_at <= {NOW} AND w.deadline > {NOW} AND {WANTED}
        ORDER BY w.available_at, w.work_id
        LIMIT %(limit)s
    ) d
),
expired AS (
    SELECT w.instance_id, w.work_id, w.tenant_id, w.available_at, w.state FROM work w
    WHERE {EXPIRED} AND {WANTED}
    ORDER BY w.lease_expires_at, w.work_id
    LIMIT %(limit)s
),
chosen AS (
    SELECT c.* FROM (
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
    SELECT d.* FROM quotas q
    CROSS JOIN LATERAL (
        SELECT w.instance_id, w.work_id FROM work w
        WHERE w.state < {WorkState.LEASED} AND w.tenant_id = q.tenant_id
          AND w.available_at <= {NOW} AND w.deadline > {NOW} AND {WANTED}
        ORDER BY w.available_at, w.work_id
        LIMIT q.quota
        FOR UPDATE OF w SKIP LOCKED
    ) d
),
locked_expired AS MATERIALIZED (
    SELECT w.instance_id, w.work_id FROM chosen c JOIN work w USING (instance_id, work_id)
    WHERE c.state = {WorkState.LEASED} AND {found_by_key(EXPIRED)}
    FOR UPDATE OF w SKIP LOCKED
),
claimed AS (
    UPDATE work w
    SET state = {WorkState.LEASED},
        attempts = w.attempts + 1,
        lease_token = w.lease_token + 1,
        lease_owner = %(owner)s,
        lease_expires_at = LEAST({NOW} + %(lease)s::interval, w.deadline)
    FROM (SELECT * FROM locked_expired
          UNION ALL SELECT * FROM locked_due
          LIMIT %(limit)s) l
    WHERE w.instance_id = l.instance_id AND w.work_id = l.work_id AND {ELIGIBLE}
    RETURNING {LEASE_COLUMNS}
),
e AS (SELECT claim_epoch())
SELECT c.*, h.*, e.*
FROM claimed c
LEFT JOIN LATERAL (
    SELECT {HISTORY_COLUMNS} FROM history h
    WHERE h.instance_id = c.instance_id
      AND (SELECT i.sequence FROM instances i WHERE i.instance_id = c.instance_id)
          <= %(history)s
    ORDER BY h.sequence
    LIMIT %(history)s
) h ON true, e
ORDER BY c.available_at, c.work_id, h.sequence
""")
"""See ``engine.store.leases`` for the two passes, and for why a claim commits without
waiting for its WAL to be flushed (``claim_epoch``, migration 0029: its epoch comes last
in every row; a CTE with a volatile function is evaluated once). A claim costs index
reads in proportion to the tenants that have available work (not-yet-due timers
included) times ``limit``, never to the size of the backlog, and locks only what it
claims.

Per-tenant scans say ``state < 2`` (the same rows as ``state = 1``, by the table's
CHECK) so that only ``work_tenant_due_idx`` matches them: with ``state = 1`` the planner
may pick the global due index and filter by tenant, which walks a large tenant's whole
backlog to find a small tenant's rows. The UPDATE's ``LIMIT`` changes nothing (at most
``limit`` rows are locked) but tells the planner how few rows it joins. So does the
``LIMIT`` of the history read (``leases.CLAIM_HISTORY_EVENTS``): it keeps that read a
lookup per claimed item, which the planner would otherwise join with all of history (a
hash join over the whole table made a 16-item claim at 10^5 due rows take 20 ms instead
of 2.5).
"""

# The holder's writes ------------------------------------------------------------------

RENEW_LEASE = f"""
UPDATE work w SET lease_expires_at = LEAST({NOW} + %(extend)s::interval, w.deadline)
WHERE {HELD}
RETURNING w.lease_expires_at
"""

CHECK_LEASE = f"SELECT 1 FROM work w WHERE {HELD} FOR UPDATE"

COMPLETE_LEASE = f"""
UPDATE work w
SET {COMPLETED_BY_HOLDER}
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

PARK_LEASE = f"""
UPDATE work w
SET state = {WorkState.AVAILABLE}, failure_code = %(code)s, lease_owner = '',
    lease_expires_at = NULL,
    available_at = CASE WHEN i.sequence = %(seen)s THEN %(available_at)s ELSE {NOW} END
FROM (SELECT sequence FROM instances WHERE instance_id = %(work_instance)s FOR SHARE) i
WHERE {HELD}
RETURNING w.available_at <= {NOW}
"""
"""``RETRY_LEASE`` for work of a paused instance, pushed back only while the instance
is still at the position (``seen``) its holder read it paused at; one that moved since
(a resume re-arms parked work, but not a row that was leased meanwhile) gets its work
back due now, for the next claim to decide again. The instance's row is locked for
share, so a resume still in flight is waited for and then seen."""

DEAD_LETTER_LEASE = f"""
UPDATE work w
SET state = {WorkState.DEAD_LETTERED}, failure_code = %(code)s, completed_at = {NOW},
    failure_detail = %(detail)s, lease_owner = '', lease_expires_at = NULL
WHERE {HELD}
RETURNING w.work_id
"""

COMPLETE_AND_LEASE_NEXT = f"""
WITH completed AS (
    {COMPLETE_LEASE.strip()}
)
UPDATE work w
SET state = {WorkState.LEASED}, attempts = w.attempts + 1, lease_token = w.lease_token + 1,
    lease_owner = %(owner)s, lease_expires_at = LEAST({NOW} + %(lease)s::interval, w.deadline)
WHERE w.instance_id = %(work_instance)s AND w.work_id = %(next_id)s AND w.state IN ({OPEN})
  AND EXISTS (SELECT 1 FROM completed)
RETURNING {LEASE_COLUMNS}
"""
"""Complete the held lease and lease the next work row to the same owner; no row when
the lease was no longer held (then nothing changed). A next row an incident hold parked
is leased and parked again at once (migration 0017's trigger): the row comes back
unleased, and the lease is completed all the same. Used when the commit's transition
had been written before (an exact replay); a transition written now does both in its
own statement (``FENCED_WRITE``)."""

HANDED_ON = f"""
SELECT {LEASE_COLUMNS} FROM work w
WHERE w.instance_id = %(work_instance)s AND w.work_id = %(next_id)s
  AND w.state = {WorkState.LEASED} AND w.lease_owner = %(owner)s AND w.lease_token = 1
"""
"""The lease ``FENCED_WRITE`` handed on (token 1, this owner), read back when the
write's answer was lost and it was settled as committed; no row once it expired and
was claimed again (then it is that claimer's)."""

FINISHED_LEASES = f"""
SELECT count(w.work_id), count(*) FROM unnest(
    %(instances)s::text[], %(works)s::text[], %(tokens)s::bigint[]
) AS k (instance_id, work_id, token)
LEFT JOIN work w ON w.instance_id = k.instance_id AND w.work_id = k.work_id
    AND w.lease_token = k.token AND w.state = {WorkState.COMPLETED}
    AND w.failure_code <> '{RETIRED_CODE}'
"""
"""Of the leases named (work key and token), how many their holders completed, and how
many were named. Only the holder completes a row under its token (a claim bumps it);
an instance's end completes unleased rows too, but marks them ``RETIRED_CODE``."""

# A transition fenced by its lease -----------------------------------------------------


def _fenced_write(held: str, finish: str) -> str:
    """A transition written under a lease ``held`` names, with ``finish`` settling it:
    the parts the fenced writes share."""
    return one_line(
        write_transition(
            LeaseParts(
                held=held,
                work_insert=insert_rows(
                    "work",
                    WORK_FIELDS,
                    sent_rows("work", "work"),
                    extra=leased_on(param, "%(lease)s::interval"),
                    returning=LEASE_COLUMNS,
                ),
                finish=finish,
                columns=", next_lease.*",
                join="LEFT JOIN new_work next_lease ON next_lease.work_id = %(next_id)s",
            )
        )
    )


FENCED_WRITE = _fenced_write(
    f"""
held AS MATERIALIZED (
    SELECT w.work_id FROM work w WHERE {HELD} FOR UPDATE
),""",
    f"""
finished AS (
    UPDATE work w
    SET {COMPLETED_BY_HOLDER}
    WHERE w.instance_id = %(work_instance)s AND w.work_id = %(work_id)s AND %(finish)s
      AND EXISTS (SELECT 1 FROM ok)
),""",
)
"""A transition written only while the lease is held, in one statement with what the
lease's holder does at that point: the work row is locked first (``held``); when the
transition is written, the lease is completed (``finished``, for an outcome) and the
next activity's work row, which the transition creates, is inserted already leased to
the same owner with token 1 (eager dispatch), as a claim would have left it. Without
the lease, nothing is written and no row comes back (StaleLease)."""

FRESH = f"w.state = {WorkState.AVAILABLE} AND w.lease_token = 0 AND w.deadline > {NOW}"
"""Work no one has leased yet, before its deadline: what an offer leases (token 0 to 1).
Whether it is due is the offer's to judge (``offers.read``, on the worker's estimate of
the store clock): its start made it due at once by the starter's estimate, which may run
a little ahead of the server's clock, and a claim would then leave it for a moment."""

TAKING_WRITE = _fenced_write(
    f"""
taken AS (
    UPDATE work w
    SET state = {WorkState.LEASED}, attempts = 1, lease_token = 1, lease_owner = %(owner)s,
        lease_expires_at = LEAST(%(expires)s, w.deadline)
    WHERE w.instance_id = %(work_instance)s AND w.work_id = %(work_id)s
      AND {found_by_key(FRESH)}
      AND EXISTS (SELECT 1 FROM locked WHERE {at_position(param)})
      AND NOT EXISTS (SELECT 1 FROM prior)
    RETURNING w.state
),
held AS (
    SELECT 1 FROM taken WHERE state = {WorkState.LEASED}
),""",
    "",
)
"""``FENCED_WRITE`` of a worker that takes an offered lease (``engine.store.offers``)
with the transition it writes under it: the work row is leased to it (``taken``, as a
claim would lease it) only where the transition will be written, and the transition
only where it was leased. An incident hold parks the row instead (migration 0017's
trigger), which leases nothing. So either both commit, durably, or neither, and no row
comes back (StaleLease: another worker took the work, or the instance moved on). It
never finishes its lease: the write that takes it starts the work."""

MEMBER_FIELDS: tuple[tuple[str, str], ...] = (
    ("m", "int"),
    ("instance", "text"),
    ("id", "text"),
    ("fingerprint", "text"),
    ("expected", "bigint"),
    ("committed", "bigint"),
    ("at", "timestamptz"),
    ("status", "smallint"),
    ("name", "text"),
    ("version", "text"),
    ("def_fingerprint", "text"),
    ("terminal", "boolean"),
    ("notify", "boolean"),
    ("channel", "text"),
    ("payload", "text"),
    ("pin_name", "text"),
    ("pin_version", "text"),
    ("pin_fingerprint", "text"),
    ("retire", "boolean"),
    ("work_instance", "text"),
    ("work_id", "text"),
    ("work_sequence", "bigint"),
    ("owner", "text"),
    ("token", "bigint"),
    ("epoch", "uuid"),
    ("next_id", "text"),
    ("lease", "interval"),
    ("finish", "boolean"),
    ("history", "json"),
    ("work", "json"),
)
"""A set member's values: ``FENCED_WRITE``'s parameters but ``now``, in the JSON sent."""

FENCED_SET = one_line(f"""
WITH input AS MATERIALIZED (
    SELECT * FROM json_to_recordset(%(members)s::json)
        AS i({", ".join(f"{name} {kind}" for name, kind in MEMBER_FIELDS)})
),
locked AS MATERIALIZED (
    SELECT i.m, s.* FROM input i CROSS JOIN LATERAL (
        SELECT sequence, definition_name, definition_version, definition_fingerprint,
               tenant_id
        FROM instances WHERE instance_id = i.instance
        FOR UPDATE
    ) s
),
held AS MATERIALIZED (
    SELECT i.m FROM input i CROSS JOIN LATERAL (
        SELECT 1 FROM work w WHERE {SET_HELD} FOR UPDATE
    ) h
),
prior AS MATERIALIZED (
    SELECT i.m, p.fingerprint FROM input i CROSS JOIN LATERAL (
        {ledger_read(member)} OFFSET 0
    ) p
),
ok AS MATERIALIZED (
    SELECT i.m, l.tenant_id FROM input i JOIN locked l ON l.m = i.m
    WHERE {at_position(member, "l.")}
      AND NOT EXISTS (SELECT 1 FROM prior p WHERE p.m = i.m)
      AND EXISTS (SELECT 1 FROM held h WHERE h.m = i.m)
),
ledger AS (
    INSERT INTO {LEDGER_COLUMNS}
    SELECT {ledger_values(member)}
    FROM input i JOIN ok ON ok.m = i.m
),
events AS (
    {insert_rows("history", HISTORY_FIELDS, member_rows("history"))}
),
new_work AS (
    {insert_rows("work", WORK_FIELDS, member_rows("work"), leased_on(member, "i.lease"), "w.*")}
),
finished AS (
    UPDATE work w
    SET {COMPLETED_BY_HOLDER}
    FROM input i JOIN ok ON ok.m = i.m
    WHERE w.instance_id = i.work_instance AND w.work_id = i.work_id
      AND w.sequence = i.work_sequence AND i.finish
),
retired AS (
    UPDATE work
    SET {retired_values(member)}
    FROM input i JOIN ok ON ok.m = i.m
    WHERE work.instance_id = i.instance AND work.state IN ({OPEN}) AND i.retire
),
moved AS (
    UPDATE instances
    SET {moved_values(member, "instances.status")}
    FROM input i JOIN ok ON ok.m = i.m
    WHERE instances.instance_id = i.instance AND instances.sequence = i.expected
    RETURNING i.m
),
notified AS MATERIALIZED (
    SELECT pg_notify(c.channel, c.payload) FROM (
        SELECT DISTINCT i.channel, i.payload FROM input i JOIN ok ON ok.m = i.m WHERE i.notify
    ) c
)
SELECT i.m, h.m IS NOT NULL, pg_current_xact_id()::text, p.fingerprint,
       l.sequence, l.definition_name, l.definition_version, l.definition_fingerprint,
       (SELECT count(*) FROM moved mv WHERE mv.m = i.m),
       (SELECT count(*) FROM notified),
       {lease_columns("n")}
FROM input i
    LEFT JOIN locked l ON l.m = i.m
    LEFT JOIN held h ON h.m = i.m
    LEFT JOIN prior p ON p.m = i.m
    LEFT JOIN new_work n ON n.work_id = i.next_id
ORDER BY i.m
""")
"""``FENCED_WRITE`` for every member of ``%(members)s``; one row per member, in member
order: ``m``, whether its lease was held, then the columns of ``FENCED_WRITE``'s row.

Under load a group commit (``engine.store.group_commit``) holds several workers' step
outcomes. Run one by one, each ``FENCED_WRITE`` pays the server's fixed cost of a
statement (executor start-up for about a dozen nodes, the CHECK constraints and partial
index predicates prepared again for every table it writes, the parse of its EXECUTE)
before any row is written; that fixed cost was about a third of the server's time per
step. This statement does what ``FENCED_WRITE`` does for each member, for all of them
at once: the members arrive as one JSON array (one row each, its history and work rows
nested), and every part of the statement works per member, keyed by ``m``.

Each member keeps the verdict it would have had alone, read from its own row of the
answer (``leases.write_set`` puts it in ``FENCED_WRITE``'s shape): its instance
locked and at the expected position and pin, its transition id new, its lease held (no
lease, no row). What a member writes is gated on its own ``ok`` row, exactly like the
single statement. Two members of one instance would both see the position before either
moved it, so they never share a statement (``leases.write_set``): the later one runs in
the next statement of the message, after the first has moved the instance.

The server's clock (``now``) is one value for the whole statement: members share it,
as they share their store. Rows are found by key: the locks in a lateral subquery per
member; the updates join the members that passed ``ok``, which the planner estimates
at one row, so it probes the key's index once per member rather than scanning a table
(an integration test checks the plans). The lease's work row is finished by its key and
its position (``work_sequence``, the history position that created it, which never
changes): when the statistics saw about one work row per instance (a young cluster),
the instance alone looked as selective as the key, and the generic plan read the row
through ``work_instance_idx`` by its instance alone, every work row of the instance for
each step of a long code-first instance; with the position, that index reads only the
rows one transition created. Never by ``ctid``: a row updated after the
statement's snapshot is re-read by its key (EvalPlanQual), which a ``ctid`` match
would miss."""

# Sweeps and owner locks ---------------------------------------------------------------

OVERDUE = f"""w.state IN ({WorkState.AVAILABLE}, {WorkState.LEASED}) AND w.deadline <= {NOW}
    AND (w.state = {WorkState.AVAILABLE} OR w.lease_expires_at <= {NOW})"""
"""Open work past its deadline that nobody holds a live lease on."""

SWEEP_DEADLINES = f"""
WITH overdue AS MATERIALIZED (
    SELECT w.instance_id, w.work_id FROM work w
    WHERE {OVERDUE}
    ORDER BY w.deadline, w.work_id
    LIMIT %(batch)s
    FOR UPDATE OF w SKIP LOCKED
)
UPDATE work w
SET state = {WorkState.DEAD_LETTERED}, failure_code = %(code)s, completed_at = {NOW},
    lease_owner = '', lease_expires_at = NULL,
    lease_token = GREATEST(w.lease_token, 1)
FROM overdue o
WHERE w.instance_id = o.instance_id AND w.work_id = o.work_id
  AND {found_by_key(OVERDUE)}
"""
"""Open work past its deadline becomes a dead letter. Work never claimed has token 0;
its dead letter gets token 1, because a resolution names a fence (token >= 1). The rows
``overdue`` found are updated by their key (``found_by_key``)."""


def _owner_lock_key(owner_sql: str) -> str:
    """Two int4 keys: the schema (drills in other schemas never collide) and the owner.

    A hash collision can only make a dead owner look alive (its lock seems held), never
    a live owner look dead, so it costs at most the speed-up.
    """
    return f"hashtext('wayline-owner:' || %(schema)s::text), hashtext({owner_sql})"


TAKE_OWNER_LOCK = f"SELECT pg_advisory_lock({_owner_lock_key('%(owner)s::text')})"
NOTE_OWNER_LOCK = """
UPDATE {schema}.workers SET locked_at = now()
FROM (SELECT {schema}.serving_since()) served
WHERE worker_id = %(owner)s
"""
"""When the lock was taken, by the server's clock (``serving_since`` is too): a
registered worker's row, for ``EXPIRE_DEAD_OWNERS``; nothing for an ad-hoc owner. On a
promoted standby, the first worker to take its lock there makes the store's epoch
(``serving_since``) in this statement, so that every lock taken there counts as taken
since the server began serving, not only those after the first claim or sweep. The
owner's connection has no search_path: ``{schema}`` is the store's, as an identifier."""
LOCK_WAIT = "SELECT set_config('lock_timeout', %(wait)s, true)"

EXPIRE_DEAD_OWNERS = f"""
WITH served AS MATERIALIZED (SELECT serving_since() AS since),
leasing AS MATERIALIZED (
    SELECT r.worker_id FROM workers r, served s
    WHERE (r.locked_at IS NULL OR r.locked_at >= s.since OR s.since < now() - %(grace)s::interval)
      AND EXISTS (SELECT 1 FROM work w
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
is never mistaken for a dead one. A restart of the server, or a failover to a standby,
ends every session: for ``grace`` after the server began serving the store
(``serving_since``, migration 0032: its start, or the promotion of a standby), a worker
that took its lock before then (``locked_at``) is not taken for dead, since it is most
likely taking its lock again; its leases run out by themselves if it does not."""
