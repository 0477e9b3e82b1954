"""An asyncio TCP proxy between drill processes and PostgreSQL that breaks things on purpose.

An unknown COMMIT outcome cannot be provoked from inside a client: the answer has to go
missing on the wire. The proxy forwards bytes both ways and reads the protocol just far
enough (see ``verification.wire``) to act around a COMMIT. Armed once (by the harness,
or by a worker's ``sever_*`` fault through the control channel), it acts on the next
COMMIT of a writing transaction that passes through:

A transition written by one statement in autocommit commits as that statement ends;
its Execute counts as the COMMIT (its verdict: the ReadyForQuery after it, or an error).

- ``sever_after_commit``: the COMMIT reaches the server, the answer is swallowed and the
  client is cut off (committed, unknown to the client). The proxy keeps reading the
  server's answer, so the drill learns the truth the client could not.
- ``sever_before_commit``: the COMMIT is never forwarded and both sides are cut (the
  server rolls back; not committed, unknown to the client).

It can also hold back the answer to every transition's COMMIT until a lease renewal
has been answered after it (``hold_for_renewal``): a renewal of the lease that commit
completed is then answered first, every time, not only when the timing happens to fall
that way. Independently of COMMITs it can *blackhole* (stop forwarding in both
directions and keep the sockets open, as a dead network does), *delay* every client
message, and sever every connection at once. Each cut COMMIT is recorded as an
AmbiguousCommit, the Jepsen ``:info`` operation, with the server's verdict once it is
known. A cut armed with ``outage=True`` also severs every other connection and refuses
new ones until ``restore()``, as when the database is unreachable: the client cannot
settle the outcome on another connection either.

Clients must connect with ``sslmode=disable gssencmode=disable`` (``conninfo`` does
that); the proxy also answers negotiation requests with "no" itself.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum

from psycopg.conninfo import conninfo_to_dict, make_conninfo

from verification import wire

GONE = (OSError, asyncio.IncompleteReadError, ConnectionError)
RENEWAL_WAIT_SECONDS = 5.0
"""The longest a held COMMIT answer waits for a renewal: far past a drill worker's
renewal period, so it ends only a hold no renewal will ever end."""
RENEWAL_GAP_SECONDS = 0.2
"""How long a held answer still waits once the renewal's answer is on its way: time for
the client to read that one first, even on a loaded machine."""
_ENDED = object()
"""What a series of cuts yields once it has run out."""


class Cut(StrEnum):
    SEVER_BEFORE_COMMIT = "sever_before_commit"
    SEVER_AFTER_COMMIT = "sever_after_commit"


class Truth(StrEnum):
    """What the server did with a COMMIT whose answer the client never got."""

    COMMITTED = "committed"
    ABORTED = "aborted"
    UNKNOWN = "unknown"


@dataclass
class AmbiguousCommit:
    """One COMMIT the client saw fail without an answer (Jepsen ``:info``)."""

    cut: Cut
    backend_pid: int
    sent_as: str
    """The message that carried the COMMIT: ``Q`` (a simple query) or ``E`` (an Execute)."""
    truth: Truth = Truth.UNKNOWN


class _Link:
    """One client connection and its server connection, pumped both ways."""

    def __init__(
        self,
        proxy: DrillProxy,
        client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
        server: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    ) -> None:
        self.proxy = proxy
        self.client_reader, self.client_writer = client
        self.server_reader, self.server_writer = server
        self.tracker = wire.CommitTracker()
        self.backend_pid = 0
        self.pending: AmbiguousCommit | None = None
        """The cut-after COMMIT whose answer is still to be read from the server."""
        self.pending_alone = False
        """That COMMIT is a statement in autocommit: it committed if it did not fail."""
        self.hold_answer = False
        """The next answer is a transition's COMMIT's: it waits for a renewal's."""
        self.renewing = False
        """A lease renewal runs: its transaction's end (commit, or rollback when stale)
        is a renewal answered."""

    async def run(self) -> None:
        downstream = asyncio.create_task(self._server_to_client())
        try:
            await self._client_to_server()
        except GONE:
            pass
        finally:
            self.client_writer.close()
            if self.pending is None:
                self.server_writer.close()
            with contextlib.suppress(*GONE):
                await downstream

    def sever(self) -> None:
        """Cut both sides now, whatever is in flight."""
        self.client_writer.close()
        self.server_writer.close()

    async def _client_to_server(self) -> None:
        if not await self._startup():
            return
        cut_at_sync = False
        while True:
            message = await wire.read_message(self.client_reader)
            await self.proxy.gate()
            cut = None
            commits = self.tracker.executes_commit(message)
            self.renewing = self.renewing or "renewal" in self.tracker.kinds
            if commits:
                cut = self.proxy.claim_cut(self.tracker.kinds, self)
                self.hold_answer = self.proxy.delays_answer(self.tracker.kinds)
                self.tracker.committed()
            if cut is not None:
                cutting = AmbiguousCommit(cut, self.backend_pid, message.kind.decode())
                self.proxy.record(cutting)
            if cut is Cut.SEVER_BEFORE_COMMIT:
                self.proxy.judge(cutting, Truth.ABORTED)
                self.sever()
                return
            if cut is Cut.SEVER_AFTER_COMMIT:
                self.pending = cutting
                self.pending_alone = self.tracker.alone
                cut_at_sync = message.kind != wire.SIMPLE_QUERY
            await self._send(self.server_writer, message.raw)
            if self.pending is not None and (not cut_at_sync or message.kind == wire.SYNC):
                self.client_writer.close()
                return

    async def _startup(self) -> bool:
        """Refuse SSL/GSS negotiation, forward the startup packet; False for a cancel."""
        while True:
            code, packet = await wire.read_startup_packet(self.client_reader)
            if code in wire.NEGOTIATION_CODES:
                self.client_writer.write(b"N")
                await self.client_writer.drain()
                continue
            await self._send(self.server_writer, packet)
            return code != wire.CANCEL_REQUEST

    async def _server_to_client(self) -> None:
        buffer = b""
        try:
            while data := await self.server_reader.read(65536):
                messages, buffer = wire.split_messages(buffer + data)
                if await self._relay(messages):
                    break
        except GONE:
            pass
        finally:  # a cut COMMIT the server never answered stays Truth.UNKNOWN
            self.server_writer.close()
            self.client_writer.close()

    async def _relay(self, messages: list[wire.Message]) -> bool:
        """Forward (or, after a cut, judge) server messages; True when done."""
        for message in messages:
            if message.kind == wire.BACKEND_KEY:
                self.backend_pid = wire.backend_pid(message)
            if wire.ends_transaction(message):  # e.g. a statement run in autocommit
                if self.renewing:
                    self.renewing = False
                    self.proxy.renewal_answered()
                self.tracker.committed()
            elif wire.opens_transaction(message):
                self.tracker.idle = False
            if self.pending is None:
                await self.proxy.wait_open()
                if self.hold_answer:
                    self.hold_answer = False
                    await self.proxy.after_a_renewal()
                await self._send(self.client_writer, message.raw)
            elif self.pending_alone and message.kind == wire.READY_FOR_QUERY:
                self.proxy.judge(self.pending, Truth.COMMITTED)  # no error came before it
                return True
            elif message.kind == wire.COMMAND_COMPLETE and not self.pending_alone:
                committed = wire.command_tag(message) == "COMMIT"
                self.proxy.judge(self.pending, Truth.COMMITTED if committed else Truth.ABORTED)
                return True
            elif message.kind == wire.ERROR_RESPONSE:
                self.proxy.judge(self.pending, Truth.ABORTED)
                return True
        return False

    @staticmethod
    async def _send(writer: asyncio.StreamWriter, data: bytes) -> None:
        writer.write(data)
        await writer.drain()


