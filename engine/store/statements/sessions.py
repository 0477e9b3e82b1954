"""Statements about server sessions: which one a connection is and ending it
(``engine.store.sessions``), and the server's clock (``Store.sync_clock``)."""

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

SERVER_TIME = "SELECT clock_timestamp()"
