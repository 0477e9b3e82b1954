"""Just enough of the PostgreSQL wire protocol (v3) for the drill proxy.

The proxy has to recognise a COMMIT in the client's stream and the server's answer to
it (a transition written by one statement in autocommit commits as that statement
ends: it counts as a COMMIT too), and to read the backend's process id; everything else
passes through as opaque bytes. Frontend messages after startup and all backend
messages are framed as one type byte plus a 4-byte big-endian length that counts
itself; the startup phase sends untyped packets (length first), possibly preceded by
SSL or GSS negotiation requests, which the proxy answers itself with "no" so the rest
of the stream stays plaintext.
"""

from __future__ import annotations

import asyncio
import re
import struct
from dataclasses import dataclass

SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104
CANCEL_REQUEST = 80877102
NEGOTIATION_CODES = frozenset({SSL_REQUEST, GSSENC_REQUEST})

SIMPLE_QUERY, PARSE, BIND, EXECUTE, SYNC, TERMINATE = b"Q", b"P", b"B", b"E", b"S", b"X"
COMMAND_COMPLETE, ERROR_RESPONSE, READY_FOR_QUERY, BACKEND_KEY = b"C", b"E", b"Z", b"K"

COMMIT_STATEMENTS = frozenset(
    {"COMMIT", "COMMIT WORK", "COMMIT TRANSACTION", "END", "END WORK", "END TRANSACTION"}
)
LEDGER_WRITE = re.compile(r"INSERT\s+INTO\s+transitions\b", re.IGNORECASE)
"""A statement that writes a transition (its ledger row)."""
PREPARE = re.compile(r"\s*PREPARE\s+(\w+)\s+AS\s+(.*)", re.IGNORECASE | re.DOTALL)
CALLED = re.compile(r"\bEXECUTE\s+(\w+)\s*\(", re.IGNORECASE)
"""A statement prepared by name and run by ``EXECUTE name(...)`` in a simple query."""
BEGINS = re.compile(r"\s*(BEGIN|START\s+TRANSACTION)\b", re.IGNORECASE)
WRITES = re.compile(r"\b(INSERT|UPDATE|DELETE)\b", re.IGNORECASE)
TRANSACTION_KINDS = {
    "transition": re.compile(
        r"INSERT\s+INTO\s+transitions|lease_token[\s\S]*FOR\s+UPDATE", re.IGNORECASE
    ),
    "renewal": re.compile(r"UPDATE\s+work\s+w\s+SET\s+lease_expires_at\s*=\s*LEAST", re.I),
    "sweep": re.compile(r"pg_try_advisory_xact_lock|overdue", re.IGNORECASE),
}
"""What an engine transaction is, told by the statements it ran: a transition commit
(history, or a lease-fenced outcome), a lease renewal, or a recovery sweep."""


@dataclass(frozen=True)
class Message:
    """One typed message: its type byte and body (without the length word)."""

    kind: bytes
    body: bytes

    @property
    def raw(self) -> bytes:
        return self.kind + struct.pack("!I", len(self.body) + 4) + self.body


async def read_message(reader: asyncio.StreamReader) -> Message:
    """Read one typed message; IncompleteReadError when the peer has gone."""
    header = await reader.readexactly(5)
    length = struct.unpack("!I", header[1:5])[0]
    return Message(header[:1], await reader.readexactly(length - 4))


