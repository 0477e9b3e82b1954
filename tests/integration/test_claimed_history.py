"""A claim brings a short history with it, so a new instance's first step needs no read;
a history that is outdated by the time it is used costs a read, never a wrong write."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from engine.model.instance import AttemptStatus, InstanceStatus
from engine.store import leases, reads
from engine.store.store import Store
from engine.worker.activities import ActivityRegistry
from engine.worker.instance_cache import RegistrySource
from engine.worker.leased_commits import Context, LeaseHolder
from engine.worker.loop import process
from tests.integration.transition_builders import catalog

CATALOG = catalog()
LEASE = timedelta(seconds=30)


@pytest.fixture
def store(db_store: Store) -> Store:
    return db_store  # leases are taken on the database's clock: a manual one would not do


async def test_a_claim_brings_a_short_history_and_not_a_long_one(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = datetime.now(UTC)  # claims compare with the database's clock
    for name in ("short", "long"):
        await store.commit(CATALOG.flow(CATALOG.single, name).start(at=now))

    [short] = await leases.claim(store, "w", LEASE, 1)
    stored = [event async for event in reads.export_history(store, short.instance_id)]
    assert short.events == tuple(stored) and len(stored) == 2

    monkeypatch.setattr(leases, "CLAIM_HISTORY_EVENTS", 1)
    [long] = await leases.claim(store, "w", LEASE, 1)
    assert long.instance_id != short.instance_id and long.events == ()


async def test_a_step_started_from_an_outdated_claimed_history_is_still_right(
    store: Store,
) -> None:
    """Both branches of a parallel step are claimed at once; when the second runs, the
    history its claim brought is behind the first branch's commits."""
    ran: list[str] = []
    activities = ActivityRegistry()
    for step in ("x", "y"):
        activities.register(f"test.{step}", lambda request: ran.append(request.step))
    ctx = Context(store, activities, RegistrySource(store, CATALOG.registry))
    flow = CATALOG.flow(CATALOG.pair, "pair-1")
    await store.commit(flow.start(at=datetime.now(UTC)))
    claimed = await leases.claim(store, "w", LEASE, 2)
    assert [len(lease.events) for lease in claimed] == [3, 3]

    for lease in claimed:
        await process(ctx, LeaseHolder(lease, LEASE))

    state = await flow.load(store)
    assert sorted(ran) == ["x", "y"]
    assert state.status is InstanceStatus.COMPLETED
    assert {s: p.status for s, p in state.activities.items()} == {
        "x": AttemptStatus.SUCCEEDED,
        "y": AttemptStatus.SUCCEEDED,
    }
