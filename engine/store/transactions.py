"""Running a transaction and classifying how it ended: the one place every write of the
store goes through.

Every write ends NOT_COMMITTED (safe to retry), COMMITTED, or UNKNOWN (see
``engine.store.errors``), and ``run`` says which:

- a failure before COMMIT rolls back and is NOT_COMMITTED: the body's own StoreError (a
  conflict, a lost lease) as it is; an error the server answered as "refused"; no
  answer at all (the connection broke, or nothing came within
  ``OPERATION_TIMEOUT_SECONDS``) as StoreUnavailable;
- a COMMIT that fails, or a write sent ``alone`` (one statement in autocommit, its own
  transaction: no BEGIN or COMMIT round trip) whose answer is lost, is UNKNOWN until
  ``settle`` decides it: the commit path asks PostgreSQL about the transaction id, a
  lone write ends the session that ran it and reads the ledger (``engine.store.commits``);
  without a way to settle, it is CommitUnknown.

Messages name the write, never driver text; the driver's exception stays chained.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from contextvars import ContextVar
from typing import Protocol, TypeVar

import psycopg

from engine.store import batches
from engine.store.errors import CommitUnknown, StoreError, StoreUnavailable

T = TypeVar("T")

OPERATION_TIMEOUT_SECONDS = 30.0
"""Client-side deadline of every store operation: a paused or unreachable server makes
the operation fail (not committed, or unknown for a COMMIT) instead of hanging; the
server's own timeouts cannot fire while it is stopped."""


async def run(
    conn: psycopg.AsyncConnection,
    what: str,
    body: Callable[[psycopg.AsyncConnection], Awaitable[T]],
    *,
    alone: bool = False,
    settle: Callable[[T | None], Awaitable[T]] | None = None,
    commit: Callable[[T], bool] = lambda _: True,
    refused: Callable[[StoreError], T] | None = None,
    within: float = OPERATION_TIMEOUT_SECONDS,
) -> T:
    """Run ``body`` as one transaction on ``conn``, then COMMIT; its result.

    ``alone``: ``body`` is one statement, run in autocommit. ``settle`` decides an
    unknown outcome from the body's result (None when an ``alone`` statement's answer
    was lost) and returns the result to give, or raises; without it (nothing records
    the write) the outcome stays CommitUnknown. ``commit(result)`` False rolls back
    instead (nothing was written). With ``refused``, a failure before COMMIT gives
    ``refused(error)`` instead of raising it. ``within``: the client-side deadline of
    the body and of the COMMIT and its settlement (a drill that pauses the server uses
    short ones, ``engine.store.store.Deadlines``).
    """
    if alone:
        await conn.set_autocommit(True)
    try:
        async with asyncio.timeout(within):
            result = await body(conn)
    except BaseException as exc:
        if alone and _lost(conn, exc):
            return await uncancellable(_settled(what, settle, None, exc, within=None))
        if not alone:
            await rollback(conn)
        error = _not_committed(what, conn, exc)
        if error is None:
            raise
        if refused is not None:
            return refused(error)
        if error is exc:
            raise
        raise error from exc
    if alone:
        return result
    if not commit(result):
        await rollback(conn)
        return result
    await uncancellable(_commit(conn, what, settle, result, within))
    return result


def _lost(conn: psycopg.AsyncConnection, exc: BaseException) -> bool:
    """No answer came: the statement may have run to its end (and committed, alone)."""
    if isinstance(exc, TimeoutError):
        return True
    if not isinstance(exc, psycopg.Error):
        return False
    return conn.broken or (isinstance(exc, psycopg.OperationalError) and exc.sqlstate is None)


def _not_committed(
    what: str, conn: psycopg.AsyncConnection, exc: BaseException
) -> StoreError | None:
    """The NOT_COMMITTED error a failure before COMMIT is reported as; None for one that
    is not the database's (a bug, a cancellation), which propagates as it is."""
    if isinstance(exc, StoreError):
        return exc
    if _lost(conn, exc):
        return StoreUnavailable(f"{what} failed: the database did not answer; nothing was written")
    if isinstance(exc, psycopg.Error):
        return StoreError(f"{what} failed: the database refused it; nothing was written")
    return None


