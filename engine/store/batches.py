"""Several transition statements in one message: a group commit in one round trip.

A group commit (``engine.store.group_commit``) used to cost one round trip per member
plus BEGIN and COMMIT; on a busy worker the client's cost of a round trip (the send,
the wake-up, the event loop) outweighs that of building the statement. Here the group's
statements go to the server as one simple-protocol message, ``BEGIN; EXECUTE ...;
EXECUTE ...``, each statement prepared once per session (``PREPARE``) and called with
its values as literals; the COMMIT follows as today, after the client has read every
member's answer, so the group stays all or nothing and each member's verdict is known
before anything is durable. The lease-fenced members (a worker's step outcomes) are
written together by one set statement (``FENCED_SET``, see below), the others one by
one.

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from weakref import WeakKeyDictionary

import psycopg
from psycopg.adapt import Transformer
from psycopg.pq import TransactionStatus

from engine.store import seams
from engine.store.commits import Write, to_json
from engine.store.statements import leases as lease_sql

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


async def run(
    conn: psycopg.AsyncConnection, writes: Sequence[Write]
) -> list[tuple[Any, ...] | None]:
    """Run ``writes`` in one transaction, opened here unless one is open, sent as one
    message and left open for the caller to commit; each write's row (None: no row).
    The lease-fenced writes go as sets (``FENCED_SET``), the others one by one."""
    return await seams.group_writes(conn, writes, lambda: _send(conn, writes))


async def _send(
    conn: psycopg.AsyncConnection, writes: Sequence[Write]
) -> list[tuple[Any, ...] | None]:
    literal = Transformer.from_context(conn).as_literal
    sets = rounds(writes)
    alone = [k for k, write in enumerate(writes) if write.fenced is None]
    calls = [
        *[await _call(conn, lease_sql.FENCED_SET, _set_params(writes, s), literal) for s in sets],
        *[await _call(conn, writes[k].statement, writes[k].params, literal) for k in alone],
    ]
    opening = conn.info.transaction_status is TransactionStatus.IDLE
    message = b"; ".join([b"BEGIN", *calls] if opening else calls)
    cursor = conn.cursor()
    try:
        await cursor.execute(message)
    except psycopg.errors.InvalidSqlStatementName:
        forget(conn)
        raise
    if opening:
        cursor.nextset()
    rows: list[tuple[Any, ...] | None] = [None] * len(writes)
    for members in sets:
        for k, row in zip(members, await cursor.fetchall(), strict=True):
            rows[k] = member_row(row)
        cursor.nextset()
    for k in alone:
        rows[k] = await cursor.fetchone()
        cursor.nextset()
    return rows


def _set_params(writes: Sequence[Write], members: list[int]) -> dict[str, Any]:
    return set_params([writes[k] for k in members])


async def _call(
    conn: psycopg.AsyncConnection,
    statement: str,
    values: dict[str, Any],
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


# Lease-fenced writes as a set ---------------------------------------------------------

MEMBER_FIELDS_SENT = tuple(
    n for n, _ in lease_sql.MEMBER_FIELDS if n not in ("m", "history", "work")
)
"""The scalar values taken from each write's parameters as they are."""


def rounds(writes: Sequence[Write]) -> list[list[int]]:
    """The positions of the lease-fenced ``writes`` in statements whose members touch
    distinct instances, in order: a member's instance appears once per statement, and
    a later member of the same instance goes to a later statement."""
    placed: list[list[int]] = []
    seen: list[set[str]] = []
    for k, write in enumerate(writes):
        if write.fenced is None:
            continue
        instance = write.params["instance"]
        level = sum(1 for instances in seen if instance in instances)
        if level == len(placed):
            placed.append([])
            seen.append(set())
        placed[level].append(k)
        seen[level].add(instance)
    return placed


def set_params(writes: Sequence[Write]) -> dict[str, Any]:
    """The parameters of ``FENCED_SET`` for ``writes`` (lease-fenced ``Write``s of one
    store: one ``now``). The history and work rows, already JSON, are nested as they are."""
    members = []
    for m, write in enumerate(writes):
        values = write.params
        scalars = {name: values[name] for name in MEMBER_FIELDS_SENT}
        scalars["m"] = m
        head = to_json(scalars)[:-1]
        members.append(f'{head}, "history": {values["history"]}, "work": {values["work"]}}}')
    return {"members": "[" + ", ".join(members) + "]", "now": writes[0].params["now"]}


def member_row(row: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """A member's row of ``FENCED_SET`` in ``FENCED_WRITE``'s shape: None when its
    lease was not held (the single statement returns no row then)."""
    return row[2:] if row[1] else None
