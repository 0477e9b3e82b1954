"""What a drill process saw from the inside, as JSON lines in a file the harness reads.

Boundary hits go to the fault report (``engine.worker.faults``); everything else a drill
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

    The store calls ``commits.settle(connect, written, xid)`` when COMMIT failed, and
    ``commits.settle_session(connect, written, session)`` when a write sent alone in
    autocommit got no answer; each returns (committed) or raises (not committed, or
    still unknown). The harness later asks ``pg_xact_status`` about the same xid, or
    the proxy about the cut on the same backend, and compares.
    """
    from engine.store import commits

    commits.settle = _recorded(commits.settle, lambda xid: {"xid": xid})
    commits.settle_session = _recorded(
        commits.settle_session, lambda session: {"pid": session.pid if session else 0}
    )


def _recorded(original: Any, about: Any) -> Any:
    from engine.store.errors import CommitUnknown, DuplicateTransition

    async def settle(connect: Any, written: list[Any], handle: Any) -> None:
        record = {**about(handle), "transitions": [t.transition_id for t in written]}
        try:
            await original(connect, written, handle)
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

    return settle
