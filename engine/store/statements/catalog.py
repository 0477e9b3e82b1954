"""Statements on published definition versions (the catalog): see ``engine.store.catalog``."""

from __future__ import annotations

PUBLISH = """
INSERT INTO definitions (name, version, fingerprint, spec, deprecated, published_by, team_id)
SELECT %(name)s, %(version)s, %(fingerprint)s, %(spec)s, %(deprecated)s, %(actor)s, %(team)s
WHERE NOT EXISTS (SELECT 1 FROM definitions WHERE name = %(name)s AND team_id <> %(team)s)
ON CONFLICT (name, version) DO NOTHING
RETURNING published_at
"""

EXISTING_VERSION = """
SELECT fingerprint, team_id, version = %(version)s FROM definitions
WHERE name = %(name)s ORDER BY (version = %(version)s) DESC LIMIT 1
"""

ALL_VERSIONS = """
SELECT spec, deprecated, published_at, published_by, team_id, deprecated_by, deprecated_at
FROM definitions
WHERE %(team)s::text IS NULL OR team_id = %(team)s
ORDER BY name, published_at, version
"""

NAME_OWNER = """
SELECT team_id FROM definitions WHERE name = %(name)s LIMIT 1
"""

LATEST_ACTIVE = """
SELECT version, fingerprint FROM definitions WHERE name = %(name)s AND NOT deprecated
ORDER BY published_at DESC, version DESC LIMIT 1
"""

ONE_VERSION = """
SELECT version, fingerprint, deprecated FROM definitions
WHERE name = %(name)s AND version = %(version)s
"""

OWNED_VERSION = """
SELECT 1 FROM definitions
WHERE name = %(name)s AND version = %(version)s AND fingerprint = %(fingerprint)s
  AND team_id = %(team)s
"""

DEPRECATE = """
UPDATE definitions
SET deprecated = true,
    deprecated_by = CASE WHEN deprecated THEN deprecated_by ELSE %(actor)s END,
    deprecated_at = CASE WHEN deprecated THEN deprecated_at ELSE now() END
WHERE name = %(name)s AND version = %(version)s
RETURNING 1
"""

SAVE_REPORT = """
INSERT INTO compatibility_reports
    (name, version, fingerprint, report, compatible, incompatible, complete)
VALUES (%(name)s, %(version)s, %(fingerprint)s, %(report)s, %(compatible)s, %(incompatible)s,
        %(complete)s)
ON CONFLICT (name, version) DO NOTHING
"""

REPORT = """
SELECT report, judged_at FROM compatibility_reports
WHERE name = %(name)s AND version = %(version)s
"""

DECLARE_EDGE = """
INSERT INTO migration_edges (name, from_version, to_version, declared_by, reason)
VALUES (%(name)s, %(from_version)s, %(to_version)s, %(actor)s, %(reason)s)
ON CONFLICT (name, from_version, to_version) DO NOTHING
RETURNING declared_at
"""

EDGES = """
SELECT name, from_version, to_version, declared_by, reason, declared_at FROM migration_edges
WHERE %(name)s::text IS NULL OR name = %(name)s
ORDER BY name, declared_at, from_version, to_version
"""
