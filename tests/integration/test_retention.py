"""Bounded history against a real PostgreSQL: a team's ended instances past its keep are
exported whole and removed with every row of theirs; nothing running, nothing younger,
nothing of another team and nothing changed since its export is touched."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from engine.api.client import Client
from engine.decide.operator_actions import Action
from engine.model.canonical import format_instant
from engine.model.limits import MAX_RETENTION_KEEP, MIN_RETENTION_KEEP
from engine.store import dead_letters, reads, retention, sweeps, work_views
from engine.store.clock import ManualClock
from engine.store.dead_letters import (
    Resolution,
    instance_resolutions,
    make_resolution,
    resolve,
)
from engine.store.retention import MAX_PRUNE_BATCH
from engine.store.store import Store
from tests.integration.factories import DEFINITION, adjust_work, open_store

T0 = datetime(2031, 6, 7, 8, 9, 10, tzinfo=UTC)
KEEP = timedelta(days=30)
ROWS = """
SELECT (SELECT count(*) FROM instances WHERE instance_id = %(id)s)
     + (SELECT count(*) FROM history WHERE instance_id = %(id)s)
     + (SELECT count(*) FROM transitions WHERE instance_id = %(id)s)
     + (SELECT count(*) FROM work WHERE instance_id = %(id)s)
