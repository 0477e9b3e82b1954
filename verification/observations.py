"""What a drill process saw from the inside, as JSON lines in a file the harness reads.

Boundary hits go to the fault report (``engine.faults``); everything else a drill
subprocess wants to tell the harness goes here: lease-holder writes attempted and
whether they held the lease (``verification.lease_audit``), and how the engine settled
each COMMIT whose answer was lost (``install_settlement_recorder``). One ``os.write`` per
line on an O_APPEND descriptor, so lines stay whole across processes and survive a
SIGKILL right after they are written.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

OBSERVATIONS_ENV = "WAYLINE_DRILL_OBSERVATIONS"


def note(kind: str, **fields: Any) -> None:
    """Append one observation (no-op outside a drill process)."""
    path = os.environ.get(OBSERVATIONS_ENV)
    if not path:
        return
    line = json.dumps({"kind": kind, "pid": os.getpid(), **fields}, default=str) + "\n"
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


def install_settlement_recorder() -> None:
    """Record every settlement of an unanswered COMMIT the engine makes.

    The store calls ``commits.settle(connect, written, xid)`` when COMMIT failed; it
    returns (committed) or raises (not committed, or still unknown). The harness later
    asks ``pg_xact_status`` about the same xid and compares.
    """
    from engine.store import commits
    from engine.store.errors import CommitUnknown, DuplicateTransition

    original = commits.settle

    async def settle(connect: Any, written: list[Any], xid: str) -> None:
        ids = [t.transition_id for t in written]
        try:
            await original(connect, written, xid)
        except CommitUnknown:
            note("settled", xid=xid, transitions=ids, verdict="unknown")
            raise
        except DuplicateTransition:
            note("settled", xid=xid, transitions=ids, verdict="conflicting")
            raise
        except Exception:
            note("settled", xid=xid, transitions=ids, verdict="aborted")
            raise
        note("settled", xid=xid, transitions=ids, verdict="committed")

    commits.settle = settle