async def read_startup_packet(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """Read one untyped startup-phase packet: (its request code, the raw packet)."""
    length_word = await reader.readexactly(4)
    body = await reader.readexactly(struct.unpack("!I", length_word)[0] - 4)
    return struct.unpack("!I", body[:4])[0], length_word + body


def split_messages(buffer: bytes) -> tuple[list[Message], bytes]:
    """The complete messages at the front of ``buffer`` and the incomplete rest."""
    messages = []
    while len(buffer) >= 5:
        length = struct.unpack("!I", buffer[1:5])[0]
        if len(buffer) < 1 + length:
            break
        messages.append(Message(buffer[:1], buffer[5 : 1 + length]))
        buffer = buffer[1 + length :]
    return messages, buffer


def cstrings(body: bytes, count: int) -> list[str]:
    """The first ``count`` NUL-terminated strings of a message body."""
    parts = body.split(b"\0", count)[:count]
    return [part.decode(errors="replace") for part in parts] + [""] * (count - len(parts))


def is_commit(sql: str) -> bool:
    """Whether ``sql`` is a COMMIT (case, spacing and one trailing ';' ignored)."""
    return " ".join(sql.strip().rstrip(";").split()).upper() in COMMIT_STATEMENTS


def command_tag(message: Message) -> str:
    """The tag of a CommandComplete message, e.g. ``COMMIT`` or ``ROLLBACK``."""
    return cstrings(message.body, 1)[0]


def ends_transaction(message: Message) -> bool:
    """Whether ``message`` is a ReadyForQuery saying no transaction is open any more."""
    return message.kind == READY_FOR_QUERY and message.body[:1] == b"I"


def opens_transaction(message: Message) -> bool:
    """Whether ``message`` is a ReadyForQuery saying a transaction block is open."""
    return message.kind == READY_FOR_QUERY and message.body[:1] != b"I"


def backend_pid(message: Message) -> int:
    """The process id carried by a BackendKeyData message."""
    return struct.unpack("!I", message.body[:4])[0]


class CommitTracker:
    """Follows one client's statements: recognises an Execute of a prepared COMMIT, or
    of a transition write in autocommit (``alone``), and what the transaction being
    committed did (``kinds``: ``write`` once it wrote, plus the TRANSACTION_KINDS its
    statements match). The proxy tells it whether a transaction block is open (``idle``
    from the server's last ReadyForQuery)."""

    def __init__(self) -> None:
        self.statements: dict[str, str] = {}
        self.portals: dict[str, str] = {}
        self.kinds: set[str] = set()
        self.idle = False
        self.alone = False
        """The last commit recognised is a statement in autocommit, not a COMMIT."""

    def executes_commit(self, message: Message) -> bool:
        """True when ``message`` runs a COMMIT (simple query, or Execute of one), or a
        transition write while no transaction block is open."""
        sql = self._statement(message)
        if sql is None:
            return False
        self.alone = False
        if is_commit(sql):
            return True
        if " ".join(sql.split()).upper().startswith("ROLLBACK"):
            self.kinds.clear()
        elif WRITES.search(sql):
            self.kinds.add("write")
            self.kinds.update(k for k, pattern in TRANSACTION_KINDS.items() if pattern.search(sql))
            self.alone = self.idle and bool(LEDGER_WRITE.search(sql)) and not BEGINS.match(sql)
        return self.alone

    def committed(self) -> None:
        """The COMMIT went by: the next transaction has done nothing yet."""
        self.kinds.clear()
        self.idle = True

    def _statement(self, message: Message) -> str | None:
        """The SQL a message runs now (None for messages that run nothing)."""
        if message.kind == SIMPLE_QUERY:
            return self._simple(cstrings(message.body, 1)[0])
        if message.kind == PARSE:
            name, sql = cstrings(message.body, 2)
            self.statements[name] = sql
        elif message.kind == BIND:
            portal, statement = cstrings(message.body, 2)
            self.portals[portal] = self.statements.get(statement, "")
        elif message.kind == EXECUTE:
            return self.portals.get(cstrings(message.body, 1)[0], "")
        return None

    def _simple(self, sql: str) -> str | None:
        """A simple query's SQL, with the text of the statements it runs by name (a group
        commit sends ``BEGIN; EXECUTE name(...); ...``); a PREPARE runs nothing yet."""
        prepare = PREPARE.match(sql)
        if prepare:
            self.statements[prepare.group(1)] = prepare.group(2)
            return None
        called = [self.statements.get(name, "") for name in CALLED.findall(sql)]
        return " ".join([sql, *called])
