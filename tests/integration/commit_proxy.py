"""A TCP proxy in front of PostgreSQL that loses a COMMIT on purpose.

An unknown commit outcome (the COMMIT was sent, no answer came) cannot be provoked
from inside a client: the reply has to go missing on the wire. This proxy forwards
bytes between clients and the server and reads the client's messages just far enough
to recognise a COMMIT, whether sent as a simple query ('Q') or through the extended
protocol (Parse/Bind/Execute), or a transition written in autocommit (the statement that
inserts into ``transitions`` sent while no transaction is open: it commits as it ends).
Armed once, it acts on the next COMMIT of any connection:

- ``Cut.AFTER_COMMIT``: the COMMIT reaches the server, which commits; the reply is
  swallowed and the client connection is severed (committed, unknown to the client);
- ``Cut.BEFORE_COMMIT``: both sides are severed and the COMMIT is never forwarded, so
  the server aborts the transaction (not committed, unknown to the client).

Afterwards new connections pass through normally (the store settles the outcome on a
new pooled connection), unless the cut was armed with ``outage=True``: then every
connection is severed and new ones are closed at once until ``restore()``, as when the
database is unreachable. Clients must connect with ``sslmode=disable`` and
``gssencmode=disable`` (see ``conninfo``) so the stream is plaintext protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import struct
from collections.abc import AsyncIterator

from psycopg.conninfo import conninfo_to_dict, make_conninfo

from verification import wire

log = logging.getLogger(__name__)

NEGOTIATION_CODES = frozenset({80877103, 80877104})
"""SSLRequest and GSSENCRequest: untyped packets after which the startup packet follows."""

SIMPLE_QUERY, PARSE, BIND, EXECUTE, SYNC = b"Q", b"P", b"B", b"E", b"S"
CLIENT_GONE = (OSError, asyncio.IncompleteReadError)


class Cut(enum.Enum):
    AFTER_COMMIT = "after"
    BEFORE_COMMIT = "before"


class _Pipe:
    """One client connection and its server connection, pumped in both directions."""

    def __init__(
        self,
        proxy: CommitProxy,
        client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
        server: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    ) -> None:
        self.proxy = proxy
        self.client_reader, self.client_writer = client
        self.server_reader, self.server_writer = server
        self.tracker = wire.CommitTracker()
        self.muted = False
        """The client will never hear from the server again (a swallowed COMMIT reply)."""
        self.idle = False
        """The server's last ReadyForQuery said no transaction is open (autocommit)."""

    async def run(self) -> None:
        upstream = asyncio.create_task(self._server_to_client())
        try:
            await self._client_to_server()
        except CLIENT_GONE:
            pass
        finally:
            if not self.muted:
                self.server_writer.close()
            self.client_writer.close()
            with contextlib.suppress(*CLIENT_GONE):
                await upstream

    def sever(self) -> None:
        """Cut both sides now, whatever is in flight."""
        self.client_writer.close()
        self.server_writer.close()

    async def _client_to_server(self) -> None:
        await self._forward_startup()
        cut_at_sync = False
        while True:
            header = await self.client_reader.readexactly(5)
            body = await self.client_reader.readexactly(struct.unpack("!I", header[1:])[0] - 4)
            kind = header[:1]
            cut = self.proxy._claim(self, kind) if self._executes_commit(kind, body) else None
            if cut is Cut.BEFORE_COMMIT:
                self.sever()
                return
            if cut is Cut.AFTER_COMMIT:
                self.muted = True  # before forwarding, so no byte of the reply gets through
                cut_at_sync = kind != SIMPLE_QUERY
            self.server_writer.write(header + body)
            await self.server_writer.drain()
            if self.muted and (not cut_at_sync or kind == SYNC):
                self.client_writer.close()
                return

    async def _forward_startup(self) -> None:
        """Forward the untyped packets: any negotiation requests, then the startup packet."""
        while True:
            length = await self.client_reader.readexactly(4)
            body = await self.client_reader.readexactly(struct.unpack("!I", length)[0] - 4)
            self.server_writer.write(length + body)
            await self.server_writer.drain()
            if struct.unpack("!I", body[:4])[0] not in NEGOTIATION_CODES:
                return

    def _executes_commit(self, kind: bytes, body: bytes) -> bool:
        """True when this message runs a COMMIT, or a transition write in autocommit."""
        self.tracker.idle = self.idle
        return self.tracker.executes_commit(wire.Message(kind, body))

    async def _server_to_client(self) -> None:
        unparsed = b""
        while data := await self.server_reader.read(65536):
            messages, unparsed = wire.split_messages(unparsed + data)
            if not self.muted:
                for message in messages:
                    if message.kind == wire.READY_FOR_QUERY:
                        self.idle = wire.ends_transaction(message)
                self.client_writer.write(data)
                await self.client_writer.drain()
                continue
            if any(message.kind == wire.READY_FOR_QUERY for message in messages):
                log.info("the server answered the swallowed COMMIT")
                self.proxy.commit_answered.set()
                break
        self.server_writer.close()
        if not self.muted:
            self.client_writer.close()


