"""The PostgreSQL store: a connection pool on one schema, and the operations on it.

``Store.open`` refuses a schema that is behind the migrations. Every connection's
``search_path`` is the store's schema, so SQL is written unqualified and a test or a
drill can run the same engine in an isolated schema.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus
from psycopg_pool import AsyncConnectionPool

from engine.model.transitions import Transition, check_transition
from engine.store import batches, channels, commits, seams, sessions, snapshots, transactions
from engine.store.clock import Clock, DatabaseClock
from engine.store.commits import CommitResult, FinishedLease
from engine.store.errors import CannotConnect, Reconciliation, StoreError, StoreUnavailable
from engine.store.migrations import (
    check_conninfo,
    check_schema_current_async,
    validate_schema_name,
)
from engine.store.statements import sessions as session_sql
from engine.store.transactions import OPERATION_TIMEOUT_SECONDS

CONNECT_TIMEOUT_SECONDS = 10.0
"""How long an operation waits for a pooled connection before it reports the store
unavailable (nothing was written)."""

DEFAULT_POOL_SIZE = 10
CONNECT_TIMEOUT = 10
"""Seconds libpq may spend establishing one connection."""
RECONNECT_SECONDS = 5.0
"""How long the pool's attempt to replace a lost connection keeps retrying. It retries
with a doubling delay, so an attempt begun in a long outage would next try only as long
after the database came back; a short attempt gives up instead, and the next operation
that needs a connection begins a new one at once: a database back after a restart of any
length is used again within seconds."""
CLOCK_RESYNC_SECONDS = 60.0
"""How old a store's clock sync may get before its next reading starts another in the
background (a worker also syncs with every heartbeat): a server clock stepped since,
or drifting from this machine's, is followed within this bound."""
CLOCK_READINGS = 3
"""Round trips of one clock sync (at open, and with each worker heartbeat)."""


@dataclass(frozen=True)
class Deadlines:
    """A store's client-side deadlines (the defaults above); a drill that pauses the
    server opens a store with short ones, to see every wait end without waiting long."""

    operation: float = OPERATION_TIMEOUT_SECONDS
    pool_wait: float = CONNECT_TIMEOUT_SECONDS
    connect: int = CONNECT_TIMEOUT
    clock_resync: float = CLOCK_RESYNC_SECONDS


DEADLINES = Deadlines()

IDLE_IN_TRANSACTION_TIMEOUT_MS = 5_000
"""A session idle inside a transaction this long is ended by the server: a worker that
is stopped mid-transaction must not keep work rows locked (claims skip locked rows),
and engine transactions never wait on anything but the database. A session whose
statement waited for a row another stopped session locked goes idle only once that one
ended, so a stopped worker's locks may last one limit per session in such a chain."""


def session_options(schema: str, read_only: bool = False) -> str:
    """Settings of every engine session: its schema, the idle-transaction limit, and no
    JIT compilation; a read-only store's sessions refuse every write (``Store.open``).

    JIT is for long analytic queries: PostgreSQL compiles a statement whose estimated
    cost passes ``jit_above_cost`` on every execution, which costs 30 to 60 ms for the
    claim statement, against its 0.2 to 0.6 ms of execution. With 10^7 history rows of
    ended instances the 16-item claim's estimate passed the default threshold and the
    claim went from 0.6 to 33 ms on the server (``bench/run --history-scale``, issue 25).
    A session option outranks a role's or a database's setting."""
    options = (
        f"-c search_path={schema} "
        f"-c idle_in_transaction_session_timeout={IDLE_IN_TRANSACTION_TIMEOUT_MS} "
        "-c jit=off"
    )
    return options + " -c default_transaction_read_only=on" if read_only else options


Staged = tuple[list[CommitResult], str]
"""A commit's results, and the id of the transaction that wrote them."""
Stage = Callable[[psycopg.AsyncConnection], Awaitable[Staged]]
"""Writes a commit's transitions in the transaction it is given (never commits it)."""
Settle = Callable[[Staged | None], Awaitable[Staged]]
"""How a commit whose outcome is unknown is settled (see ``transactions.run``)."""