"""


class Export(retention.ExportFile):
    """The export file ``wayline retention run`` writes, read back by instance."""

    def instances(self) -> dict[str, list[dict]]:
        lines = [json.loads(line) for line in self.path.read_text().splitlines()]
        return {events[0]["instance_id"]: events for events in lines}


@pytest.fixture
def export(tmp_path: Path) -> Iterator[Export]:
    with Export(tmp_path / "export.jsonl") as export:
        yield export


async def started(client: Client, name: str, team: str = "red") -> str:
    await client.start(DEFINITION.name, name, {}, tenant=team)
    return name


async def ended(client: Client, name: str, team: str = "red") -> str:
    await started(client, name, team)
    await client.command(name, Action.TERMINATE, "alice", "done with it")
    return name


async def rows_of(store: Store, instance_id: str) -> int:
    async with store.reading() as conn:
        return (await (await conn.execute(ROWS, {"id": instance_id})).fetchone())[0]


@pytest.fixture
async def client(store: Store) -> Client:
    client = Client(store)
    await client.publish(DEFINITION, "alice")
    return client


async def test_ended_instances_past_the_keep_are_exported_then_removed(
    client: Client, store: Store, clock: ManualClock, export: Export
) -> None:
    old = [await ended(client, f"old-{n}") for n in range(3)]
    running = await started(client, "running")
    other_team = await ended(client, "blue-old", team="blue")
    clock.advance(KEEP + timedelta(days=1))
    young = await ended(client, "young")
    histories = {i: [e async for e in reads.export_history(store, i)] for i in old}

    done = await retention.prune(store, "red", KEEP, export, batch=2)

    assert (done.exported, done.removed, done.skipped) == (3, 3, 0)
    exported = export.instances()
    assert sorted(exported) == sorted(old)
    for instance_id in old:
        assert len(exported[instance_id]) == len(histories[instance_id])
        assert exported[instance_id][-1]["kind"] == "terminated"
        assert await rows_of(store, instance_id) == 0
    for kept in (running, other_team, young):
        assert await rows_of(store, kept) > 0
    again = await retention.prune(store, "red", KEEP, export)
    assert (again.exported, again.removed) == (0, 0)


async def test_a_keep_longer_than_the_calendar_removes_nothing_and_raises_nothing(
    client: Client, store: Store, export: Export
) -> None:
    """A policy stored before MAX_RETENTION_KEEP (99999999d was accepted) made every
    retention run fail with an OverflowError computing its cutoff."""
    await ended(client, "old")
    done = await retention.prune(store, "red", timedelta(days=99_999_999), export)
    assert (done.exported, done.removed) == (0, 0)


async def test_a_removed_id_starts_a_new_instance(
    client: Client, store: Store, clock: ManualClock, export: Export
) -> None:
    await ended(client, "reused")
    clock.advance(KEEP * 2)
    await retention.prune(store, "red", KEEP, export)
    state = await client.start(DEFINITION.name, "reused", {}, tenant="red")
    assert state.status.label == "running" and state.sequence <= 2


async def test_an_instance_changed_since_its_export_is_kept_for_a_later_run(
    client: Client, store: Store, clock: ManualClock, export: Export
) -> None:
    await ended(client, "moving")
    clock.advance(KEEP * 2)
    expired = [("moving", 1, 0)]  # exported at an older position than it now has
    assert await retention._remove(store, expired) == 0
    assert await rows_of(store, "moving") > 0


async def test_an_instance_with_live_work_or_a_running_child_is_kept(
    client: Client, store: Store, clock: ManualClock, export: Export
) -> None:
    busy, parent, free = [await ended(client, name) for name in ("busy", "parent", "free")]
    child = await started(client, "child")
    async with store.connection() as conn:  # as a crash or a race could leave them
        await conn.execute("UPDATE work SET state = 1 WHERE instance_id = %s", [busy])
        await conn.execute(
            "UPDATE history SET successor_id = %s WHERE instance_id = %s AND sequence = 1",
            [child, parent],
        )
        await conn.commit()
    clock.advance(KEEP + timedelta(days=1))

    done = await retention.prune(store, "red", KEEP, export)

    assert (done.exported, done.removed) == (1, 1)
    assert list(export.instances()) == [free]
    assert await rows_of(store, busy) > 0 and await rows_of(store, parent) > 0


async def test_the_export_keeps_who_resolved_a_dead_letter_and_why(
    client: Client, store: Store, clock: ManualClock, export: Export
) -> None:
    """A dead letter's retry or discard is audited in its own table, not in the history:
    the removal deleted those records and the export, events only, held none of them."""
    await started(client, "stuck")
    work = [w.work_id for w in await work_views.instance_work(store, "stuck")]
    await adjust_work(store, work, deadline=clock.now() + timedelta(minutes=1))
    clock.advance(timedelta(minutes=2))
    assert await sweeps.sweep_expired_deadlines(store) == 1
    (letter,) = await work_views.instance_work(store, "stuck")
    fence = ("stuck", letter.work_id, letter.token)
    await resolve(store, make_resolution("c-9", *fence, "discard", "carol", "INC-4", clock.now()))
    await client.command("stuck", Action.TERMINATE, "alice", "done with it")
    clock.advance(KEEP + timedelta(days=1))

    assert (await retention.prune(store, "red", KEEP, export)).removed == 1

    *events, discarded = export.instances()["stuck"]
    assert events[-1]["kind"] == "terminated"
    assert discarded == {
        "instance_id": "stuck",
        "kind": "dead_letter_discarded",
        "occurred_at": format_instant(clock.now() - KEEP - timedelta(days=1)),
        "command_id": "c-9",
        "work_id": letter.work_id,
        "fencing_token": letter.token,
        "actor": "carol",
        "reason": "INC-4",
    }


async def dead_lettered_then_ended(
    client: Client, store: Store, clock: ManualClock, instance_id: str
) -> tuple[str, str, int]:
    """An instance whose work missed its deadline, terminated with the dead letter still
    unresolved (retention takes it: its work is finished), and past the keep; the fence
    of its dead letter."""
    await started(client, instance_id)
    work = [w.work_id for w in await work_views.instance_work(store, instance_id)]
    await adjust_work(store, work, deadline=clock.now() + timedelta(minutes=1))
    clock.advance(timedelta(minutes=2))
    assert await sweeps.sweep_expired_deadlines(store) == 1
    (letter,) = await work_views.instance_work(store, instance_id)
    await client.command(instance_id, Action.TERMINATE, "alice", "done with it")
    clock.advance(KEEP + timedelta(days=1))
    return instance_id, letter.work_id, letter.token


def discard(fence: tuple[str, str, int], at: datetime) -> Resolution:
    return make_resolution("late", *fence, "discard", "carol", "INC-5", at)


class ResolvedAfterItsBatch(Export):
    """An export during which an operator discards a dead letter on another connection,
    committed when the batch is on disk: after the export read the instance's
    resolutions, before the removal. ``batch`` is called from the event loop's thread,
    so the discard runs to its commit on a thread (and loop and store) of its own."""

    def __init__(self, path: Path, dsn: str, schema: str, command: Resolution) -> None:
        super().__init__(path)
        self.dsn, self.schema, self.command = dsn, schema, command

    @contextmanager
    def batch(self) -> Iterator[Callable[[str], None]]:
        with super().batch() as write:
            yield write
        failed: list[BaseException] = []
        thread = threading.Thread(target=self._discard, args=(failed,))
        thread.start()
        thread.join()
        assert not failed, failed

    def _discard(self, failed: list[BaseException]) -> None:
        async def resolved() -> None:
            async with open_store(self.dsn, self.schema) as other:
                await resolve(other, self.command)

        try:
            asyncio.run(resolved())
        except BaseException as error:
            failed.append(error)


async def test_a_resolution_committed_after_the_export_is_not_removed_unexported(
    client: Client, store: Store, clock: ManualClock, pg_dsn: str, schema: str, tmp_path: Path
) -> None:
    """The removal deleted every resolution of an instance still at its exported
    position: one committed after the export had read them (a discard takes no event)
    was removed without ever being exported. The instance is now kept, and the next run
    exports it again with that resolution before it removes it."""
    fence = await dead_lettered_then_ended(client, store, clock, "stuck")
    with ResolvedAfterItsBatch(
        tmp_path / "export.jsonl", pg_dsn, schema, discard(fence, clock.now())
    ) as racing:
        done = await retention.prune(store, "red", KEEP, racing)
        assert (done.exported, done.removed, done.skipped) == (1, 0, 1)
        assert [r["kind"] for r in racing.instances()["stuck"]][-1] == "terminated"
        assert [r.command_id for r in await instance_resolutions(store, "stuck")] == ["late"]

    with Export(tmp_path / "later.jsonl") as later:
        assert (await retention.prune(store, "red", KEEP, later)).removed == 1
        *events, discarded = later.instances()["stuck"]
    assert events[-1]["kind"] == "terminated"
    assert (discarded["kind"], discarded["command_id"]) == ("dead_letter_discarded", "late")
    assert await rows_of(store, "stuck") == 0


async def test_a_resolution_in_flight_during_the_removal_is_waited_for_and_kept(
    client: Client, store: Store, clock: ManualClock, pg_dsn: str, schema: str, export: Export
) -> None:
    """A discard whose transaction had locked its dead letter and recorded itself, but
    not yet committed, when the removal began: the removal did not see it, and its
    DELETE of the work then waited for that lock and failed on the resolution's foreign
    key once it committed (the whole batch with it). The removal now waits for the
    resolution before it judges what is as exported, and keeps the instance."""
    fence = await dead_lettered_then_ended(client, store, clock, "stuck")
    async with await psycopg.AsyncConnection.connect(pg_dsn) as resolver:
        await resolver.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        replayed = await dead_letters._resolve_on(
            resolver, discard(fence, clock.now()), None, store.channel
        )
        assert not replayed  # recorded in the open transaction, which holds the dead letter
        pruning = asyncio.ensure_future(retention.prune(store, "red", KEEP, export))
        await blocked_by(pg_dsn, resolver, pruning)
        await resolver.commit()
    done = await pruning

    assert (done.exported, done.removed, done.skipped) == (1, 0, 1)
    assert [r.command_id for r in await instance_resolutions(store, "stuck")] == ["late"]
    assert await rows_of(store, "stuck") > 0


async def blocked_by(
    dsn: str, holder: psycopg.AsyncConnection, task: asyncio.Future[object]
) -> None:
    """Returns once a backend waits on a lock ``holder`` holds (the removal, behind the
    open resolution); the task ending first is a failure (it never waited)."""
    waiting = "SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))"
    pid = holder.info.backend_pid
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as watch:
        while not (await (await watch.execute(waiting, [pid])).fetchone())[0]:
            assert not task.done(), "the removal never waited for the resolution"
            await asyncio.sleep(0.01)


async def test_policies_are_kept_per_team_and_bad_values_refused(store: Store) -> None:
    await retention.set_policy(store, "red", KEEP, "alice")
    await retention.set_policy(store, "red", KEEP * 2, "bob")
    await retention.set_policy(store, "", timedelta(days=7), "carol")
    found = {p.tenant_id: (p.keep, p.set_by) for p in await retention.policies(store)}
    assert found == {"red": (KEEP * 2, "bob"), "": (timedelta(days=7), "carol")}
    with pytest.raises(ValueError, match="keep must be positive: it must be from 1h"):
        await retention.set_policy(store, "red", timedelta(0), "alice")
    too_short = r"keep 3599s is too short: it must be from 1h \(MIN_RETENTION_KEEP"
    with pytest.raises(ValueError, match=too_short):
        await retention.set_policy(store, "red", MIN_RETENTION_KEEP - timedelta(seconds=1), "a")
    with pytest.raises(ValueError, match=r"keep 36501d is too long: .* to 36500d \(MAX_RETENTION"):
        await retention.set_policy(store, "red", MAX_RETENTION_KEEP + timedelta(1), "alice")
    await retention.set_policy(store, "red", MAX_RETENTION_KEEP, "alice")
    await retention.set_policy(store, "red", MIN_RETENTION_KEEP, "alice")
    for nobody in ("", "a b"):
        with pytest.raises(ValueError, match="actor must be 1 to"):
            await retention.set_policy(store, "red", KEEP, nobody)
    with pytest.raises(ValueError, match=f"from 1 to {MAX_PRUNE_BATCH}"):
        retention.check_batch(MAX_PRUNE_BATCH + 1)


def appended(export: retention.ExportFile, lines: str) -> None:
    """``lines`` written to ``export`` as a batch of their own."""
    with export.batch() as write:
        write(lines)


def test_an_export_file_is_named_on_disk_before_its_lines_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the file was synced, not the directory naming it: after a power cut the
    export of instances already removed could be gone with its directory entry."""
    synced: list[str] = []
    sync = os.fsync

    def recorded(fd: int) -> None:
        synced.append(os.path.realpath(f"/proc/self/fd/{fd}"))
        sync(fd)

    monkeypatch.setattr(os, "fsync", recorded)
    path = tmp_path / "export.jsonl"
    with retention.ExportFile(path) as export:
        appended(export, "[1]\n")
    with retention.ExportFile(path) as export:  # a run later in the same second
        appended(export, "[2]\n")
    assert synced == [str(tmp_path), str(path), str(path)]
    assert path.read_text() == "[1]\n[2]\n"
    assert path.stat().st_mode & 0o777 == 0o600, "inputs and results are its owner's alone"


