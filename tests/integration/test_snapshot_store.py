"""Snapshots in a real PostgreSQL (issue 23): written with the transition that crosses an
interval and only when it commits, read back with only the events after them, ignored
when this build may not trust them, and removed by retention with their instance."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from engine.model.registry import Registry
from engine.model.validation import parse_definition
from engine.replay.fold import replay
from engine.replay.snapshots import FOLD_VERSION, SNAPSHOT_INTERVAL_EVENTS, due, take
from engine.store import catalog, reads, retention
from engine.store.clock import ManualClock
from engine.store.store import Store, ready_to_write
from engine.worker.instance_cache import InstanceCache, RegistrySource
from tests.integration.factories import open_store
from tests.integration.long_histories import commit_history, long_history
from tests.integration.round_trips import round_trips

T0 = datetime(2031, 6, 7, 8, 9, 10, tzinfo=UTC)
STEPS = 200
"""3 events a step: the history passes more than one snapshot interval, and its newest
snapshot is behind its end."""
LONG = parse_definition(
    {
        "name": "long",
        "version": "1",
        "mode": "orchestration",
        "steps": [
            {
                "name": f"s{k}",
                "kind": "activity",
                "target": "long.noop",
                "timeout": "10s",
                "input_limit": 100,
                "result_limit": 100,
                "retry": {"max_attempts": 3, "initial_delay": "1s", "max_delay": "4s"},
            }
            for k in range(STEPS)
        ],
    }
)
REGISTRY = Registry([LONG])
SNAPSHOTS = "SELECT instance_id, sequence FROM snapshots ORDER BY instance_id"
KEPT = "SELECT fold_version, digest, state FROM snapshots"
RESTORE_KEPT = "UPDATE snapshots SET (fold_version, digest, state) = (%s, %s, %s)"
"""A snapshot as it was written, kept and put back between damages."""


@pytest.fixture
async def one_connection(pg_dsn: str, schema: str, clock: ManualClock) -> AsyncIterator[Store]:
    """A store of one connection, whose round trips ``round_trips`` counts."""
    async with open_store(pg_dsn, schema, clock, max_size=1) as opened:
        yield opened


async def snapshots_of(store: Store) -> list[tuple[str, int]]:
    async with store.reading() as conn:
        return await (await conn.execute(SNAPSHOTS)).fetchall()


async def written(store: Store, instance_id: str, run_last: bool = True) -> list:
    await catalog.publish(store, LONG, "alice")
    transitions = long_history(LONG, instance_id, T0, run_last=run_last)
    await commit_history(store, transitions)
    return transitions


async def test_the_transition_crossing_an_interval_writes_the_snapshot_with_it(
    store: Store,
) -> None:
    await catalog.publish(store, LONG, "alice")
    transitions = long_history(LONG, "long-1", T0)
    crossing = next(
        k for k, t in enumerate(transitions) if due(t.expected_sequence, t.committed_sequence)
    )
    await commit_history(store, transitions[:crossing])
    assert await snapshots_of(store) == []

    async with store.connection() as conn:  # staged, then rolled back: no snapshot
        assert await store.stage(conn, transitions[crossing])
        await conn.rollback()
    assert await snapshots_of(store) == []

    await store.commit(transitions[crossing])
    at = transitions[crossing].committed_sequence
    assert SNAPSHOT_INTERVAL_EVENTS <= at < SNAPSHOT_INTERVAL_EVENTS + 3
    assert await snapshots_of(store) == [("long-1", at)]


async def test_opening_reads_the_snapshot_and_only_the_events_after_it(store: Store) -> None:
    transitions = await written(store, "long-1")
    events = [e for t in transitions for e in t.events]
    ((_, at),) = await snapshots_of(store)

    loaded = await reads.load(store, REGISTRY, "long-1")

    assert (loaded.snapshot_sequence, loaded.events_read) == (at, len(events) - at)
    assert loaded.state == replay(REGISTRY, events)
    assert loaded.state.digest == replay(REGISTRY, events).digest


async def test_opening_an_instance_is_one_round_trip(one_connection: Store) -> None:
    """A cold load, by an inspection or a worker's cache, reads the newest snapshot and
    the history after it in one round trip: with a snapshot behind the instance's end,
    one at its very end, or none at all."""
    store = one_connection
    await catalog.publish(store, LONG, "alice")
    whole = long_history(LONG, "long", T0)
    crossings = [k for k, t in enumerate(whole) if due(t.expected_sequence, t.committed_sequence)]
    ends = {"long": len(whole), "at-snapshot": crossings[-1] + 1, "short": crossings[0]}
    for instance_id, end in ends.items():
        transitions = long_history(LONG, instance_id, T0)[:end]
        await commit_history(store, transitions)
        events = [e for t in transitions for e in t.events]
        snapshot_at = max(
            (
                t.committed_sequence
                for t in transitions
                if due(t.expected_sequence, t.committed_sequence)
            ),
            default=0,
        )

        loaded, trips = await round_trips(store, reads.load(store, REGISTRY, instance_id))
        cache = InstanceCache(store, RegistrySource(store, REGISTRY))
        cached, cache_trips = await round_trips(store, cache.load(instance_id))

        assert (trips, cache_trips) == (1, 1), instance_id
        assert loaded.snapshot_sequence == snapshot_at, instance_id
        assert cache.snapshots_read == (1 if snapshot_at else 0), instance_id
        full = replay(REGISTRY, events)
        assert loaded.state == cached == full, instance_id
        assert loaded.state.digest == cached.digest == full.digest, instance_id


async def test_a_snapshot_this_build_may_not_trust_is_ignored(one_connection: Store) -> None:
    """A snapshot of another fold version, damaged, or pinned to a definition the
    registry does not hold is passed over: the instance is opened from its whole history
    (a second round trip, only then) and its state is the full replay's."""
    store = one_connection
    transitions = await written(store, "long-1")
    events = [e for t in transitions for e in t.events]
    full = replay(REGISTRY, events)
    async with store.reading() as conn:
        kept = await (await conn.execute(KEPT)).fetchone()
    pin = f"replace(state, '{LONG.fingerprint}', '{'0' * 64}')"
    damages = (
        f"fold_version = {FOLD_VERSION + 1}",
        "state = replace(state, '\"succeeded\"', '\"failed\"')",
        f"state = {pin}, digest = encode(sha256(convert_to({pin}, 'UTF8')), 'hex')",
    )
    for damage in damages:
        async with store.connection() as conn:
            await conn.execute(RESTORE_KEPT, kept)
            await conn.execute(f"UPDATE snapshots SET {damage}")
            await conn.commit()

        loaded, trips = await round_trips(store, reads.load(store, REGISTRY, "long-1"))
        cache = InstanceCache(store, RegistrySource(store, REGISTRY))
        cached, cache_trips = await round_trips(store, cache.load("long-1"))

        assert (trips, cache_trips) == (2, 2), damage
        assert (loaded.snapshot_sequence, loaded.events_read) == (0, len(events)), damage
        assert (cache.snapshots_read, cache.events_read) == (0, len(events)), damage
        assert loaded.state.digest == cached.digest == full.digest, damage


