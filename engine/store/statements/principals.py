"""Statements of ``engine.store.principals``: a principal's standing."""

STANDING = "SELECT role FROM principal_standing WHERE actor = %(actor)s AND team = %(team)s"
"""The role ``actor`` holds in ``team`` now (no row: none)."""
