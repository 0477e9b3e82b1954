"""Round trips to the server, counted on the wire.

libpq traces every protocol message of a connection (``PGconn.trace``). A round trip
ends with the server's ReadyForQuery; it is counted when it ran something (an
``Execute``, or a simple ``Query``), whether one statement or a pipeline of several.
The round trip psycopg spends preparing a statement the session has run often (a
``Parse`` alone, once per session and statement) is not counted: it is not one an
operation makes each time. A store opened with one connection runs everything on it,
so its trace sees every round trip the store makes.
"""

from __future__ import annotations

import tempfile
from collections.abc import Awaitable, Iterable
from typing import TypeVar

from psycopg import pq

from engine.store.store import Store

T = TypeVar("T")
RUNS = ("Execute", "Query")
"""What the client (``F``) sends that runs a statement."""
END = "ReadyForQuery"
"""What the server (``B``) sends at the end of a round trip."""


async def round_trips(store: Store, work: Awaitable[T]) -> tuple[T, int]:
    """What ``work`` gives, and how many round trips it made on ``store``'s connection."""
    assert store.pool.max_size == 1, "a store of one connection, so that one trace sees all"
    with tempfile.TemporaryFile("w+") as trace:
        async with store.pool.connection() as conn:
            conn.pgconn.trace(trace.fileno())
            conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS)
        try:
            result = await work
        finally:
            async with store.pool.connection() as conn:
                conn.pgconn.untrace()  # flushes the trace
        trace.seek(0)
        return result, counted(trace)


def counted(trace: Iterable[str]) -> int:
    """The round trips in a trace that ran something (see the module)."""
    trips, ran = 0, False
    for line in trace:
        fields = line.split("\t")  # side (F: client, B: server), length, message, ...
        if len(fields) < 3:  # the text of a statement, after its Parse
            continue
        side, message = fields[0], fields[2]
        if side == "F" and message in RUNS:
            ran = True
        elif side == "B" and message == END:
            trips, ran = trips + ran, False
    return trips