class Store:
    """Durable operations on one schema. Create with ``await Store.open(...)``."""

    def __init__(
        self,
        pool: AsyncConnectionPool,
        schema: str,
        clock: Clock,
        conninfo: str = "",
        given: seams.Seams = seams.NO_SEAMS,
        deadlines: Deadlines = DEADLINES,
    ) -> None:
        self.pool = pool
        self.deadlines = deadlines
        self.conninfo = conninfo
        self.schema = schema
        self.clock = clock
        self.seams = given
        self.channel = channels.work_channel(schema)
        """Where new work is announced (``engine.store.channels``)."""
        self.ended_channel = channels.ended_channel(schema)
        """Where a transition that ends an instance announces it (``engine.store.channels``)."""
        self._checking: asyncio.Future[None] | None = None
        self.clock_sync: asyncio.Future[None] | None = None
        """The clock sync running in the background, if any (``now``)."""
        self._clock_due = (
            time.monotonic() + deadlines.clock_resync
            if isinstance(clock, DatabaseClock)
            else math.inf  # a manual clock moves only when told to
        )

    @classmethod
    async def open(
        cls,
        conninfo: str,
        schema: str = "wayline",
        *,
        clock: Clock | None = None,
        max_size: int = DEFAULT_POOL_SIZE,
        statement_filter: seams.StatementFilter | None = None,
        hooks: seams.StoreHooks | None = None,
        deadlines: Deadlines = DEADLINES,
        read_only: bool = False,
    ) -> Store:
        """Open a pool on ``schema``; SchemaBehindError when migrations are missing.

        ``statement_filter`` and ``hooks`` are the store's seams (``engine.store.seams``):
        how a drill harness changes or watches the store without patching it.
        ``read_only``: every session refuses writes, as a console reading a replica
        wants even when its address names a primary by mistake."""
        validate_schema_name(schema)
        await _probe(conninfo, deadlines.connect)
        given = seams.Seams(statement_filter, hooks)
        pool = AsyncConnectionPool(
            conninfo,
            connection_class=seams.SeamedConnection,
            min_size=1,
            max_size=max_size,
            open=False,
            kwargs={
                "options": session_options(schema, read_only),
                "connect_timeout": deadlines.connect,
                "seams": given,
            },
            timeout=deadlines.pool_wait,
            reconnect_timeout=RECONNECT_SECONDS,
            configure=sessions.remember,
        )
        try:
            await pool.open(wait=True, timeout=deadlines.pool_wait)
        except BaseException as exc:  # cancelled too: psycopg_pool's workers swallow a
            # cancellation that meets them connecting, and would wait forever, keeping
            # asyncio.run from returning, were the pool not closed
            await pool.close()
            if isinstance(exc, Exception):
                raise CannotConnect from exc
            raise
        store = cls(pool, schema, clock or DatabaseClock(), conninfo, given, deadlines)
        try:
            async with store.connection() as conn:
                await check_schema_current_async(conn, schema)
                await store._measure_clock(conn)
        except BaseException:
            await pool.close()
            raise
        return store

    async def _measure_clock(self, conn: psycopg.AsyncConnection) -> None:
        """Sync the clock to the quickest of ``CLOCK_READINGS`` round trips: the first
        statement on a fresh connection is often slow, and the error is its length."""
        if isinstance(self.clock, DatabaseClock):
            self._clock_due = time.monotonic() + self.deadlines.clock_resync
            readings = []
            for _ in range(CLOCK_READINGS):
                before = time.monotonic()
                server = (await (await conn.execute(session_sql.SERVER_TIME)).fetchone())[0]
                answered = time.monotonic()
                readings.append((answered - before, answered, server))
            _, answered, server = min(readings, key=lambda reading: reading[0])
            self.clock.sync(server, answered)

    async def sync_clock(self) -> None:
        """Re-read the server's time (the worker does this with every heartbeat)."""
        async with self.connection() as conn:
            await self._measure_clock(conn)

    def now(self) -> datetime:
        """The store's clock as a value, for event times built by the pure core; a sync
        older than ``Deadlines.clock_resync`` is renewed in the background."""
        if time.monotonic() > self._clock_due:
            self._resync_clock()
        return self.clock.now()

    def _resync_clock(self) -> None:
        """Start a clock sync in the background (``now`` cannot wait for one); a failed
        one keeps the old estimate and is tried again a ``clock_resync`` later."""
        self._clock_due = time.monotonic() + self.deadlines.clock_resync
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no event loop here: the next reading in one syncs
            self._clock_due = 0.0
            return
        if self.clock_sync is None or self.clock_sync.done():
            self.clock_sync = asyncio.ensure_future(self._sync_quietly())

    async def _sync_quietly(self) -> None:
        with contextlib.suppress(StoreError, psycopg.Error, OSError, TimeoutError):
            await self.sync_clock()

    async def close(self) -> None:
        for background in (self._checking, self.clock_sync):
            if background is not None:
                background.cancel()
                await asyncio.gather(background, return_exceptions=True)
        await self.pool.close()

    def _check_pool(self) -> None:
        """A connection broke: the server restarted, or (with a multi-host conninfo) a
        standby took over. Every idle connection in the pool is then likely dead too, so
        they are all checked now, in the background, and the dead replaced by new ones
        (to whichever server accepts writes), instead of each failing one operation.
        Checking only then keeps the round trip a ``check`` on every checkout costs."""
        if self._checking is None or self._checking.done():
            self._checking = asyncio.ensure_future(self.pool.check())

    async def borrow(self) -> psycopg.AsyncConnection:
        """A pooled connection for a write that classifies its own errors
        (``transactions.run``); always ``give_back``. Failing to get one is
        StoreUnavailable (nothing was written)."""
        try:
            return await _in_mode(await self.pool.getconn())
        except Exception as exc:
            raise StoreUnavailable("the database is unavailable; nothing was written") from exc

    async def give_back(self, conn: psycopg.AsyncConnection) -> None:
        """Return a borrowed connection (a broken one has the pool checked)."""
        if conn.broken:
            self._check_pool()
        await self.pool.putconn(conn)

    async def dedicated(self) -> psycopg.AsyncConnection:
        """A connection of its own in autocommit, outside the pool (a worker's owner
        lock and LISTEN), with the store's seams."""
        return await seams.SeamedConnection.connect(
            self.conninfo, seams=self.seams, autocommit=True
        )

    @asynccontextmanager
    async def connection(self, autocommit: bool = False) -> AsyncIterator[psycopg.AsyncConnection]:
        """A pooled connection (in ``autocommit`` or out of it); failing to get one is
        StoreUnavailable (nothing written)."""
        try:
            async with asyncio.timeout(self.deadlines.operation), self.pool.connection() as conn:
                try:
                    yield await _in_mode(conn, autocommit)
                finally:
                    if conn.broken:
                        self._check_pool()
        except psycopg.OperationalError as exc:
            raise StoreUnavailable("the database is unavailable") from exc
        except TimeoutError as exc:
            raise StoreUnavailable(
                f"the database did not answer within {self.deadlines.operation:g} s"
            ) from exc

    @asynccontextmanager
    async def settling(self) -> AsyncIterator[psycopg.AsyncConnection]:
        """A pooled connection found live, to settle a write whose answer was lost.

        An answer is mostly lost because a connection broke; when the server itself went
        away (a restart, a standby promoted) the pool's idle connections are dead too,
        and a settlement on one of them would leave the outcome unknown for nothing. So
        each is checked first (a round trip, and settlements are rare) and a dead one
        dropped, the pool checked (``_check_pool``), and the next tried, at most the
        pool's size and once more; then the pool's own error says the server is gone.
        """
        for _ in range(self.pool.max_size):
            async with self.pool.connection() as conn:
                try:
                    await self.pool.check_connection(conn)
                except psycopg.Error:
                    self._check_pool()
                    continue
                yield await _in_mode(conn)
                return
        async with self.pool.connection() as conn:
            yield await _in_mode(conn)

    @asynccontextmanager
    async def reading(self) -> AsyncIterator[psycopg.AsyncConnection]:
        """A pooled connection for reads only, in autocommit: a read costs its own round
        trips and no BEGIN or COMMIT (each statement reads its own snapshot). The next
        borrower that writes gets it out of autocommit again (``_in_mode``)."""
        async with self.connection(autocommit=True) as conn:
            yield conn

    async def read_ids(self, statement: str, ids: Sequence[str]) -> list[tuple[Any, ...]]:
        """The rows ``statement`` reads for ``ids`` (its ``%(ids)s`` parameter): the one
        shape of "these rows by id, those that exist". No ids, no round trip."""
        if not ids:
            return []
        async with self.reading() as conn:
            return await (await conn.execute(statement, {"ids": list(ids)})).fetchall()

    async def commit(self, transition: Transition, tenant: str = "") -> CommitResult:
        """Commit all of ``transition`` or nothing; see ``engine.store.commits``.

        ``tenant`` (a team id) is recorded when the transition starts an instance.
        """
        return (await self.commit_all([transition], tenant=tenant))[0]

    async def commit_all(
        self, transitions: Sequence[Transition], tenant: str = ""
    ) -> list[CommitResult]:
        """Commit several transitions in one PostgreSQL transaction; exact replays write
        nothing. A worker's commit under its lease is ``leases.commit``."""
        transitions = ready_to_write(transitions)

        async def stage(conn: psycopg.AsyncConnection) -> Staged:
            return await self.stage_all(conn, transitions, tenant)

        results, _ = await self.run_commit(transitions, stage, alone=one_statement(transitions))
        return results

    async def run_commit(
        self,
        transitions: Sequence[Transition],
        stage: Stage,
        *,
        alone: bool,
        always: bool = False,
        what: str = "",
        finished: Sequence[FinishedLease] = (),
    ) -> Staged:
        """One transaction that ``stage`` writes ``transitions`` in, on a pooled
        connection (``transactions.run`` classifies how it ended); what ``stage`` staged.

        ``alone``: the transitions are one statement, sent alone in autocommit (it is its
        own transaction, so the BEGIN and COMMIT round trips are saved); its lost answer
        is settled from the session that ran it, and the staging then has no transaction
        id (''). Otherwise a failed COMMIT is settled by the transaction's id, and a
        transaction that wrote nothing (exact replays) is rolled back unless ``always``
        (a lease's own writes must commit). ``transitions`` may be filled by ``stage``
        itself (``leases.commit_built``); ``what`` then names the commit. ``finished``:
        the leases the commit completes, which settle it when it wrote no transition.
        """
        names = what or ", ".join(t.transition_id for t in transitions) or "lease update"
        conn = await self.borrow()
        try:
            if alone:
                settle = self._settle_alone(conn, transitions[0])
                return await transactions.run(
                    conn, names, stage, alone=True, settle=settle, within=self.deadlines.operation
                )
            return await transactions.run(
                conn,
                names,
                stage,
                settle=self._settle_commit(transitions, finished),
                commit=lambda staged: always or not all(r.replayed for r in staged[0]),
                within=self.deadlines.operation,
            )
        finally:
            await self.give_back(conn)

    def _settle_alone(self, conn: psycopg.AsyncConnection, transition: Transition) -> Settle:
        """How a lone write whose answer was lost is settled: end the session that ran it
        and read the ledger (``commits.settle_session``); committed, it has no known
        transaction id ('')."""

        async def settle(_: Staged | None) -> Staged:
            session = sessions.of(conn)
            await seams.settle(
                self.seams.hooks,
                seams.Unanswered([transition], pid=session.pid if session else 0),
                lambda: commits.settle_session(
                    self.settling, [transition], session, self.deadlines.operation
                ),
            )
            return [CommitResult(transition.transition_id, replayed=False)], ""

        return settle

    def _settle_commit(
        self, transitions: Sequence[Transition], finished: Sequence[FinishedLease]
    ) -> Settle:
        """How a failed COMMIT of staged ``transitions`` is settled: by its transaction
        id, then the ledger (``commits.settle``)."""

        async def settle(staged: Staged | None) -> Staged:
            assert staged is not None  # a COMMIT follows a staging that answered
            results, xid = staged
            written = newly_written(transitions, results)
            await self.settle_commit(written, xid, finished)
            return staged

        return settle

    async def settle_commit(
        self, written: Sequence[Transition], xid: str, finished: Sequence[FinishedLease] = ()
    ) -> None:
        """Settle a COMMIT of ``written`` (completing the ``finished`` leases) whose answer
        was lost, by its transaction id and then the ledger, or by the leases' rows when
        it wrote no transition (``commits.settle``), through the store's ``settle`` hook."""
        await seams.settle(
            self.seams.hooks,
            seams.Unanswered(written, xid=xid),
            lambda: commits.settle(
                self.settling, list(written), xid, finished, self.deadlines.operation
            ),
        )

    async def stage_all(
        self,
        conn: psycopg.AsyncConnection,
        transitions: Sequence[Transition],
        tenant: str = "",
        xid: str = "",
    ) -> Staged:
        """Write the transitions in the caller's transaction (whose id ``xid`` is, when
        already known), which is not committed; their results and the transaction id."""
        results = []
        for transition in transitions:
            written, xid = await commits.stage(
                conn, transition, self.channel, tenant, ended=self.ended_channel
            )
            results.append(CommitResult(transition.transition_id, replayed=not written))
        return results, xid or await commits.current_xact_id(conn)

    async def stage_batch(
        self, conn: psycopg.AsyncConnection, transitions: Sequence[Transition]
    ) -> Staged | None:
        """Write the lone transitions of several commits (each ``one_statement`` on an
        existing instance) in one transaction opened here and left open, in one round
        trip (``batches``); ``leases.stage_set`` is the same for fenced commits.

        None when any of them was not written cleanly (an exact replay, a moved
        instance, ...): the caller rolls back and commits each on its own, where every
        such case has its answer. Otherwise the results and the transaction id.
        """
        writes = [commits.write_of(t, self.channel, self.ended_channel) for t in transitions]
        await conn.set_autocommit(True)  # the message opens the transaction itself
        answers = await batches.send(conn, [(w.statement, w.params) for w in writes])
        rows = [found[0] if found else None for found in answers]
        if not all(commits.written_cleanly(row) for row in rows):
            return None
        return [CommitResult(t.transition_id) for t in transitions], rows[0][0]

    async def stage(self, conn: psycopg.AsyncConnection, transition: Transition) -> bool:
        """Write ``transition`` inside the caller's transaction, never committing it.

        True when rows were written, False for an exact replay. The caller commits
        (then, if COMMIT fails, reconciles the transition id) or rolls back.
        An autocommit connection outside a transaction block is refused: each statement
        would commit on its own, and a failure half-way would leave a ledger row that
        reconciles as committed beside a partial transition.
        """
        (transition,) = ready_to_write([transition])
        if conn.autocommit and conn.info.transaction_status is TransactionStatus.IDLE:
            raise StoreError(
                f"transition {transition.transition_id} was not staged: "
                "stage() needs the caller's open transaction"
            )
        try:
            written, _ = await commits.stage(
                conn, transition, self.channel, ended=self.ended_channel
            )
        except psycopg.Error as exc:
            raise StoreError(f"transition {transition.transition_id} could not be staged") from exc
        return written

    async def reconcile(
        self, instance_id: str, transition_id: str, fingerprint: str
    ) -> Reconciliation:
        """Missing (safe to retry), committed, or conflicting (the id holds other content),
        for ``transition_id`` of ``instance_id`` (the ledger's key)."""
        async with self.connection() as conn:
            try:
                return await commits.reconcile_on(conn, instance_id, transition_id, fingerprint)
            except psycopg.Error as exc:
                raise StoreUnavailable("could not read the transition ledger") from exc


