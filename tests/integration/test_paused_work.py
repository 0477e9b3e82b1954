"""Work of a paused instance, claimed by a real processor on PostgreSQL.

A processor that claims work of a paused instance pushes it back (``PARK_FOR``);
resuming re-arms parked work at once. But a resume that commits after the processor
read the instance paused finds the row still leased and passes over it: the park must
then leave the work due now, or the resumed instance would wait an hour with nothing
saying why. The resume is made to land in exactly that gap through the store's
``lease_writes`` seam, just before the park is sent; and, at the store, while the park
runs (it waits for the resume's transaction and then sees it).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from engine.api.client import Client
from engine.decide.audit import Action
from engine.model.instance import InstanceStatus
from engine.store import leases, reads
from engine.store.clock import ManualClock
from engine.store.rows import WorkState
from engine.store.seams import LeaseWrites, Row, StoreHooks
from engine.store.statements import leases as sql
from engine.store.store import Store
from engine.worker.activities import ActivityRegistry
from engine.worker.instance_cache import RegistrySource
from engine.worker.leased_commits import PARK_FOR, Context
from tests.integration.factories import REGISTRY, run_due, seed_work, work_row

T0 = datetime(2031, 6, 7, 8, 0, tzinfo=UTC)


class ResumeBeforePark(StoreHooks):
    """Commits a resume of ``instance`` just before the first park is sent."""

    def __init__(self) -> None:
        self.client: Client | None = None
        self.instance = ""

    async def lease_writes(self, sent: LeaseWrites) -> Sequence[Row | None]:
        parks = any(write.statement == sql.PARK_LEASE for write in sent.writes)
        if parks and self.client is not None:
            client, self.client = self.client, None
            await client.command(self.instance, Action.RESUME, "olive", "looked")
        return await sent.send()


@pytest.fixture
async def hooked(pg_dsn: str, schema: str) -> AsyncIterator[tuple[Store, ResumeBeforePark]]:
    hooks = ResumeBeforePark()
    store = await Store.open(pg_dsn, schema, clock=ManualClock(T0), hooks=hooks)
    try:
        yield store, hooks
    finally:
        await store.close()


def client_of(store: Store) -> Client:
    return Client(store, RegistrySource(store, REGISTRY))


def context(store: Store, calls: list[str]) -> Context:
    activities = ActivityRegistry()
    activities.register("pay.charge", lambda request: calls.append(request.instance_id))
    return Context(store, activities, RegistrySource(store, REGISTRY))


async def paused_instance(store: Store, client: Client) -> tuple[str, str]:
    """A started instance (its one activity due) that an operator paused: its id and
    its work's id."""
    [work_id] = await seed_work(store, 1)
    instance_id = work_id.split("#", 1)[0]
    await client.command(instance_id, Action.PAUSE, "olive", "look first")
    return instance_id, work_id


async def test_work_of_a_paused_instance_is_pushed_back(
    hooked: tuple[Store, ResumeBeforePark],
) -> None:
    store, _ = hooked
    calls: list[str] = []
    _instance_id, work_id = await paused_instance(store, client_of(store))

    assert await run_due(context(store, calls)) == 1
    row = await work_row(store, work_id)
    assert (row["state"], row["available_at"]) == (WorkState.AVAILABLE, T0 + PARK_FOR)
    assert calls == []


async def test_a_resume_between_the_read_and_the_park_leaves_the_work_due_now(
    hooked: tuple[Store, ResumeBeforePark],
) -> None:
    store, hooks = hooked
    calls: list[str] = []
    client = client_of(store)
    instance_id, _work_id = await paused_instance(store, client)
    hooks.client, hooks.instance = client, instance_id

    ctx = context(store, calls)
    await run_due(ctx)  # parks after the resume committed: due now, so claimed again

    assert calls == [instance_id]
    state = await reads.inspect(store, REGISTRY, instance_id)
    assert state.status is InstanceStatus.COMPLETED
    assert hooks.client is None  # the resume did land between the read and the park


async def test_a_park_waits_for_a_resume_in_flight_and_then_sees_it(
    pg_dsn: str, schema: str
) -> None:
    """The park locks the instance's row for share: a transition that holds it (here an
    update of the row standing for a resume's) is waited for, and its sequence read."""
    store = await Store.open(pg_dsn, schema, clock=ManualClock(T0))
    try:
        _, work_id = await paused_instance(store, client_of(store))
        [lease] = await leases.claim(store, "worker", timedelta(seconds=30), 1)
        seen = (await reads.inspect(store, REGISTRY, lease.instance_id)).sequence
        async with await psycopg.AsyncConnection.connect(pg_dsn) as resuming:
            await resuming.execute(
                f"UPDATE {schema}.instances SET sequence = sequence + 1 WHERE instance_id = %s",
                [lease.instance_id],
            )
            park = asyncio.create_task(leases.park(store, lease, T0 + PARK_FOR, "paused", seen))
            blocked = asyncio.create_task(_blocked_by(pg_dsn, resuming))
            await asyncio.wait({park, blocked}, return_when=asyncio.FIRST_COMPLETED)
            assert blocked.done() and not park.done()  # the park waits for the resume
            await resuming.commit()
        await park
        row = await work_row(store, work_id)
        assert (row["state"], row["available_at"]) == (WorkState.AVAILABLE, T0)
    finally:
        await store.close()


async def _blocked_by(dsn: str, holder: psycopg.AsyncConnection) -> None:
    """Returns once a backend waits on a lock ``holder`` holds (the park, behind the
    open update)."""
    waiting = "SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))"
    pid = holder.info.backend_pid
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as watch:
        while not (await (await watch.execute(waiting, [pid])).fetchone())[0]:
            await asyncio.sleep(0.01)