class CommitProxy:
    """Listens on 127.0.0.1 and forwards to the server of ``dsn``; start with ``running``."""

    def __init__(self, dsn: str) -> None:
        params = conninfo_to_dict(dsn)
        self.dsn = dsn
        self.upstream_host = str(params.get("host") or "localhost")
        self.upstream_port = int(params.get("port") or 5432)
        self.port = 0
        self.refusing = False
        self.intercepted: list[str] = []
        """The message type ('Q' or 'E') of each COMMIT the proxy acted on."""
        self.commit_answered = asyncio.Event()
        """Set when the server has answered a COMMIT forwarded by an AFTER_COMMIT cut."""
        self._armed: Cut | None = None
        self._outage = False
        self._pipes: set[_Pipe] = set()
        self._handlers: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server | None = None

    @classmethod
    @contextlib.asynccontextmanager
    async def running(cls, dsn: str) -> AsyncIterator[CommitProxy]:
        proxy = cls(dsn)
        proxy._server = await asyncio.start_server(proxy._serve, "127.0.0.1", 0)
        proxy.port = proxy._server.sockets[0].getsockname()[1]
        try:
            yield proxy
        finally:
            await proxy._close()

    def conninfo(self) -> str:
        """``dsn`` pointed at the proxy, plaintext so the proxy can read the protocol."""
        return make_conninfo(
            self.dsn, host="127.0.0.1", port=str(self.port), sslmode="disable", gssencmode="disable"
        )

    def arm(self, cut: Cut, *, outage: bool = False) -> None:
        """Act on the next COMMIT; ``outage``: then refuse every connection until restore."""
        self._armed, self._outage = cut, outage

    def restore(self) -> None:
        """End an outage: new connections pass through again."""
        self.refusing = False

    def _claim(self, pipe: _Pipe, kind: bytes) -> Cut | None:
        """Called by ``pipe`` before it forwards a COMMIT: the armed cut, at most once.

        In an outage every other connection is severed too, so the settlement cannot
        borrow an idle pooled connection that was opened before the cut.
        """
        cut, self._armed = self._armed, None
        if cut is None:
            return None
        self.intercepted.append(kind.decode())
        log.info("cutting %s a COMMIT sent as a %r message", cut.value, kind.decode())
        if self._outage:
            self.refusing = True
            for other in self._pipes - {pipe}:
                other.sever()
        return cut

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.refusing:
            writer.close()
            return
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            server = await self._connect_upstream()
        except OSError:
            writer.close()
            self._handlers.discard(task)
            return
        if self.refusing:  # the outage began while this one was connecting upstream
            writer.close()
            server[1].close()
            self._handlers.discard(task)
            return
        pipe = _Pipe(self, (reader, writer), server)
        self._pipes.add(pipe)
        try:
            await pipe.run()
        finally:
            self._pipes.discard(pipe)
            self._handlers.discard(task)

    async def _connect_upstream(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self.upstream_host.startswith("/"):
            path = f"{self.upstream_host}/.s.PGSQL.{self.upstream_port}"
            return await asyncio.open_unix_connection(path)
        return await asyncio.open_connection(self.upstream_host, self.upstream_port)

    async def _close(self) -> None:
        assert self._server is not None
        self._server.close()
        for pipe in list(self._pipes):
            pipe.sever()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        await self._server.wait_closed()
