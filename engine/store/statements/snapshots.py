"""Statements of snapshots of replayed state: see ``engine.store.snapshots``."""

from __future__ import annotations

from engine.store.rows import HISTORY_COLUMNS, HISTORY_FIELDS

WRITE_SNAPSHOT = """
INSERT INTO snapshots (instance_id, sequence, fold_version, digest, state, written_at)
VALUES (%(instance)s, %(sequence)s, %(fold_version)s, %(digest)s, %(state)s, %(at)s)
ON CONFLICT (instance_id) DO UPDATE
SET sequence = EXCLUDED.sequence, fold_version = EXCLUDED.fold_version,
    digest = EXCLUDED.digest, state = EXCLUDED.state, written_at = EXCLUDED.written_at
"""
"""The instance's newest snapshot replaces its previous one: it is written by a
transition that holds the instance row's lock at the instance's latest position."""

SNAPSHOT_COLUMNS = 4
"""An ``OPENING`` row's leading columns: a snapshot's sequence, fold version, digest and
state; the history columns follow."""

OPENING = f"""
WITH newest AS (
    SELECT s.sequence, s.fold_version, s.digest, s.state FROM snapshots s
    JOIN instances i ON i.instance_id = s.instance_id AND s.sequence <= i.sequence
    WHERE s.instance_id = %(instance)s
)
SELECT sequence, fold_version, digest, state, {", ".join(["NULL"] * len(HISTORY_FIELDS))}
FROM newest
UNION ALL (
    SELECT sequence, NULL, NULL, NULL, {HISTORY_COLUMNS} FROM history
    WHERE instance_id = %(instance)s
      AND sequence > coalesce((SELECT sequence FROM newest), 0)
    ORDER BY sequence
    LIMIT %(limit)s
)
ORDER BY 1
"""
"""Opening an instance in one statement: its snapshot, if it has one at or before its
position, as the first row (its history columns null), then at most ``limit`` history
rows after it, or after its start without one (their snapshot columns null but the
sequence that orders them)."""
