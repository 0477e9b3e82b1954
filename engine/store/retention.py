"""Bounded history: a team's ended instances past its keep, exported, then removed.

History is append-only, so without retention the store grows for ever, and with it every
index the claims and the studio's pages walk. A team says how long it keeps its ended
instances (``set_policy``, at least MIN_RETENTION_KEEP; ``remove_policy`` takes it
back, and a team without a policy keeps everything). ``prune`` then works in bounded
batches: it picks ended instances archived before the cutoff that have no live work and
no child still running (a running child reports to its parent, which must still be
there), appends each one's whole history as one JSON line to the export
(the array of its events, each as ``wayline history --json`` prints it, then the
resolutions of its dead letters, which no event records), on disk before
anything is removed (``ExportFile``), and then, in one short transaction, locks those still
as they were exported and deletes their work, history, ledger, snapshot and row. Nothing waits on
a worker: an ended instance has no due work, and a row another transaction holds is
skipped, to be taken by a later run; a crash between export and removal only exports
some instances twice (each line names its instance).

"As they were exported" covers the resolutions too, which no event records and so no
position counts: an operator may retry or discard an ended instance's dead letter while
its line is written. The removal therefore also locks the instance's work rows (a
resolution holds the lock of the work row it resolves until it commits,
``dead_letters.resolve``, so one in flight commits first and the removal then sees it),
and removes only the instances whose resolutions are still exactly the ones exported
(resolutions are only ever added, so their number says it). One resolved meanwhile is
kept, and the next run exports it again, resolution and all; a resolution that comes
after the removal finds no dead letter (``StaleLease``). No resolution is removed
without having been exported.

One run at a time works on a team (``exclusive``): two runs started together (a cron job
that overlaps the previous one) would pick the same instances, export them both, and
one would find them gone half way through its export.

A removed instance's id is free again: a start with it begins a new instance.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractContextManager, asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

import psycopg

from engine.decide.audit import actor_problem
from engine.model.durations import format_duration
from engine.model.events import event_to_json
from engine.model.inputs import check_team
from engine.model.limits import MAX_RETENTION_KEEP, MIN_RETENTION_KEEP
from engine.store import dead_letters, reads
from engine.store.errors import StoreUnavailable
from engine.store.statements import retention as sql
from engine.store.store import Store
from engine.store.transactions import transact

MAX_PRUNE_BATCH = 500
"""Instances exported and removed per transaction: short enough never to hold locks
long, large enough that a backlog of millions drains in a few thousand batches."""


@dataclass(frozen=True)
class Policy:
    """How long a team keeps its ended instances, and who said so."""

    tenant_id: str
    keep: timedelta
    set_by: str
    set_at: datetime


@dataclass
class Pruned:
    """What one run of ``prune`` did."""

    exported: int = 0
    removed: int = 0
    skipped: int = 0
    """Exported but not removed: changed or locked meanwhile (a later run takes them)."""


EXPORT_MODE = 0o600
"""An export file is its owner's alone: it holds the instances' inputs and results."""


class Export(Protocol):
    """Where ``prune`` writes what it removes."""

    def batch(self) -> AbstractContextManager[Callable[[str], None]]:
        """A batch of whole JSON lines, written one by one by the function it gives (so
        a batch of long histories is never held in memory at once) and on disk when the
        block ends; a block that fails leaves nothing of its batch behind."""


class ExportFile:
    """A JSON-lines export file that only ever holds whole lines, each batch on disk
    when its block ends: its name too (the directory is synced when the file is made),
    so a power cut after a removal never loses the export of what was removed.

    A batch is written at the file's end and synced; one that fails (a full disk, a
    history that could not be read) is cut off again, and a torn last line a killed run
    left (it was never removed: removal waits for the sync) is cut off when the file is
    opened again, so appending never runs two lines together. Only one run writes a
    team's files at a time (``exclusive``).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.created = not path.exists()
        """Whether this run made the file (and so removes it when it stays empty)."""
        self.fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, EXPORT_MODE)
        try:
            self._cut_torn_line()
            if self.created:
                _sync_directory(path.parent)
        except BaseException:
            self.close()
            raise

    @contextmanager
    def batch(self) -> Iterator[Callable[[str], None]]:
        start = os.fstat(self.fd).st_size
        try:
            yield self._write
            os.fsync(self.fd)
        except BaseException:
            with suppress(OSError):
                os.ftruncate(self.fd, start)
            raise

    def _write(self, text: str) -> None:
        view = memoryview(text.encode())
        while view:
            view = view[os.write(self.fd, view) :]

    def close(self) -> None:
        """Close it; a file this run made and left empty is removed."""
        if self.fd < 0:
            return
        try:
            if self.created and os.fstat(self.fd).st_size == 0:
                self.path.unlink(missing_ok=True)
        finally:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> ExportFile:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _cut_torn_line(self) -> None:
        """Cut the file back to its last whole line."""
        end = size = os.fstat(self.fd).st_size
        while end > 0:
            chunk = os.pread(self.fd, min(end, 65536), end - min(end, 65536))
            if end == size and chunk.endswith(b"\n"):
                return
            newline = chunk.rfind(b"\n")
            if newline >= 0:
                os.ftruncate(self.fd, end - len(chunk) + newline + 1)
                return
            end -= len(chunk)
        if size:
            os.ftruncate(self.fd, 0)