async def test_retention_removes_the_snapshot_with_its_instance(
    store: Store, clock: ManualClock, tmp_path: Path
) -> None:
    await written(store, "long-1")
    await written(store, "long-2", run_last=False)  # still running: kept
    clock.advance(timedelta(days=31))
    with retention.ExportFile(tmp_path / "export.jsonl") as export:
        done = await retention.prune(store, "", timedelta(days=30), export)
    assert done.removed == 1
    assert [i for i, _ in await snapshots_of(store)] == ["long-2"]


async def test_a_removed_id_started_again_never_opens_an_old_snapshot(
    store: Store, clock: ManualClock, tmp_path: Path
) -> None:
    await written(store, "long-1")
    clock.advance(timedelta(days=31))
    with retention.ExportFile(tmp_path / "export.jsonl") as export:
        await retention.prune(store, "", timedelta(days=30), export)
    short = long_history(LONG, "long-1", clock.now())[:1]
    await store.commit(short[0])
    loaded = await reads.load(store, REGISTRY, "long-1")
    assert (loaded.snapshot_sequence, loaded.state.sequence) == (0, short[0].committed_sequence)


def test_a_crossing_transition_has_its_snapshot_encoded_before_it_is_written() -> None:
    """The store encodes a snapshot before the transaction that writes it (where it
    checks transitions), into a copy of the crossing transition: the one given is left
    as it was, and every other transition is written as given."""
    transitions = long_history(LONG, "long-1", T0)

    ready = ready_to_write(transitions)

    for given, made in zip(transitions, ready, strict=True):
        assert given.snapshot is None
        if due(given.expected_sequence, given.committed_sequence):
            assert made is not given
            assert (made, made.fingerprint) == (given, given.fingerprint)
            assert given.state_after is not None
            assert made.snapshot == take(given.state_after)
        else:
            assert made is given
