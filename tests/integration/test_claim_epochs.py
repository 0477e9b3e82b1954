"""A claim commits without waiting for its WAL flush, so a crash can lose it; the
store's epoch keeps its stale holder from ever writing (``engine.store.leases``,
"Claims and the store's epoch"), against a real PostgreSQL.

A crash is simulated here as PostgreSQL's recovery leaves it: the claim's row back as
it was before the claim (its WAL was never flushed) and the epoch table emptied (crash
recovery empties unlogged tables). That recovery really empties the table, and a clean
restart keeps it, is checked on a private cluster at the end.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from engine.api.client import Client
from engine.model.instance import AttemptStatus, InstanceStatus
from engine.store import leases
from engine.store.embedded import EmbeddedPostgres
from engine.store.errors import StaleLease
from engine.store.leases import LeaseFence
from engine.store.migrations import apply_migrations
from engine.store.store import Store
from engine.worker.activities import ActivityRegistry, ActivityRequest
from engine.worker.instance_cache import RegistrySource
from engine.worker.leased_commits import Context
from tests.integration.factories import run_due
from tests.integration.test_fenced_sets import write_set
from tests.integration.test_fenced_writes import LEASE, REGISTRY, TWO_STEPS, running_a
from tests.integration.test_work_leases import claim_one, execute
from tests.integration.transition_builders import Flow

EPOCH = "SELECT epoch::text FROM store_epoch"
LOSE_THE_CLAIM = """
UPDATE work SET state = 1, lease_token = lease_token - 1, attempts = attempts - 1,
    lease_owner = '', lease_expires_at = NULL
WHERE work_id = %(work_id)s
"""
"""What a crash does to a claim whose WAL was not flushed: the row is as before it."""
RECOVER = "DELETE FROM store_epoch"
"""What crash recovery does to the epoch table (the next claim makes a new epoch)."""
NEW_EPOCH = "INSERT INTO store_epoch DEFAULT VALUES"


@pytest.fixture
def store(db_store: Store) -> Store:
    return db_store  # leases are taken on the database's clock


async def test_a_claim_is_pending_in_the_stores_epoch_until_a_commit_under_it(
    store: Store,
) -> None:
    flow = Flow(REGISTRY, TWO_STEPS, "epoch-1")
    await store.commit(flow.start(at=datetime.now(UTC)))
    lease = await claim_one(store)
    [(epoch,)] = await execute(store, EPOCH)
    assert lease.pending is not None and lease.pending.epoch == epoch
    assert not lease.pending.durable

    renewed = await leases.renew(store, lease, LEASE)
    leases.confirm(renewed)
    assert lease.pending.durable  # every copy of the lease shares its confirmation


async def test_after_a_crash_lost_a_claim_its_holder_cannot_write_under_it_even_when_its_owner_claims_it_again(  # noqa: E501
    store: Store,
) -> None:
    flow = Flow(REGISTRY, TWO_STEPS, "epoch-2")
    await store.commit(flow.start(at=datetime.now(UTC)))
    stale = await claim_one(store)
    await execute(store, LOSE_THE_CLAIM, {"work_id": stale.work_id})
    await execute(store, RECOVER)

    fresh = await claim_one(store)  # the same owner, the same work: the same token again
    assert (fresh.owner, fresh.token) == (stale.owner, stale.token)
    assert stale.pending and fresh.pending and fresh.pending.epoch != stale.pending.epoch
    started = flow.attempt_started(await flow.load(store), "a", at=datetime.now(UTC))
    for write in (
        leases.renew(store, stale, LEASE),
        leases.complete(store, stale),
        leases.retry_at(store, stale, stale.deadline - LEASE, "retry"),
        leases.dead_letter(store, stale, "poison"),
        leases.commit(store, [started], LeaseFence(stale, finish=False)),
    ):
        with pytest.raises(StaleLease):
            await write
    assert await write_set(store, [(started, LeaseFence(stale, finish=False))]) == [None]

    await leases.commit(store, [started], LeaseFence(fresh, finish=False))
    state = await flow.load(store)
    assert state.activities["a"].attempt == 1  # written once, by the fresh holder


async def test_a_lease_made_durable_by_its_first_commit_outlives_a_new_epoch(
    store: Store,
) -> None:
    """Precision: once a synchronous commit under the lease succeeded, the claim is on
    disk, so a crash after it must not cost the holder the outcome it is about to write."""
    flow, lease = await running_a(store, "epoch-3")
    leases.confirm(lease)
    await execute(store, RECOVER)
    await execute(store, NEW_EPOCH)

    now = datetime.now(UTC)
    outcome = flow.attempt_succeeded(await flow.load(store), "a", {"ok": True}, at=now)
    await leases.commit(store, [outcome], LeaseFence(lease))
    assert (await flow.load(store)).activities["a"].status is AttemptStatus.SUCCEEDED


async def test_a_worker_writes_the_outcome_of_a_step_it_started_across_a_new_epoch(
    store: Store, pg_dsn: str, schema: str
) -> None:
    """The worker confirms its lease with its first commit (the attempt's start): a
    crash while the handler runs, with the server keeping the lease, does not turn the
    step's known outcome into a lost lease (and later an unknown one)."""

    def recovered_meanwhile(request: ActivityRequest) -> dict[str, bool]:
        with psycopg.connect(pg_dsn, options=f"-c search_path={schema}") as conn:
            conn.execute(RECOVER)
            conn.execute(NEW_EPOCH)
        return {"ok": True}

    app = ActivityRegistry()
    app.register("test.a", recovered_meanwhile)
    app.register("test.b", lambda request: {"ok": True})
    client = Client(store)
    await client.publish(TWO_STEPS, "tests")
    await client.start("test.two", "epoch-4", {}, "1")

    await run_due(Context(store, app, RegistrySource(store)))

    state = await client.inspect("epoch-4")
    assert state.status is InstanceStatus.COMPLETED
    assert [p.status for p in state.activities.values()] == [AttemptStatus.SUCCEEDED] * 2


# A real crash -----------------------------------------------------------------------------


def test_crash_recovery_empties_the_epoch_and_a_clean_restart_keeps_it(
    cluster: EmbeddedPostgres,
) -> None:
    def epoch() -> list[Any]:
        with psycopg.connect(cluster.start(), options="-c search_path=wayline") as conn:
            return conn.execute(EPOCH).fetchall()

    apply_migrations(cluster.start(), "wayline")
    [made] = epoch()  # a new store's epoch is made with its tables (migration 0032)
    cluster.stop()
    assert epoch() == [made]  # a clean shutdown flushed every commit, claims included
    cluster.kill()
    assert epoch() == []  # a crash may have lost claims: their epoch is gone