class DrillProxy:
    """Listens on 127.0.0.1 and forwards to the server of ``dsn``. Use ``async with``."""

    def __init__(self, dsn: str) -> None:
        params = conninfo_to_dict(dsn)
        self.dsn = dsn
        self.upstream_host = str(params.get("host") or "localhost")
        self.upstream_port = int(params.get("port") or 5432)
        self.port = 0
        self.control_port = 0
        self.delay_seconds = 0.0
        self.hold_for_renewal = False
        """Hold back the answer to each transition's COMMIT until the server has answered
        a lease renewal after it (at most ``renewal_wait`` seconds), then
        ``RENEWAL_GAP_SECONDS`` more: the server has committed, the client does not know
        yet, and it reads the renewal's answer first."""
        self.renewal_wait = RENEWAL_WAIT_SECONDS
        self.held = 0
        """Answers held for a renewal so far."""
        self.renewed = 0
        """Of those, the ones a renewal released (the others waited ``renewal_wait``)."""
        self._renewal = asyncio.Event()
        """Set by the next renewal answered (then replaced by a fresh event)."""
        self._holding = asyncio.Event()
        """Set once an answer has been held for a renewal (``first_hold``)."""
        self.ambiguous: list[AmbiguousCommit] = []
        self.connections = 0
        self._armed: Cut | None = None
        self._armed_kind = "write"
        self._outage = False
        self._series: Iterator[Cut | None] | None = None
        self.refusing = False
        """In an outage: every new connection is closed at once until ``restore()``."""
        self._verdict = asyncio.Event()
        """Set each time a cut COMMIT gets the server's verdict (``settled`` waits on it)."""
        self.target_kind = "transition"
        """The kind of transaction a cut armed through the control channel waits for."""
        self._open = asyncio.Event()
        self._open.set()
        self._links: set[_Link] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._servers: list[asyncio.Server] = []

    async def __aenter__(self) -> DrillProxy:
        data = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        control = await asyncio.start_server(self._control, "127.0.0.1", 0)
        self._servers = [data, control]
        self.port = data.sockets[0].getsockname()[1]
        self.control_port = control.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._open.set()
        for server in self._servers:
            server.close()
        self.sever_all()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for server in self._servers:
            await server.wait_closed()

    def conninfo(self) -> str:
        """``dsn`` pointed at the proxy, in plaintext so the proxy can read the protocol."""
        return make_conninfo(
            self.dsn, host="127.0.0.1", port=str(self.port), sslmode="disable", gssencmode="disable"
        )

    @property
    def control_address(self) -> str:
        """``host:port`` for WAYLINE_FAULT_SEVER: a worker's ``sever_*`` fault arms us here."""
        return f"127.0.0.1:{self.control_port}"

    def arm(self, cut: Cut, kind: str | None = None, *, outage: bool = False) -> None:
        """Act on the next COMMIT of a transaction of ``kind`` (once); with ``outage``,
        then sever every other connection and refuse new ones until ``restore()``.

        ``kind`` defaults to ``target_kind``: a drill sets it to the kind of transaction
        its fault is about (``transition``, ``renewal``, ``sweep``; ``write`` for any
        that wrote). Read-only transactions commit too (a pooled connection commits on
        return), and a worker's background sweeps commit every fraction of a second;
        losing their answer is not what the drill asked for.
        """
        self._armed = cut
        self._armed_kind = kind or self.target_kind
        self._outage = outage
        self._series = None

    def arm_series(self, cuts: Iterable[Cut | None], kind: str) -> None:
        """Act on each next COMMIT of a transaction of ``kind`` by the next of ``cuts``
        (None lets that one through), until ``cuts`` runs out: a client that retries
        what it lost makes progress one write at a time, and every write loses an answer."""
        self._armed, self._armed_kind, self._outage = None, kind, False
        self._series = iter(cuts)

    def restore(self) -> None:
        """End an outage: new connections pass through again."""
        self.refusing = False

    def claim_cut(self, kinds: set[str], link: _Link) -> Cut | None:
        """The armed cut, if this COMMIT's transaction is of the armed kind (at most once).

        In an outage every other link is severed too, so the client cannot settle the
        outcome on an idle pooled connection opened before the cut.
        """
        if self._armed_kind not in kinds:
            return None
        if self._series is not None:
            cut = next(self._series, _ENDED)
            if cut is _ENDED:
                self._series = cut = None
        else:
            cut, self._armed = self._armed, None
        if cut is None:
            return None
        if self._outage:
            self.refusing = True
            for other in self._links - {link}:
                other.sever()
        return cut

    def delays_answer(self, kinds: set[str]) -> bool:
        """Whether the answer to a COMMIT of a transaction of ``kinds`` is held back (a
        renewal's never: it fences its lease as a transition does, and is what a held
        answer waits for)."""
        return self.hold_for_renewal and "transition" in kinds and "renewal" not in kinds

    def renewal_answered(self) -> None:
        """The server answered a lease renewal: wake the answers held for one."""
        self._renewal.set()
        self._renewal = asyncio.Event()

    async def after_a_renewal(self) -> None:
        """Return once the server has answered a renewal after now, and the client has
        had ``RENEWAL_GAP_SECONDS`` to read that answer (or ``renewal_wait`` passed)."""
        self.held += 1
        self._holding.set()
        try:
            await asyncio.wait_for(self._renewal.wait(), self.renewal_wait)
            self.renewed += 1
        except TimeoutError:
            pass  # counted: the drill learns its race did not happen
        await asyncio.sleep(RENEWAL_GAP_SECONDS)

    async def first_hold(self) -> None:
        """Return once an answer is (or was) held for a renewal."""
        await self._holding.wait()

    def record(self, commit: AmbiguousCommit) -> AmbiguousCommit:
        self.ambiguous.append(commit)
        return commit

    @property
    def intercepted(self) -> list[str]:
        """The message that carried each cut COMMIT, in order (``Q`` or ``E``)."""
        return [commit.sent_as for commit in self.ambiguous]

    def judge(self, commit: AmbiguousCommit, truth: Truth) -> None:
        """Record the server's verdict on a cut COMMIT and wake ``settled``."""
        commit.truth = truth
        self._verdict.set()

    def blackhole(self, on: bool) -> None:
        """Stop (or resume) forwarding in both directions; sockets stay open."""
        if on:
            self._open.clear()
        else:
            self._open.set()

    async def wait_open(self) -> None:
        """Wait while blackholed."""
        await self._open.wait()

    async def gate(self) -> None:
        """Wait while blackholed, then apply the configured delay (client messages)."""
        await self._open.wait()
        if self.delay_seconds:
            await asyncio.sleep(self.delay_seconds)

    def sever_all(self) -> None:
        """Cut every connection through the proxy now (new ones still pass)."""
        for link in list(self._links):
            link.sever()

    async def settled(self, timeout: float) -> bool:
        """Wait until every cut-after COMMIT has the server's verdict (or ``timeout``)."""
        try:
            async with asyncio.timeout(timeout):
                while any(c.truth is Truth.UNKNOWN for c in self.ambiguous):
                    self._verdict.clear()
                    await self._verdict.wait()
        except TimeoutError:
            return False
        return True

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.refusing:
            writer.close()
            return
        self._track(asyncio.current_task())
        try:
            server = await self._connect_upstream()
        except OSError:
            writer.close()
            return
        if self.refusing:  # the outage began while this one was connecting upstream
            writer.close()
            server[1].close()
            return
        self.connections += 1
        link = _Link(self, (reader, writer), server)
        self._links.add(link)
        try:
            await link.run()
        finally:
            self._links.discard(link)

    async def _control(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One command per connection: a Cut name; answers ``ok`` once armed."""
        self._track(asyncio.current_task())
        try:
            line = (await reader.readline()).decode().strip()
            self.arm(Cut(line))  # the kind the drill set as target_kind
            writer.write(b"ok\n")
            await writer.drain()
        except (ValueError, *GONE):
            pass
        finally:
            writer.close()

    def _track(self, task: asyncio.Task[None] | None) -> None:
        if task is not None:
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _connect_upstream(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self.upstream_host.startswith("/"):
            path = f"{self.upstream_host}/.s.PGSQL.{self.upstream_port}"
            return await asyncio.open_unix_connection(path)
        return await asyncio.open_connection(self.upstream_host, self.upstream_port)
