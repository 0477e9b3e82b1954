"""The store's NOTIFY channels: new work, and ends of instances.

Work: a transition that makes work due now notifies the store's work channel (a hint:
idle workers ``LISTEN`` on it and claim, ``engine.worker.loop``). Ends: the transition
statement that makes an instance's status terminal notifies the store's end channel
with the instance's id as the payload (``engine.store.commits``); it rides in the
statement that writes the end, so it is delivered exactly when the end commits, and no
other transition sends it. Waiters listen on it (``engine.api.waits``).

A transaction that notifies takes PostgreSQL's notification-queue lock while it commits,
whether anyone listens or not, so notifying commits are serialized. That is why new
work handed on by eager dispatch announces nothing (``leases._channel``), and why an end
is worth it: one per instance, and a group commit's transaction carries many (W1 at
1x32 measured the same throughput with and without it, README).
"""

from __future__ import annotations

import hashlib

MAX_CHANNEL_BYTES = 63
"""PostgreSQL's longest channel name (``NAMEDATALEN`` - 1): ``pg_notify`` refuses a
longer one, which would fail every transition that notifies it."""
KEPT_SCHEMA_CHARACTERS = 40
"""How much of a long schema name a channel keeps, before a digest of the whole name."""


def work_channel(schema: str) -> str:
    """The channel on which new work of the store on ``schema`` is announced."""
    return _channel(schema, "work")


def ended_channel(schema: str) -> str:
    """The channel on which ends of instances of the store on ``schema`` are announced."""
    return _channel(schema, "ended")


def _channel(schema: str, purpose: str) -> str:
    """``<schema>_<purpose>``; when that is too long for PostgreSQL (a schema name may
    have 63 characters), the schema's first characters and a digest of its whole name,
    so that channels stay apart per schema and per purpose."""
    name = f"{schema}_{purpose}"
    if len(name) <= MAX_CHANNEL_BYTES:
        return name
    digest = hashlib.sha256(schema.encode()).hexdigest()[:12]
    return f"{schema[:KEPT_SCHEMA_CHARACTERS]}_{digest}_{purpose}"
