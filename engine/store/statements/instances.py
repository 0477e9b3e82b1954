"""Statements that read instances and their history: see ``engine.store.reads``."""

from __future__ import annotations

from engine.store.rows import HISTORY_COLUMNS

INSTANCE_EXISTS = "SELECT 1 FROM instances WHERE instance_id = %(instance)s"

HISTORY_PAGE = f"""
SELECT {HISTORY_COLUMNS} FROM history
WHERE instance_id = %(instance)s AND sequence > %(after)s
  AND (%(kinds)s::smallint[] IS NULL OR kind = ANY(%(kinds)s::smallint[]))
  AND (%(step)s::text IS NULL OR step_name = %(step)s)
ORDER BY sequence
LIMIT %(limit)s
"""

INSTANCE_COLUMNS = (
    "instance_id, definition_name, definition_version, definition_fingerprint, status, "
    "sequence, tenant_id, created_at, updated_at, archived_at"
)

INSTANCE_ROW = f"SELECT {INSTANCE_COLUMNS} FROM instances WHERE instance_id = %(instance)s"

INSTANCE_PAGE = f"""
SELECT {INSTANCE_COLUMNS} FROM instances
WHERE (%(view)s = 'all'
       OR (%(view)s = 'active' AND archived_at IS NULL)
       OR (%(view)s = 'archived' AND archived_at IS NOT NULL))
  AND (%(name)s::text IS NULL OR definition_name = %(name)s)
  AND (%(version)s::text IS NULL OR definition_version = %(version)s)
  AND (%(status)s::smallint IS NULL OR status = %(status)s)
  AND (%(tenant)s::text IS NULL OR tenant_id = %(tenant)s)
  AND (%(instance)s::text IS NULL OR instance_id = %(instance)s)
  AND (%(started_from)s::timestamptz IS NULL OR created_at >= %(started_from)s)
  AND (%(started_before)s::timestamptz IS NULL OR created_at < %(started_before)s)
  AND (%(after_at)s::timestamptz IS NULL
       OR (created_at, instance_id) > (%(after_at)s, %(after_id)s))
ORDER BY created_at, instance_id
LIMIT %(limit)s
"""

INSTANCE_ROWS = f"SELECT {INSTANCE_COLUMNS} FROM instances WHERE instance_id = ANY(%(ids)s)"
"""Rows of several instances by id (primary-key probes): what a page of dead letters
points at, or the positions of every instance a studio is following."""
