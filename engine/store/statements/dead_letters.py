"""Statements that list and resolve dead letters: see ``engine.store.dead_letters``."""

from __future__ import annotations

from engine.store.clock import NOW_SQL
from engine.store.rows import WorkState

DEAD_LETTER_PAGE = f"""
SELECT w.work_id, w.kind, w.instance_id, w.sequence, w.tenant_id, w.target, w.lease_token,
       w.attempts, w.failure_code, w.completed_at, w.deadline, w.payload, w.failure_detail
FROM work w
WHERE w.state = {WorkState.DEAD_LETTERED} AND w.completed_at IS NOT NULL
  AND (%(tenant)s::text IS NULL OR w.tenant_id = %(tenant)s)
  AND (%(code)s::text IS NULL OR w.failure_code = %(code)s)
  AND (%(after_at)s::timestamptz IS NULL
       OR (w.completed_at, w.work_id) > (%(after_at)s::timestamptz, %(after_id)s::text))
  AND NOT EXISTS (SELECT 1 FROM work_resolutions r
                  WHERE r.instance_id = w.instance_id AND r.work_id = w.work_id
                    AND r.lease_token = w.lease_token)
ORDER BY w.completed_at, w.work_id
LIMIT %(limit)s
"""

DEAD_LETTER_GROUPS = f"""
SELECT d.failure_code, i.definition_name, i.definition_version, count(*),
       min(d.completed_at), max(d.completed_at)
FROM (SELECT w.instance_id, w.failure_code, w.completed_at FROM work w
      WHERE w.state = {WorkState.DEAD_LETTERED} AND w.completed_at IS NOT NULL
        AND (%(tenant)s::text IS NULL OR w.tenant_id = %(tenant)s)
        AND NOT EXISTS (SELECT 1 FROM work_resolutions r
                        WHERE r.instance_id = w.instance_id AND r.work_id = w.work_id
                          AND r.lease_token = w.lease_token)
      ORDER BY w.completed_at, w.work_id
      LIMIT %(scan)s) d
JOIN instances i ON i.instance_id = d.instance_id
GROUP BY d.failure_code, i.definition_name, i.definition_version
ORDER BY count(*) DESC, d.failure_code, i.definition_name, i.definition_version
"""
"""Unresolved dead letters by failure code and definition version, over at most the
oldest ``scan`` of them: a bounded triage summary, never a count of the whole table."""

RECENT_RESOLUTIONS = """
SELECT r.command_id, r.work_id, r.instance_id, r.lease_token, r.action, r.actor, r.reason,
       r.occurred_at, r.retry_at, r.deadline
FROM work_resolutions r JOIN work w ON w.instance_id = r.instance_id AND w.work_id = r.work_id
WHERE (%(tenant)s::text IS NULL OR w.tenant_id = %(tenant)s)
ORDER BY r.occurred_at DESC, r.command_id DESC
LIMIT %(limit)s
"""
"""The audit of resolutions, newest first (``work_resolutions_time_idx``)."""

RESOLUTION_RECORD = """
SELECT r.command_id, r.work_id, r.instance_id, r.lease_token, r.action, r.actor, r.reason,
       r.occurred_at, r.retry_at, r.deadline
FROM work_resolutions r
WHERE r.instance_id = %(instance)s AND r.command_id = %(command)s
"""

INSTANCE_RESOLUTIONS = """
SELECT r.command_id, r.work_id, r.instance_id, r.lease_token, r.action, r.actor, r.reason,
       r.occurred_at, r.retry_at, r.deadline
FROM work_resolutions r
WHERE r.instance_id = %(instance)s
ORDER BY r.occurred_at, r.command_id
"""
"""Every resolution of one instance's dead letters, oldest first."""

LATEST_INSTANCE_RESOLUTIONS = """
SELECT r.command_id, r.work_id, r.instance_id, r.lease_token, r.action, r.actor, r.reason,
       r.occurred_at, r.retry_at, r.deadline
FROM work_resolutions r
WHERE r.instance_id = %(instance)s
ORDER BY r.occurred_at DESC, r.command_id DESC
LIMIT %(limit)s
"""
"""The newest resolutions of one instance's dead letters, newest first (its audit trail)."""

RESOLUTION_BY_COMMAND = """
SELECT fingerprint FROM work_resolutions
WHERE instance_id = %(instance)s AND command_id = %(command)s
"""

LOCK_DEAD_LETTER = f"""
SELECT 1 FROM work
WHERE instance_id = %(instance)s AND work_id = %(work)s AND state = {WorkState.DEAD_LETTERED}
  AND lease_token = %(token)s
FOR UPDATE
"""

INSERT_RESOLUTION = """
INSERT INTO work_resolutions (instance_id, command_id, fingerprint, work_id, lease_token,
                              action, actor, reason, occurred_at, retry_at, deadline)
VALUES (%(instance)s, %(command)s, %(fingerprint)s, %(work)s, %(token)s, %(action)s, %(actor)s,
        %(reason)s, %(occurred_at)s, %(retry_at)s, %(deadline)s)
ON CONFLICT DO NOTHING
RETURNING 1
"""

READMIT_DEAD_LETTER = f"""
UPDATE work
SET state = {WorkState.AVAILABLE}, available_at = %(retry_at)s, deadline = %(deadline)s,
    failure_code = '', failure_detail = '', completed_at = NULL, lease_owner = '',
    lease_expires_at = NULL
WHERE instance_id = %(instance)s AND work_id = %(work)s AND state = {WorkState.DEAD_LETTERED}
  AND lease_token = %(token)s
RETURNING available_at <= {NOW_SQL}
"""
"""Returns whether the readmitted work is due now (then a NOTIFY wakes idle workers)."""
