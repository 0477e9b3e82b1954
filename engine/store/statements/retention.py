"""Statements of bounded history: see ``engine.store.retention``."""

from __future__ import annotations

from engine.store.rows import WorkState

FINISHED = f"({WorkState.COMPLETED}, {WorkState.DEAD_LETTERED})"

SET_POLICY = """
INSERT INTO retention_policies (tenant_id, keep, set_by, set_at)
VALUES (%(tenant)s, %(keep)s, %(actor)s, %(now)s)
ON CONFLICT (tenant_id) DO UPDATE
SET keep = EXCLUDED.keep, set_by = EXCLUDED.set_by, set_at = EXCLUDED.set_at
"""

REMOVE_POLICY = """
DELETE FROM retention_policies WHERE tenant_id = %(tenant)s
RETURNING tenant_id, keep, set_by, set_at
"""

POLICIES = "SELECT tenant_id, keep, set_by, set_at FROM retention_policies ORDER BY tenant_id"

EXPIRED = f"""
SELECT i.instance_id, i.sequence FROM instances i
WHERE i.tenant_id = %(tenant)s
  AND i.archived_at IS NOT NULL AND i.archived_at < %(cutoff)s
  AND NOT EXISTS (
      SELECT 1 FROM work w WHERE w.instance_id = i.instance_id AND w.state NOT IN {FINISHED}
      OFFSET 0)
  AND NOT EXISTS (
      SELECT 1 FROM history h JOIN instances c ON c.instance_id = h.successor_id
      WHERE h.instance_id = i.instance_id AND h.successor_id <> '' AND c.archived_at IS NULL
      OFFSET 0)
ORDER BY i.archived_at, i.instance_id
LIMIT %(limit)s
"""
"""Ended instances past the cutoff with no live work and no child still running (a
running child reports to its parent, which must still be there).

``OFFSET 0`` keeps each ``NOT EXISTS`` a lookup per candidate instance (by
``work_instance_idx`` and the history key), so a batch costs the same at any table size.
Without it the planner turns both into anti-joins. Expecting almost no live work and no
child events, it then scans all of work and all of history once per batch: 0.18 s at 10^6
history rows, about 1 s at 10^7 (``bench/run --history-scale``)."""

LOCK_UNCHANGED = """
SELECT i.instance_id FROM instances i
JOIN unnest(%(ids)s::text[], %(sequences)s::bigint[]) AS c (instance_id, sequence)
  ON c.instance_id = i.instance_id AND c.sequence = i.sequence
WHERE i.archived_at IS NOT NULL
FOR UPDATE OF i SKIP LOCKED
"""
"""The exported instances still at their exported position, locked; one being changed is
skipped."""

LOCK_WORK = """
SELECT 1 FROM work WHERE instance_id = ANY(%(ids)s) ORDER BY instance_id, work_id FOR UPDATE
"""
"""The chosen instances' work rows, locked (in key order): a dead letter's resolution holds
its work row's lock until it commits (``dead_letters.LOCK_DEAD_LETTER``), so once these are
held every resolution of theirs has committed (and the next statement sees it) or waits,
to find no dead letter once they are removed. An ended instance has no live work, so
only such a resolution can hold one, and only for its own short transaction."""

RESOLUTIONS_AS_EXPORTED = """
SELECT c.instance_id
FROM unnest(%(ids)s::text[], %(counts)s::bigint[]) AS c (instance_id, exported)
WHERE (SELECT count(*) FROM work_resolutions r WHERE r.instance_id = c.instance_id)
      = c.exported
"""
"""The chosen instances that have exactly the resolutions their export holds (they are
only ever added, so the number says it): one resolved since its export is kept."""

REMOVE = (
    "DELETE FROM work_resolutions WHERE instance_id = ANY(%(ids)s)",
    "DELETE FROM work WHERE instance_id = ANY(%(ids)s)",
    "DELETE FROM history WHERE instance_id = ANY(%(ids)s)",
    "DELETE FROM transitions WHERE instance_id = ANY(%(ids)s)",
    "DELETE FROM hold_exemptions WHERE instance_id = ANY(%(ids)s)",
    "DELETE FROM snapshots WHERE instance_id = ANY(%(ids)s)",
    "DELETE FROM instances WHERE instance_id = ANY(%(ids)s)",
)
"""An instance's rows, dependents first."""

TRY_RUN_LOCK = """
SELECT pg_try_advisory_lock(hashtext('wayline-retention:' || %(schema)s::text),
                            hashtext(%(tenant)s::text))
"""
"""One retention run per team and schema: a session's lock, so it ends with the run."""
