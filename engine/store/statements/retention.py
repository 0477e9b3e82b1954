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
"""The exported instances still as exported, locked; one being changed is skipped."""

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
