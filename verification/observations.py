"""What a drill process saw from the inside, as JSON lines in a file the harness reads.

Boundary hits go to the fault report (``engine.worker.faults``); everything else a drill
subprocess wants to tell the harness goes here: lease-holder writes attempted and
whether they held the lease (``verification.lease_audit``), and how the engine settled
each COMMIT whose answer was lost (``SettlementRecorder``). One ``os.write`` per
line on an O_APPEND descriptor, so lines stay whole across processes and survive a
SIGKILL right after they are written.
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engine.store.errors import CommitUnknown, DuplicateTransition
from engine.store.seams import LeaseWrites, Row, StoreHooks, Unanswered

OBSERVATIONS_ENV = "WAYLINE_DRILL_OBSERVATIONS"


def note(kind: str, **fields: Any) -> None:
    """Append one observation (no-op outside a drill process), with the time it was
    made (``at``), so that a rare finding can be placed against the drill's fault and
    its processes' logs."""
    path = os.environ.get(OBSERVATIONS_ENV)
    if not path:
        return
    at = datetime.now(UTC).isoformat()
    line = json.dumps({"kind": kind, "pid": os.getpid(), "at": at, **fields}, default=str) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def read(path: Path) -> Iterator[dict[str, Any]]:
    """Every complete observation in ``path`` (none when the file does not exist)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return
    for line in text.splitlines():
        try:
            yield json.loads(line)
        except ValueError:
            continue  # a line cut short by a kill mid-write


class Observer(StoreHooks):
    """Store hooks that watch what the hooks they wrap (``inner``: the engine's own by
    default, or a mutant's) decide, without changing it."""

    def __init__(self, inner: StoreHooks | None = None) -> None:
        self.inner = inner or StoreHooks()

    async def lease_writes(self, sent: LeaseWrites) -> Sequence[Row | None]:
        return await self.inner.lease_writes(sent)

    async def settle(self, unanswered: Unanswered, decide: Callable[[], Awaitable[None]]) -> None:
        await self.inner.settle(unanswered, decide)


class SettlementRecorder(Observer):
    """Records every settlement of an unanswered COMMIT the store makes.

    The store settles a COMMIT that failed by its transaction id, and a write sent alone
    in autocommit that got no answer by the session that ran it; each returns
    (committed) or raises (not committed, or still unknown). The harness later asks
    ``pg_xact_status`` about the same xid, or the proxy about the cut on the same
    backend, and compares.
    """

    async def settle(self, unanswered: Unanswered, decide: Callable[[], Awaitable[None]]) -> None:
        named = {"xid": unanswered.xid} if unanswered.xid else {"pid": unanswered.pid}
        written = unanswered.written
        record = {
            **named,
            "transitions": [t.transition_id for t in written],
            "instances": [t.instance_id for t in written],
            "fingerprints": [t.fingerprint for t in written],
        }
        try:
            await self.inner.settle(unanswered, decide)
        except CommitUnknown:
            note("settled", **record, verdict="unknown")
            raise
        except DuplicateTransition:
            note("settled", **record, verdict="conflicting")
            raise
        except Exception:
            note("settled", **record, verdict="aborted")
            raise
        note("settled", **record, verdict="committed")
