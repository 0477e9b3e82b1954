"""Statements that read instances and their history: see ``engine.store.reads``."""

from __future__ import annotations

from engine.model.instance import InstanceStatus
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

HISTORY_NEWEST = f"""
SELECT {HISTORY_COLUMNS} FROM history
WHERE instance_id = %(instance)s
  AND (%(kinds)s::smallint[] IS NULL OR kind = ANY(%(kinds)s::smallint[]))
  AND (%(step)s::text IS NULL OR step_name = %(step)s)
ORDER BY sequence DESC
LIMIT %(limit)s
"""
"""The newest events of an instance that the filters keep, newest first (the key
read backwards from the end, as ``HISTORY_PAGE`` reads it forwards)."""

INSTANCE_COLUMNS = (
    "instance_id, definition_name, definition_version, definition_fingerprint, status, "
    "sequence, tenant_id, created_at, updated_at, archived_at"
)

INSTANCE_ROW = f"SELECT {INSTANCE_COLUMNS} FROM instances WHERE instance_id = %(instance)s"

INSTANCE_SORT_COLUMNS = {
    "started": ("created_at", "timestamptz"),
    "updated": ("updated_at", "timestamptz"),
    "id": ("instance_id", "text"),
    "definition": ("definition_name", "text"),
    "status": ("status", "smallint"),
    "events": ("sequence", "bigint"),
}
"""What the instance list sorts by: a column and its type (a cursor's value is cast to
it); ties are broken by the instance id, so every order is total and keyset-pageable."""


def _instance_page(column: str, kind: str, descending: bool) -> str:
    past, direction = ("<", "DESC") if descending else (">", "ASC")
    return f"""
SELECT {INSTANCE_COLUMNS} FROM instances
WHERE (%(view)s = 'all'
       OR (%(view)s = 'active' AND archived_at IS NULL)
       OR (%(view)s = 'archived' AND archived_at IS NOT NULL))
  AND (%(name)s::text IS NULL OR definition_name = %(name)s)
  AND (%(version)s::text IS NULL OR definition_version = %(version)s)
  AND (%(status)s::smallint IS NULL OR status = %(status)s)
  AND (%(tenant)s::text IS NULL OR tenant_id = %(tenant)s)
  AND (%(instance)s::text IS NULL OR instance_id = %(instance)s)
  AND (%(prefixes)s::text[] IS NULL OR EXISTS (
       SELECT 1 FROM unnest(%(prefixes)s::text[]) AS p(prefix)
       WHERE starts_with(instance_id, p.prefix)))
  AND (%(started_from)s::timestamptz IS NULL OR created_at >= %(started_from)s)
  AND (%(started_before)s::timestamptz IS NULL OR created_at < %(started_before)s)
  AND (%(after_id)s::text IS NULL
       OR ({column}, instance_id) {past} (%(after_value)s::{kind}, %(after_id)s::text))
ORDER BY {column} {direction}, instance_id {direction}
LIMIT %(limit)s
"""


INSTANCE_PAGES = {
    (sort, descending): _instance_page(column, kind, descending)
    for sort, (column, kind) in INSTANCE_SORT_COLUMNS.items()
    for descending in (False, True)
}
"""One keyset page of instances by (sort key, newest or largest first). ``instance``
matches one id exactly and ``prefixes`` every id that starts with one of them."""

INSTANCE_ROWS = f"SELECT {INSTANCE_COLUMNS} FROM instances WHERE instance_id = ANY(%(ids)s)"

STATUSES = "SELECT instance_id, status FROM instances WHERE instance_id = ANY(%(ids)s)"
"""The status of each of several instances that exists: a parent's children."""

CONTINUED_AS = f"""
SELECT h.successor_id FROM instances i
JOIN history h ON h.instance_id = i.instance_id AND h.sequence = i.sequence
WHERE i.instance_id = %(instance)s AND i.status = {InstanceStatus.CONTINUED_AS_NEW.value}
"""
"""The successor an instance that continued as new names in its last event (its key
and the instance's own row: no scan of its history)."""

PARENTS = """
SELECT instance_id, successor_id FROM history
WHERE instance_id = ANY(%(ids)s) AND sequence = 1 AND successor_id <> ''
"""
"""The parent each child names in its start event (``lifecycle.start_draft``)."""
"""Rows of several instances by id (primary-key probes): what a page of dead letters
points at, or the positions of every instance a studio is following."""
