"""Statements that name and end server sessions: see ``engine.store.sessions``."""

from __future__ import annotations

OWN_SESSION = """
SELECT pid, backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()
"""

END_SESSION = """
SELECT pg_terminate_backend(pid, %(wait_ms)s) FROM pg_stat_activity
WHERE pid = %(pid)s AND backend_start = %(started)s
"""

SESSION_ALIVE = """
SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = %(pid)s AND backend_start = %(started)s)
"""

FRESH_ACTIVITY = "SELECT pg_stat_clear_snapshot()"
