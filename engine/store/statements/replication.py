"""Statements on a server's place in the WAL: see ``engine.store.replication``."""

from __future__ import annotations

WAL_POSITION = """
SELECT pg_is_in_recovery(),
       pg_wal_lsn_diff(
           CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn()
                ELSE pg_current_wal_flush_lsn() END,
           '0/0')::bigint,
       pg_last_xact_replay_timestamp(),
       now()
"""
