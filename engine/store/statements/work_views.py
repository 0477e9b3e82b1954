"""Statements that read work rows for operators: see ``engine.store.work_views``."""

from __future__ import annotations

from engine.store.rows import WorkState

COLUMNS = f"""work_id, kind, instance_id, sequence, target, state, attempts, lease_owner,
       lease_token, lease_expires_at, available_at, deadline, failure_code, completed_at,
       payload, tenant_id, failure_detail,
       state = {WorkState.DEAD_LETTERED} AND EXISTS (
         SELECT 1 FROM work_resolutions r WHERE r.instance_id = work.instance_id
           AND r.work_id = work.work_id AND r.lease_token = work.lease_token)"""
"""The last column: a dead letter discarded by an operator (a discard leaves the row
dead-lettered, with its resolution on the resolutions table's fence key; a retry moves
it on), so no operator is asked to resolve it again."""

INSTANCE_WORK = f"""
SELECT {COLUMNS}
FROM work WHERE instance_id = %(instance)s
ORDER BY sequence DESC, work_id DESC
LIMIT %(limit)s
"""
"""The newest work rows of one instance (one row per scheduled attempt, timer or child
start), newest first."""

HELD_LEASES = f"""
SELECT {COLUMNS}
FROM work
WHERE state = {WorkState.LEASED} AND lease_owner = ANY(%(owners)s)
  AND (%(tenant)s::text IS NULL OR tenant_id = %(tenant)s)
ORDER BY lease_owner, lease_expires_at, work_id
LIMIT %(limit)s
"""
"""Leases recorded for the given owners (expired ones included: until a claim takes
them over, the row still names its last owner)."""

WORK_ROWS = f"""
SELECT {COLUMNS} FROM work
WHERE (instance_id, work_id) IN (SELECT * FROM unnest(%(instances)s::text[], %(ids)s::text[]))
"""
"""Work rows by key, (instance id, work id) pairs given as two arrays (primary-key
probes): what an operator is about to resolve."""
