"""Several transition statements in one message: a group commit in one round trip.

A group commit (``engine.store.group_commit``) used to cost one round trip per member
plus BEGIN and COMMIT; on a busy worker the client's cost of a round trip (the send,
the wake-up, the event loop) outweighs that of building the statement. Here the group's
statements go to the server as one simple-protocol message, ``BEGIN; EXECUTE ...;
EXECUTE ...``, each statement prepared once per session (``PREPARE``) and called with
its values as literals; the COMMIT follows as today, after the client has read every
member's answer, so the group stays all or nothing and each member's verdict is known
before anything is durable. What the statements are is the caller's: the store's plain
transition writes (``Store.stage_batch``), or the set statements that write a group's
lease-fenced members together (``leases.stage_set``).

Why one simple message and not a pipeline of extended-protocol messages: the server
reads a simple message whole before it runs any of it. A worker stopped or killed while
sending leaves nothing half run, and once the message has run, the open transaction is
idle and ``idle_in_transaction_session_timeout`` ends it if the COMMIT never comes. A
pipeline without a Sync between its statements has no such limit while the server waits
for the rest of it, holding the locks of the statements already run.

A store's statement filter (``engine.store.seams``) sees each statement before it is
prepared, in the shape every other statement has (named placeholders).

A session's prepared statements can vanish: psycopg deallocates all of them after a
rollback. ``forget`` drops what is known of a session then, and a statement found
missing all the same fails the message (nothing ran), so the group falls back to
committing its members one by one, and the next message prepares again.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from weakref import WeakKeyDictionary

import psycopg
from psycopg.adapt import Transformer
from psycopg.pq import TransactionStatus

from engine.store import seams
from engine.store.seams import Row

_PLACEHOLDER = re.compile(r"%\((\w+)\)s")


@dataclass(frozen=True)
class Prepared:
    """A statement prepared in one session: its name and the parameters in order."""

    name: str
    params: tuple[str, ...]


_NAMES = itertools.count(1)
_SESSIONS: WeakKeyDictionary[psycopg.AsyncConnection, dict[str, Prepared]] = WeakKeyDictionary()


def positional(statement: str) -> tuple[str, tuple[str, ...]]:
    """``statement`` with its ``%(name)s`` placeholders numbered ``$1, $2, ...`` in order
    of first use (a name used twice keeps its number), and the names in that order."""
    order: dict[str, int] = {}

    def number(match: re.Match[str]) -> str:
        return f"${order.setdefault(match.group(1), len(order) + 1)}"

    return _PLACEHOLDER.sub(number, statement), tuple(order)


def forget(conn: psycopg.AsyncConnection) -> None:
    """The session's prepared statements are gone (a rollback deallocates them)."""
    _SESSIONS.pop(conn, None)


Call = tuple[str, Mapping[str, Any]]
"""A statement (with ``%(name)s`` placeholders) and its parameters."""


async def send(conn: psycopg.AsyncConnection, calls: Sequence[Call]) -> list[list[Row]]:
    """Run ``calls`` in one transaction, opened here unless one is open, sent as one
    message and left open for the caller to commit; the rows of each call, in order."""
    literal = Transformer.from_context(conn).as_literal
    executes = [await _call(conn, statement, values, literal) for statement, values in calls]
    opening = conn.info.transaction_status is TransactionStatus.IDLE
    message = b"; ".join([b"BEGIN", *executes] if opening else executes)
    cursor = conn.cursor()
    try:
        await cursor.execute(message)
    except psycopg.errors.InvalidSqlStatementName:
        forget(conn)
        raise
    if opening:
        cursor.nextset()
    rows = []
    for _ in calls:
        rows.append(await cursor.fetchall())
        cursor.nextset()
    return rows


async def _call(
    conn: psycopg.AsyncConnection,
    statement: str,
    values: Mapping[str, Any],
    literal: Callable[[Any], bytes],
) -> bytes:
    """``EXECUTE name(literal, ...)`` of ``statement``, preparing it if needed."""
    prepared = await _prepared(conn, statement)
    arguments = b", ".join(literal(values[name]) for name in prepared.params)
    return b"EXECUTE " + prepared.name.encode() + b"(" + arguments + b")"


async def _prepared(conn: psycopg.AsyncConnection, statement: str) -> Prepared:
    known = _SESSIONS.setdefault(conn, {})
    if statement not in known:
        text, params = positional(seams.filtered(conn, statement))
        name = f"wayline_batch_{next(_NAMES)}"  # never reused: a forgotten one may live on
        await conn.execute(f"PREPARE {name} AS {text}".encode())
        known[statement] = Prepared(name, params)
    return known[statement]
