"""Awaiting an instance's end (``Client.wait``) without polling.

The waiter LISTENs on the store's end channel first (``engine.store.channels``), then
reads the instance once: an instance that has already ended is returned at once, and an
end that commits after the LISTEN is announced to it. A notification naming the
instance is a hint to read it again, never the answer; so is the listening connection's
end (it LISTENs anew before it reads), and so is every ``RECHECK_SECONDS``, so a
notification lost with a connection cut without an error costs a waiter at most that.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import timedelta

import psycopg
from psycopg import sql

from engine.model.errors import InputRefused, WaylineError
from engine.model.instance import Instance
from engine.model.limits import MAX_WAIT_TIMEOUT
from engine.store.errors import StoreError, StoreUnavailable
from engine.store.store import Store

RECHECK_SECONDS = 5.0
"""How long a waiter trusts its LISTEN before it reads the instance again anyway: the
bound on how late a lost notification lets it learn of an end."""


class WaitTimedOut(WaylineError):
    """The instance had not ended when the wait's timeout passed (it still runs)."""


class EndListener:
    """One connection LISTENing on a store's end channel while any waiter waits: one of
    the store's pooled connections (already open: a wait costs no connect), given back
    to the pool, after an UNLISTEN, when the last waiter leaves; a connection of its own
    when the pool has only one, which the waiters' reads need.

    Each waiter holds a hint (``watch``) that a notification naming its instance sets,
    and so does the connection's end (broken or closed): every waiter then reads again
    after ``listening`` has LISTENed anew, so no end committed meanwhile is missed.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self._channel = sql.Identifier(store.ended_channel)
        self._hints: dict[str, set[asyncio.Event]] = {}
        self._task: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[None] | None = None

    @property
    def open(self) -> bool:
        """Whether the listening connection is open (or being opened)."""
        return self._task is not None and not self._task.done()

    @asynccontextmanager
    async def watch(self, instance_id: str) -> AsyncIterator[asyncio.Event]:
        """A hint set whenever ``instance_id`` may have ended; the connection is closed
        when the last watch leaves, however it leaves (an answer, a timeout, a cancel)."""
        hint = asyncio.Event()
        self._hints.setdefault(instance_id, set()).add(hint)
        try:
            yield hint
        finally:
            watching = self._hints[instance_id]
            watching.discard(hint)
            if not watching:
                del self._hints[instance_id]
            if not self._hints:
                await self._close()

    async def listening(self) -> None:
        """Return once the connection LISTENs, opening it when needed: every end that
        commits from now on sets the hints that name it. StoreUnavailable when it
        cannot be opened."""
        if not self.open or self._ready is None:
            self._ready = asyncio.get_running_loop().create_future()
            self._task = asyncio.create_task(self._listen(self._ready))
        await asyncio.shield(self._ready)  # a waiter's cancel must not fail the others

    async def _listen(self, ready: asyncio.Future[None]) -> None:
        conn, pooled = None, self._pooled()
        try:
            conn = await (self.store.borrow() if pooled else self.store.dedicated())
            await conn.set_autocommit(True)
            await conn.execute(sql.SQL("LISTEN {}").format(self._channel))
            ready.set_result(None)
            async for notice in conn.notifies():
                for hint in self._hints.get(notice.payload, ()):
                    hint.set()
        except (StoreError, psycopg.Error, OSError):
            if not ready.done():  # else the waiters read again and listen anew (below)
                ready.set_exception(StoreUnavailable("cannot listen for instance ends"))
                ready.exception()  # marked as seen: each waiter is told by its own await
        finally:
            for hints in self._hints.values():
                for hint in hints:
                    hint.set()
            if conn is not None:
                await self._give_back(conn, pooled)

    def _pooled(self) -> bool:
        """Whether to listen on one of the store's pooled connections (no connect per
        wait): only when the pool has another one for the waiters' own reads."""
        return self.store.pool.max_size > 1

    async def _give_back(self, conn: psycopg.AsyncConnection, pooled: bool) -> None:
        """Return a pooled connection to the pool listening to nothing (closed, for the
        pool to replace, when it cannot say so); close a connection of its own."""
        if not pooled:
            await conn.close()
            return
        try:
            await conn.execute(sql.SQL("UNLISTEN {}").format(self._channel))
        except (psycopg.Error, OSError):
            await conn.close()
        await self.store.give_back(conn)

    async def _close(self) -> None:
        task, ready, self._task, self._ready = self._task, self._ready, None, None
        if ready is not None and not ready.done():
            ready.cancel()
        if task is not None:
            task.cancel()
            await asyncio.wait([task])  # closed when this returns; a cancel still ends us


def check_timeout(timeout: timedelta) -> None:
    """Refuse a timeout that is not a duration more than 0 and at most MAX_WAIT_TIMEOUT."""
    if not isinstance(timeout, timedelta) or not timedelta(0) < timeout <= MAX_WAIT_TIMEOUT:
        shown = timeout if isinstance(timeout, timedelta) else type(timeout).__name__
        raise InputRefused(
            "the timeout must be a duration more than 0 and at most "
            f"MAX_WAIT_TIMEOUT ({MAX_WAIT_TIMEOUT}), not {shown}"
        )


async def until_ended(
    ends: EndListener,
    read: Callable[[str], Awaitable[Instance]],
    instance_id: str,
    timeout: timedelta,
) -> Instance:
    """``read(instance_id)`` once its status is terminal; WaitTimedOut after ``timeout``."""
    state: Instance | None = None
    limit = asyncio.timeout(timeout.total_seconds())
    try:
        async with limit, ends.watch(instance_id) as hint:
            while True:
                await ends.listening()
                hint.clear()  # set from here on by any end, so none falls in between
                state = await read(instance_id)
                if state.status.terminal:
                    return state
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(hint.wait(), RECHECK_SECONDS)
    except TimeoutError:
        if not limit.expired():
            raise
        now = f": it is {state.status.label}" if state is not None else ""
        raise WaitTimedOut(
            f"instance {instance_id} did not end within {timeout.total_seconds():g} s{now}"
        ) from None