def test_an_export_file_holds_whole_lines_only(tmp_path: Path) -> None:
    """A killed run's torn last line (never removed: removal waits for the sync) is cut
    before the next run appends, so no two lines run together."""
    path = tmp_path / "export.jsonl"
    path.write_text('[{"a":1}]\n[{"b":')
    with retention.ExportFile(path) as export:
        appended(export, '[{"c":3}]\n')
    assert path.read_text() == '[{"a":1}]\n[{"c":3}]\n'
    path.write_text('[{"b":')
    with retention.ExportFile(path):
        pass
    assert path.read_text() == "", "an existing file is cut, never removed"
    with retention.ExportFile(tmp_path / "unused.jsonl"):
        pass
    assert not (tmp_path / "unused.jsonl").exists(), "a file made and left empty goes"


def test_a_batch_that_fails_half_way_leaves_none_of_its_lines(tmp_path: Path) -> None:
    """Lines are written as their histories are read (a batch of long histories is not
    held in memory); a batch that fails after some of them is cut off again."""
    path = tmp_path / "export.jsonl"
    with retention.ExportFile(path) as export:
        appended(export, "[1]\n")
        with pytest.raises(RuntimeError), export.batch() as write:
            write("[2]\n")
            raise RuntimeError("a history could not be read")
    assert path.read_text() == "[1]\n"
