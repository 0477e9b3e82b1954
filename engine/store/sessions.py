"""Which server session a pooled connection is, so a lost autocommit write can be settled.

A commit that is one statement runs in autocommit: no BEGIN or COMMIT round trip, the
statement is the whole transaction. Its transaction id is learnt only from its answer,
so when the answer is lost there is no id to ask ``pg_xact_status`` about. The session
is the handle instead: once the backend that ran the statement has exited, nothing can
commit on its behalf any more, and the ledger tells whether the statement did. A
backend is named by its pid and its start time (pids are reused), read once when the
pool opens the connection (``remember``, the pool's ``configure``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from weakref import WeakKeyDictionary

import psycopg

from engine.store.statements import sessions as sql

END_WAIT_MS = 5_000
"""How long ending a session may wait for its backend to exit (a backend stuck in a
system call can outlive the signal for a moment)."""


@dataclass(frozen=True)
class Session:
    """A server backend: its pid and when it started."""

    pid: int
    started: datetime


_sessions: WeakKeyDictionary[psycopg.AsyncConnection, Session] = WeakKeyDictionary()


async def remember(conn: psycopg.AsyncConnection) -> None:
    """Record which backend ``conn`` talks to; leaves the connection idle, as it was.

    Read in autocommit: no transaction, so no COMMIT, is spent on it."""
    was = conn.autocommit
    await conn.set_autocommit(True)
    row = await (await conn.execute(sql.OWN_SESSION)).fetchone()
    await conn.set_autocommit(was)
    if row is not None:
        _sessions[conn] = Session(*row)


def of(conn: psycopg.AsyncConnection) -> Session | None:
    """The backend ``conn`` was opened on, if it was recorded."""
    return _sessions.get(conn)


async def end(conn: psycopg.AsyncConnection, session: Session) -> bool:
    """End ``session`` from ``conn`` and wait until its backend has exited.

    True when it is gone (ended now, or already: its pid and start time no longer name
    a live backend); False when it was still running after ``END_WAIT_MS``.
    """
    params = {"pid": session.pid, "started": session.started, "wait_ms": END_WAIT_MS}
    row = await (await conn.execute(sql.END_SESSION, params)).fetchone()
    if row is None or row[0]:
        return True
    # Not ended: it outlived the wait, or it exited between the lookup and the signal
    # ("not a PostgreSQL backend process"). Look again, past the cached activity view.
    await conn.execute(sql.FRESH_ACTIVITY)
    row = await (await conn.execute(sql.SESSION_ALIVE, params)).fetchone()
    return not row[0]