def _sync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@asynccontextmanager
async def exclusive(store: Store, tenant: str) -> AsyncIterator[bool]:
    """True, held for the block, when no other run works on ``tenant`` in this schema;
    False (and nothing held) when one does. The lock is a session's: a run that is killed
    loses it with its connection, so the next run is never shut out."""
    try:
        conn = await store.dedicated()
    except psycopg.OperationalError as exc:
        raise StoreUnavailable("the database is unavailable") from exc
    async with conn:
        found = await conn.execute(sql.TRY_RUN_LOCK, {"schema": store.schema, "tenant": tenant})
        yield bool((await found.fetchone())[0])


def check_batch(batch: int) -> int:
    """``batch`` when it is from 1 to MAX_PRUNE_BATCH; ValueError saying so otherwise."""
    if not 1 <= batch <= MAX_PRUNE_BATCH:
        raise ValueError(f"batch is {batch}; it must be from 1 to {MAX_PRUNE_BATCH} instances")
    return batch


def check_keep(keep: timedelta) -> timedelta:
    """``keep`` when it is from MIN_RETENTION_KEEP to MAX_RETENTION_KEEP; ValueError
    saying what was wrong and what is allowed otherwise."""
    if MIN_RETENTION_KEEP <= keep <= MAX_RETENTION_KEEP:
        return keep
    if keep <= timedelta(0):
        wrong = "keep must be positive"
    elif keep < MIN_RETENTION_KEEP:
        wrong = f"keep {_shown(keep)} is too short"
    else:
        wrong = f"keep {_shown(keep)} is too long"
    raise ValueError(
        f"{wrong}: it must be from {format_duration(MIN_RETENTION_KEEP)} "
        f"(MIN_RETENTION_KEEP, so an ended instance is not removed before anyone can read "
        f"it) to {MAX_RETENTION_KEEP.days}d (MAX_RETENTION_KEEP), e.g. 90d"
    )


def _shown(keep: timedelta) -> str:
    """``keep`` as a command line writes it (``30m``), or in seconds when it has no
    such form (finer than a millisecond, given through the API)."""
    try:
        return format_duration(keep)
    except ValueError:
        return f"{keep.total_seconds()}s"


async def set_policy(store: Store, tenant: str, keep: timedelta, actor: str) -> Policy:
    """Keep ``tenant``'s ended instances for ``keep`` (replacing any earlier policy)."""
    check_team(tenant)
    check_keep(keep)
    if problem := actor_problem(actor):  # who set it is audited like a command's actor
        raise ValueError(problem)
    now = store.now()
    params = {"tenant": tenant, "keep": keep, "actor": actor, "now": now}

    async def body(conn: Any) -> None:
        await conn.execute(sql.SET_POLICY, params)

    await transact(store, f"retention policy of team {tenant!r}", body, single_statement=True)
    return Policy(tenant, keep, actor, now)


