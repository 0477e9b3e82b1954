"""Wayline engine: durable workflows on PostgreSQL.

The pure core (definitions, events, replay, transitions, orchestration) does no I/O,
reads no clock and draws no randomness; the store and workers bring those in.
"""
