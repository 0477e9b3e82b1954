"""Many lease-fenced transitions in one statement: a group commit's members as a set.

Under load a group commit holds several workers' step outcomes, each a ``FENCED_WRITE``
(``engine.store.fencing``). Run one by one, each pays the server's fixed cost of a
statement (executor start-up for about a dozen nodes, the CHECK constraints and partial
index predicates prepared again for every table it writes, the parse of its EXECUTE)
before any row is written; that fixed cost was about a third of the server's time per
step. ``FENCED_SET`` does what ``FENCED_WRITE`` does for each member, for all of them in
one statement: the members arrive as one JSON array (one row each, its history and work
rows nested), and every part of the statement works per member, keyed by ``m``.

Each member keeps the verdict it would have had alone, read from its own row of the
answer (``member_row`` puts it in ``FENCED_WRITE``'s shape): its instance locked and at
the expected position and pin, its transition id new, its lease held (no lease, no
row). What a member writes is gated on its own ``ok`` row, exactly like the single
statement. Two members of one instance would both see the position before either
moved it, so they never share a statement (``rounds``): the later one runs in the next
statement of the message, after the first has moved the instance.

The server's clock (``now``) is one value for the whole statement: members share it,
as they share their store. Rows are found by key: the locks in a lateral subquery per
member; the updates join the members that passed ``ok``, which the planner estimates
at one row, so it probes the key's index once per member rather than scanning a table
(an integration test checks the plans). Never by ``ctid``: a row updated after the
statement's snapshot is re-read by its key (EvalPlanQual), which a ``ctid`` match
would miss.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.store.clock import NOW_SQL as NOW
from engine.store.commits import Write, one_line, to_json
from engine.store.rows import HISTORY_FIELDS, WORK_FIELDS, WorkState, lease_columns

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
    ("pin_name", "text"),
    ("pin_version", "text"),
    ("pin_fingerprint", "text"),
    ("retire", "boolean"),
    ("work_id", "text"),
    ("owner", "text"),
    ("token", "bigint"),
    ("next_id", "text"),
    ("lease", "interval"),
    ("finish", "boolean"),
    ("history", "json"),
    ("work", "json"),
)
"""A member's values: ``FENCED_WRITE``'s parameters but ``now``, in the JSON sent."""
MEMBER_FIELDS_SENT = tuple(n for n, _ in MEMBER_FIELDS if n not in ("m", "history", "work"))
"""The scalar values taken from each write's parameters as they are."""

SET_HELD = one_line(f"""w.work_id = i.work_id AND w.state = {WorkState.LEASED}
    AND w.lease_owner = i.owner AND w.lease_token = i.token
    AND w.lease_expires_at > {NOW} AND w.deadline > {NOW}""")