async def remove_policy(store: Store, tenant: str) -> Policy | None:
    """Remove ``tenant``'s policy, so it keeps every ended instance again; the policy
    removed, or None when the team had none."""
    check_team(tenant)

    async def body(conn: Any) -> Policy | None:
        row = await (await conn.execute(sql.REMOVE_POLICY, {"tenant": tenant})).fetchone()
        return None if row is None else Policy(*row)

    return await transact(
        store, f"removal of team {tenant!r}'s retention policy", body, single_statement=True
    )


async def policies(store: Store) -> list[Policy]:
    """Every team's policy, by team."""
    async with store.reading() as conn:
        rows = await (await conn.execute(sql.POLICIES)).fetchall()
    return [Policy(*row) for row in rows]


async def prune(
    store: Store, tenant: str, keep: timedelta, export: Export, batch: int = MAX_PRUNE_BATCH
) -> Pruned:
    """Export and remove ``tenant``'s ended instances archived more than ``keep`` ago,
    ``batch`` at a time, until none is left that can go now (see the module). The caller
    holds ``exclusive`` for ``tenant``."""
    check_batch(batch)
    done = Pruned()
    # A policy stored before MAX_RETENTION_KEEP could name a cutoff before year 1.
    cutoff = store.now() - min(keep, MAX_RETENTION_KEEP)
    params = {"tenant": tenant, "cutoff": cutoff, "limit": batch}
    while True:
        async with store.reading() as conn:
            expired = await (await conn.execute(sql.EXPIRED, params)).fetchall()
        if not expired:
            return done
        resolved = await _export(store, [instance_id for instance_id, _ in expired], export)
        removed = await _remove(
            store, [(instance_id, at, resolved[instance_id]) for instance_id, at in expired]
        )
        done.exported += len(expired)
        done.removed += removed
        done.skipped += len(expired) - removed
        if removed == 0 or len(expired) < batch:
            return done  # what is left is in use now, or there is nothing more


async def _export(store: Store, instance_ids: list[str], export: Export) -> dict[str, int]:
    """Each instance's events, then its dead letters' resolutions (who retried or
    discarded which work and why: the removal deletes them, and no event holds them), as
    one JSON line, on disk before anything is removed; how many resolutions each line
    holds, by instance (what ``_remove`` may remove)."""
    exported: dict[str, int] = {}
    with export.batch() as write:
        for instance_id in instance_ids:
            records = [event_to_json(e) async for e in reads.export_history(store, instance_id)]
            resolved = await dead_letters.instance_resolutions(store, instance_id)
            records += [resolution.to_json() for resolution in resolved]
            write(json.dumps(records, separators=(",", ":")) + "\n")
            exported[instance_id] = len(resolved)
    return exported


async def _remove(store: Store, exported: list[tuple[str, int, int]]) -> int:
    """Remove the instances of ``exported`` (instance id, position, resolutions) that are
    still as exported: at that position and with that many resolutions; how many."""
    ids, sequences, _ = (list(column) for column in zip(*exported, strict=True))
    resolutions = {instance_id: count for instance_id, _, count in exported}

    async def body(conn: Any) -> int:
        locked = await conn.execute(sql.LOCK_UNCHANGED, {"ids": ids, "sequences": sequences})
        chosen = [row[0] for row in await locked.fetchall()]
        if chosen:  # a resolution in flight holds its work row: it commits first
            await conn.execute(sql.LOCK_WORK, {"ids": chosen})
            counts = [resolutions[instance_id] for instance_id in chosen]
            kept = await conn.execute(
                sql.RESOLUTIONS_AS_EXPORTED, {"ids": chosen, "counts": counts}
            )
            chosen = [row[0] for row in await kept.fetchall()]
        if chosen:
            for statement in sql.REMOVE:
                await conn.execute(statement, {"ids": chosen})
        return len(chosen)

    return await transact(store, f"removal of {len(ids)} ended instances", body)
