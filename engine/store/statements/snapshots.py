"""Statements of snapshots of replayed state: see ``engine.store.snapshots``."""

from __future__ import annotations

WRITE_SNAPSHOT = """
INSERT INTO snapshots (instance_id, sequence, fold_version, digest, state, written_at)
VALUES (%(instance)s, %(sequence)s, %(fold_version)s, %(digest)s, %(state)s, %(at)s)
ON CONFLICT (instance_id) DO UPDATE
SET sequence = EXCLUDED.sequence, fold_version = EXCLUDED.fold_version,
    digest = EXCLUDED.digest, state = EXCLUDED.state, written_at = EXCLUDED.written_at
"""
"""The instance's newest snapshot replaces its previous one: it is written by a
transition that holds the instance row's lock at the instance's latest position."""

NEWEST_SNAPSHOT = """
SELECT s.sequence, s.fold_version, s.digest, s.state FROM snapshots s
JOIN instances i ON i.instance_id = s.instance_id AND s.sequence <= i.sequence
WHERE s.instance_id = %(instance)s
"""
"""The instance's snapshot, if it has one at or before its position."""
