"""The store's seams: where a harness watches or changes what the store does, without
patching it.

The drill harness must break the engine on purpose (its self-test's mutants) and watch
what it does from the inside (the fencing oracle, the settlement recorder). Both go
through what ``Store.open`` is given, carried by every connection the store opens
(``SeamedConnection``), so the engine's own code and statements stay as they are:

- a **statement filter** (``StatementFilter``): every statement the store runs passes
  through it before psycopg sends it (the connection's cursors are ``FilteredCursor``);
  the statements a group commit prepares pass through it before they are prepared
  (``filtered``). Without one, the connections keep psycopg's own cursors: no Python
  runs per statement.
- **hooks** (``StoreHooks``) at the two points where the store's own Python decides
  something a statement cannot show: a lease holder's writes (``lease_writes``) and the
  settlement of a commit whose answer was lost (``settle``). Each default is the
  store's behaviour; without hooks, those points run it directly.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import psycopg
from psycopg.abc import Query
from psycopg.pq import TransactionStatus

if TYPE_CHECKING:
    from engine.model.transitions import Transition

Row = tuple[Any, ...]
StatementFilter = Callable[[Query], Query]
"""Takes a statement as the store is about to send it (its text with ``%(name)s``
placeholders, or bytes, or a composed statement) and returns what is sent instead."""


@dataclass(frozen=True)
class LeaseWrite:
    """A lease holder's write: its statement and parameters, which name the lease
    (``work_instance`` and ``work_id``, the work's key; ``owner``, ``token``) and the
    store clock's ``now``. ``takes``: the write takes an offered lease
    (``engine.store.offers``), so the worker may write while no one holds the work yet
    (it was never leased, and the worker judges it due), and holds it under ``token``
    once it has."""

    statement: str
    params: Mapping[str, Any]
    takes: bool = False


@dataclass(frozen=True)
class LeaseWrites:
    """A lease holder's ``writes``, about to run on ``conn``: ``send()`` runs them and
    answers each one's row (None: the lease was not held, nothing written). ``alone``:
    one write in autocommit, its own transaction; otherwise they run in the caller's
    transaction (open, or opened by their message when ``conn`` is idle), which the
    caller commits."""

    conn: psycopg.AsyncConnection
    writes: Sequence[LeaseWrite]
    send: Callable[[], Awaitable[Sequence[Row | None]]]
    alone: bool


@dataclass(frozen=True)
class Unanswered:
    """A commit whose answer was lost: the transitions it wrote, and what names it on
    the server (the transaction id of a COMMIT, or the backend pid of a write sent alone
    in autocommit)."""

    written: Sequence[Transition]
    xid: str = ""
    pid: int = 0


class StoreHooks:
    """Points where the store's behaviour may be observed or altered. Subclass and
    override; every default here is exactly what the store does."""

    async def lease_writes(self, sent: LeaseWrites) -> Sequence[Row | None]:
        """A lease holder's writes are about to run (see ``LeaseWrites``)."""
        return await sent.send()

    async def settle(self, unanswered: Unanswered, decide: Callable[[], Awaitable[None]]) -> None:
        """The store settles a commit whose answer was lost: ``decide`` returns when it
        committed, raises StoreError when it did not, CommitUnknown when nobody can
        tell yet, DuplicateTransition when the ledger holds other content."""
        await decide()


@dataclass(frozen=True)
class Seams:
    """What a store was opened with: its statement filter and its hooks (None: none)."""

    statement_filter: StatementFilter | None = None
    hooks: StoreHooks | None = None


NO_SEAMS = Seams()


class FilteredCursor(psycopg.AsyncCursor):
    """A cursor whose statements pass through its connection's statement filter."""

    async def execute(self, query: Query, params: Any = None, **options: Any) -> Any:
        return await super().execute(_filter_of(self.connection)(query), params, **options)

    async def executemany(self, query: Query, params_seq: Any, **options: Any) -> None:
        await super().executemany(_filter_of(self.connection)(query), params_seq, **options)


class SeamedConnection(psycopg.AsyncConnection):
    """A store's connection: carries the store's seams (``connect(..., seams=...)``)."""

    seams: Seams = NO_SEAMS

    @classmethod
    async def connect(  # type: ignore[override]
        cls, conninfo: str = "", *, seams: Seams = NO_SEAMS, **kwargs: Any
    ) -> SeamedConnection:
        if seams.statement_filter is not None:
            kwargs["cursor_factory"] = FilteredCursor
        conn = cast(SeamedConnection, await super().connect(conninfo, **kwargs))
        conn.seams = seams
        return conn


def _filter_of(conn: psycopg.AsyncConnection) -> StatementFilter:
    return cast(StatementFilter, cast(SeamedConnection, conn).seams.statement_filter)


def filtered(conn: psycopg.AsyncConnection, statement: str) -> str:
    """``statement`` as ``conn``'s statement filter makes it, for a caller that sends it
    in another shape (a group commit prepares it with numbered placeholders)."""
    seams = getattr(conn, "seams", None)
    if seams is None or seams.statement_filter is None:
        return statement
    return cast(str, seams.statement_filter(statement))


def hooks_of(conn: psycopg.AsyncConnection) -> StoreHooks | None:
    seams = getattr(conn, "seams", None)
    return None if seams is None else seams.hooks


async def lease_write(
    conn: psycopg.AsyncConnection, statement: str, params: dict[str, Any], takes: bool = False
) -> Row | None:
    """Run one lease holder's write on ``conn``: its row, None when the lease was not
    held (``takes``: not takeable, ``LeaseWrite``). Through the store's ``lease_writes``
    hook, when it has one."""
    if hooks_of(conn) is None:
        return await (await conn.execute(statement, params)).fetchone()

    async def send() -> list[Row | None]:
        return [await (await conn.execute(statement, params)).fetchone()]

    alone = conn.autocommit and conn.info.transaction_status is TransactionStatus.IDLE
    (row,) = await lease_writes(conn, [LeaseWrite(statement, params, takes)], send, alone)
    return row


async def lease_writes(
    conn: psycopg.AsyncConnection,
    writes: Sequence[LeaseWrite],
    send: Callable[[], Awaitable[Sequence[Row | None]]],
    alone: bool = False,
) -> Sequence[Row | None]:
    """Send lease holders' ``writes`` by ``send`` (which answers each one's row), through
    the store's ``lease_writes`` hook when it has one (see ``LeaseWrites``)."""
    hooks = hooks_of(conn)
    if hooks is None:
        return await send()
    return await hooks.lease_writes(LeaseWrites(conn, writes, send, alone))


async def settle(
    hooks: StoreHooks | None, unanswered: Unanswered, decide: Callable[[], Awaitable[None]]
) -> None:
    """Settle ``unanswered`` by ``decide``, through the ``settle`` of ``hooks`` if any."""
    await (decide() if hooks is None else hooks.settle(unanswered, decide))
