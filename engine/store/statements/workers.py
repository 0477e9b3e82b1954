"""Statements on the worker registry: see ``engine.store.workers``."""

from __future__ import annotations

from engine.store.clock import NOW_SQL

HEARTBEAT = f"""
INSERT INTO workers (worker_id, targets, started_at, heartbeat_at, concurrency, hostname, pid)
VALUES (%(worker)s, %(targets)s, {NOW_SQL}, {NOW_SQL}, %(concurrency)s, %(hostname)s, %(pid)s)
ON CONFLICT (worker_id) DO UPDATE
SET targets = EXCLUDED.targets, heartbeat_at = EXCLUDED.heartbeat_at,
    concurrency = EXCLUDED.concurrency, hostname = EXCLUDED.hostname, pid = EXCLUDED.pid,
    started_at = CASE WHEN workers.pid = EXCLUDED.pid THEN workers.started_at
                      ELSE EXCLUDED.started_at END,
    stopped_at = NULL
"""

STOPPED = f"""
UPDATE workers SET stopped_at = {NOW_SQL}
WHERE worker_id = %(worker)s AND pid = %(pid)s
"""
"""A clean stop; another process that took the id since keeps its row running."""

LIST_WORKERS = """
SELECT worker_id, targets, started_at, heartbeat_at, concurrency, hostname, pid, stopped_at
FROM workers ORDER BY heartbeat_at DESC, worker_id LIMIT %(limit)s
"""

KNOWN_TARGETS = """
SELECT DISTINCT unnest(targets) FROM workers
WHERE heartbeat_at > %(since)s AND stopped_at IS NULL ORDER BY 1
"""
