"""Ends of instances, announced: the channel a transition that ends an instance
notifies.

The transition statement that makes an instance's status terminal also sends
``pg_notify`` on the store's end channel with the instance's id as the payload
(``engine.store.commits``): it rides in the statement that writes the end, so it is
delivered exactly when the end commits, and no other transition sends it. Waiters
listen on it (``engine.api.waits``).
"""

from __future__ import annotations

MAX_CHANNEL_BYTES = 63
"""PostgreSQL's longest channel name (``NAMEDATALEN`` - 1): ``pg_notify`` refuses a
longer one, which would fail every transition that ends an instance."""


def channel_of(schema: str) -> str:
    """The end channel of the store on ``schema``: its work channel's sibling, cut to a
    length PostgreSQL takes (two schemas that share a long prefix then share it, which
    costs a waiter only a read: the payload names an instance, which it reads again)."""
    return f"{schema}_ended"[:MAX_CHANNEL_BYTES]