"""The member still holds its lease (owner, token, unexpired): ``work.HELD`` per member."""
_LEASED_ON = "r.work_id = i.next_id"
_LEASED = f"({_LEASED_ON})::int"
_WORK_COLUMNS = ", ".join(
    [*WORK_FIELDS, "state", "attempts", "lease_token", "lease_owner", "lease_expires_at"]
)
_WORK_VALUES = ", ".join(
    [
        *("ok.tenant_id" if n == "tenant_id" else f"r.{n}" for n in WORK_FIELDS),
        f"1 + {_LEASED}",
        _LEASED,
        _LEASED,
        f"CASE WHEN {_LEASED_ON} THEN i.owner ELSE '' END",
        f"CASE WHEN {_LEASED_ON} THEN LEAST({NOW} + i.lease, r.deadline) END",
    ]
)
_LEASE_COLUMNS = lease_columns("n")
"""``work.LEASE_COLUMNS`` of the work row a member leases on (eager dispatch)."""

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
        SELECT fingerprint FROM transitions WHERE transition_id = i.id OFFSET 0
    ) p
),
ok AS MATERIALIZED (
    SELECT i.m, l.tenant_id FROM input i JOIN locked l ON l.m = i.m
    WHERE l.sequence = i.expected AND l.definition_name = i.pin_name
      AND l.definition_version = i.pin_version
      AND l.definition_fingerprint = i.pin_fingerprint
      AND NOT EXISTS (SELECT 1 FROM prior p WHERE p.m = i.m)
      AND EXISTS (SELECT 1 FROM held h WHERE h.m = i.m)
),
ledger AS (
    INSERT INTO transitions (transition_id, instance_id, fingerprint, expected_sequence,
                             committed_sequence, xact_id)
    SELECT i.id, i.instance, i.fingerprint, i.expected, i.committed, pg_current_xact_id()
    FROM input i JOIN ok ON ok.m = i.m
),
events AS (
    INSERT INTO history ({", ".join(HISTORY_FIELDS)})
    SELECT {", ".join(f"r.{n}" for n in HISTORY_FIELDS)}
    FROM input i JOIN ok ON ok.m = i.m
        CROSS JOIN LATERAL json_populate_recordset(NULL::history, i.history) AS r
),
new_work AS (
    INSERT INTO work AS w ({_WORK_COLUMNS})
    SELECT {_WORK_VALUES}
    FROM input i JOIN ok ON ok.m = i.m
        CROSS JOIN LATERAL json_populate_recordset(NULL::work, i.work) AS r
    RETURNING w.*
),
finished AS (
    UPDATE work w
    SET state = {WorkState.COMPLETED}, completed_at = {NOW}, lease_owner = '',
        lease_expires_at = NULL
    FROM input i JOIN ok ON ok.m = i.m
    WHERE w.work_id = i.work_id AND i.finish
),
retired AS (
    UPDATE work
    SET state = {WorkState.COMPLETED}, completed_at = i.at, failure_code = 'instance-ended'
    FROM input i JOIN ok ON ok.m = i.m
    WHERE work.instance_id = i.instance AND work.state = {WorkState.AVAILABLE} AND i.retire
),
moved AS (
    UPDATE instances
    SET sequence = i.committed,
        updated_at = i.at,
        status = COALESCE(i.status, instances.status),
        definition_name = i.name,
        definition_version = i.version,
        definition_fingerprint = i.def_fingerprint,
        archived_at = CASE WHEN i.terminal THEN COALESCE(archived_at, i.at)
                           ELSE archived_at END
    FROM input i JOIN ok ON ok.m = i.m
    WHERE instances.instance_id = i.instance AND instances.sequence = i.expected
    RETURNING i.m
),
notified AS MATERIALIZED (
    SELECT pg_notify(c.channel, '') FROM (
        SELECT DISTINCT i.channel FROM input i JOIN ok ON ok.m = i.m WHERE i.notify
    ) c
)
SELECT i.m, h.m IS NOT NULL, pg_current_xact_id()::text, p.fingerprint,
       l.sequence, l.definition_name, l.definition_version, l.definition_fingerprint,
       (SELECT count(*) FROM moved mv WHERE mv.m = i.m),
       (SELECT count(*) FROM notified),
       {_LEASE_COLUMNS}
FROM input i
    LEFT JOIN locked l ON l.m = i.m
    LEFT JOIN held h ON h.m = i.m
    LEFT JOIN prior p ON p.m = i.m
    LEFT JOIN new_work n ON n.work_id = i.next_id
ORDER BY i.m
""")
"""``FENCED_WRITE`` for every member of ``%(members)s`` (see the module docstring); one
row per member, in member order: ``m``, whether its lease was held, then the columns of
``FENCED_WRITE``'s row."""


def rounds(writes: Sequence[Write]) -> list[list[int]]:
    """The positions of the lease-fenced ``writes`` in statements whose members touch
    distinct instances, in order: a member's instance appears once per statement, and
    a later member of the same instance goes to a later statement."""
    placed: list[list[int]] = []
    seen: list[set[str]] = []
    for k, write in enumerate(writes):
        if write.fenced is None:
            continue
        instance = write.params["instance"]
        level = sum(1 for instances in seen if instance in instances)
        if level == len(placed):
            placed.append([])
            seen.append(set())
        placed[level].append(k)
        seen[level].add(instance)
    return placed


def params(writes: Sequence[Write]) -> dict[str, Any]:
    """The parameters of ``FENCED_SET`` for ``writes`` (lease-fenced ``Write``s of one
    store: one ``now``). The history and work rows, already JSON, are nested as they are."""
    members = []
    for m, write in enumerate(writes):
        values = write.params
        scalars = {name: values[name] for name in MEMBER_FIELDS_SENT}
        scalars["m"] = m
        head = to_json(scalars)[:-1]
        members.append(f'{head}, "history": {values["history"]}, "work": {values["work"]}}}')
    return {"members": "[" + ", ".join(members) + "]", "now": writes[0].params["now"]}


def member_row(row: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """A member's row of ``FENCED_SET`` in ``FENCED_WRITE``'s shape: None when its
    lease was not held (the single statement returns no row then)."""
    return row[2:] if row[1] else None