def ready_to_write(transitions: Sequence[Transition]) -> list[Transition]:
    """The transitions as the store writes them, made ready before any transaction.

    A transition that breaks a structural rule, whoever built it, refuses the write
    (TransitionInvalid) before anything is sent (``check_transition``): the database
    checks position, pin and identity, but not that replay could follow the events.
    One that carries a snapshot comes back as a copy with the snapshot encoded
    (``snapshots.prepared``); every other comes back as it was given."""
    ready = []
    for transition in transitions:
        check_transition(transition)
        ready.append(snapshots.prepared(transition))
    return ready


def one_statement(transitions: Sequence[Transition]) -> bool:
    """A lone transition written by one statement (``commits.one_statement``)."""
    return len(transitions) == 1 and commits.one_statement(transitions[0])


def newly_written(
    transitions: Sequence[Transition], results: Sequence[CommitResult]
) -> list[Transition]:
    """The transitions that wrote rows (not exact replays): what a COMMIT must settle."""
    return [t for t, r in zip(transitions, results, strict=True) if not r.replayed]


async def _probe(conninfo: str, connect_timeout: int) -> None:
    """Connect once, so an unreachable server fails at once instead of after the pool
    has retried for its whole timeout."""
    check_conninfo(conninfo)
    try:
        conn = await psycopg.AsyncConnection.connect(conninfo, connect_timeout=connect_timeout)
    except psycopg.Error as exc:
        raise CannotConnect from exc
    await conn.close()


async def _in_mode(
    conn: psycopg.AsyncConnection, autocommit: bool = False
) -> psycopg.AsyncConnection:
    """``conn`` in the mode its borrower asked for, as every pooled connection is handed
    out: out of autocommit (a lone write or a read may have left it in), so a write never
    commits statement by statement; in it for ``reading``.

    Done as it leaves the pool, not by the pool's ``reset`` as it comes back: with a
    reset, psycopg_pool returns every connection through a task of its own (a queue
    hand-off and a task switch per use); without one, inline. Setting the flag on an
    idle connection sends nothing; one that died while idle (a server restart) is left
    as it is: it cannot commit anything, and its first statement reports it broken."""
    if conn.autocommit != autocommit and conn.pgconn.transaction_status == TransactionStatus.IDLE:
        await conn.set_autocommit(autocommit)
    return conn