async def _commit(
    conn: psycopg.AsyncConnection,
    what: str,
    settle: Callable[[T | None], Awaitable[T]] | None,
    result: T,
    within: float,
) -> None:
    try:
        async with asyncio.timeout(within):
            await conn.commit()
    except (psycopg.Error, TimeoutError) as exc:
        await _settled(what, settle, result, exc, within=within)


async def _settled(
    what: str,
    settle: Callable[[T | None], Awaitable[T]] | None,
    result: T | None,
    lost: BaseException,
    within: float | None,
) -> T:
    """``settle``'s verdict on a write whose outcome ``lost`` left unknown, if it comes
    ``within`` that many seconds (a COMMIT's; a lone write's settlement waits for the
    session it ends, however long that takes)."""
    if settle is None:
        raise CommitUnknown(f"{what}: the outcome is unknown") from lost
    try:
        async with asyncio.timeout(within):
            return await settle(result)
    except TimeoutError:
        raise CommitUnknown(
            f"the outcome of {what} is unknown and the database did not answer: "
            "reconcile before retrying"
        ) from lost
    except CommitUnknown as unknown:
        raise unknown from lost


class Deadline(Protocol):
    """A store's operation deadline in seconds (``engine.store.store.Deadlines``)."""

    operation: float


class Pool(Protocol):
    """What ``transact`` needs of a store: a pooled connection, and its deadline."""

    @property
    def deadlines(self) -> Deadline: ...

    def connection(self) -> AbstractAsyncContextManager[psycopg.AsyncConnection]: ...


async def transact(
    store: Pool,
    what: str,
    body: Callable[[psycopg.AsyncConnection], Awaitable[T]],
    single_statement: bool = False,
) -> T:
    """``run`` ``body`` on a pooled connection: a short write that no ledger records
    (a lease update, a sweep, a resolution), so an unknown outcome stays CommitUnknown.
    ``single_statement``: ``body`` runs one statement, sent alone in autocommit."""
    async with store.connection() as conn:
        return await run(conn, what, body, alone=single_statement, within=store.deadlines.operation)


async def uncancellable(operation: Awaitable[T]) -> T:
    """Finish ``operation`` even if the caller is cancelled meanwhile, then re-raise.

    A COMMIT abandoned half way would leave its outcome unknown and the connection in
    use after it went back to the pool; so the commit and its settlement always run to
    a classified end, and only then does cancellation take effect. Inside an operation
    that is already uncancellable (a group commit's, around its COMMIT), or in a task no
    caller can cancel (``caller_proof``), nothing more is needed, so no task is made.
    """
    if _SHIELDED.get():
        return await operation
    task = asyncio.ensure_future(_shielded(operation))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        await asyncio.wait([task])
        if not task.cancelled() and task.exception() is not None:
            raise task.exception() from None
        raise


_SHIELDED: ContextVar[bool] = ContextVar("wayline_uncancellable", default=False)
"""True inside an ``uncancellable`` operation (its task has its own context)."""


async def _shielded(operation: Awaitable[T]) -> T:
    caller_proof()
    return await operation


def caller_proof() -> None:
    """Mark the running task as one that no caller's cancellation reaches: it was made
    to run operations for callers that each wait on a future of their own (a group
    commit's writer), and nothing cancels it. What it runs ``uncancellable`` then runs
    in it directly: a task and two event-loop turns fewer per commit."""
    _SHIELDED.set(True)


async def rollback(conn: psycopg.AsyncConnection) -> None:
    # A broken connection is discarded by the pool; nothing was committed either way.
    with contextlib.suppress(psycopg.Error):
        await conn.rollback()
    batches.forget(conn)  # psycopg deallocates the session's prepared statements
