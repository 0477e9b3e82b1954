"""Offers against a real PostgreSQL: a start's NOTIFY hands its first step to an idle
worker, whose write records the attempt's start and leases the work in one statement,
or writes nothing when anyone else was first."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from engine.api.client import Client
from engine.decide.audit import Action
from engine.model.events import Event, EventKind
from engine.model.holds import HoldScope
from engine.model.instance import InstanceStatus
from engine.model.limits import MAX_WORKER_POLL_INTERVAL
from engine.model.validation import parse_definition
from engine.replay.fold import replay
from engine.store import holds, leases, offers, reads
from engine.store.errors import StaleLease
from engine.store.leases import LeaseFence
from engine.store.store import Store
from engine.worker.activities import ActivityRegistry
from engine.worker.loop import Worker, WorkerConfig
from tests.integration.test_fenced_writes import (
    LEASE,
    REGISTRY,
    TWO_STEPS,
    a_succeeds_and_b_starts,
    work_rows,
)
from tests.integration.transition_builders import Flow


@pytest.fixture
def store(db_store: Store) -> Store:
    return db_store  # offers are taken on the database's clock: a manual one would not do


async def started_with_offer(
    store: Store, aconn: psycopg.AsyncConnection, instance_id: str
) -> tuple[Flow, str]:
    """Start an instance of ``TWO_STEPS`` and return its NOTIFY's payload."""
    await aconn.execute(f'LISTEN "{store.channel}"')
    flow = Flow(REGISTRY, TWO_STEPS, instance_id)
    await store.commit(flow.start(at=datetime.now(UTC)))
    notice = await anext(aconn.notifies(timeout=20))
    return flow, notice.payload


def offered(payload: str, owner: str) -> leases.Lease:
    lease = leases.offered(payload, owner, LEASE, datetime.now(UTC))
    assert lease is not None and leases.untaken(lease)
    return lease


async def history(store: Store, instance_id: str) -> list[Event]:
    return list((await reads.history_page(store, instance_id)).events)


async def history_kinds(store: Store, flow: Flow) -> list[EventKind]:
    return [e.kind for e in await history(store, flow.instance_id)]


async def test_the_write_that_starts_the_attempt_takes_the_offered_lease(
    store: Store, aconn: psycopg.AsyncConnection
) -> None:
    flow, payload = await started_with_offer(store, aconn, "offer-1")
    lease = offered(payload, "worker-1")
    state = replay(REGISTRY, lease.events)
    assert state == await flow.load(store)  # the payload is the instance as it was written

    await leases.commit(
        store,
        [flow.attempt_started(state, "a", at=datetime.now(UTC))],
        LeaseFence(lease, finish=False),
    )
    leased = (2, "worker-1", 1, 1, lease.expires_at)
    assert (await work_rows(aconn, "offer-1"))["a"] == leased
    assert (await history_kinds(store, flow))[-1] is EventKind.ATTEMPT_STARTED

    leases.confirm(lease)  # as the worker does once the write committed: held from now
    assert not leases.untaken(lease)
    outcome, next_id = await a_succeeds_and_b_starts(store, flow)
    await leases.commit(store, [outcome], LeaseFence(lease, lease_next=next_id))
    rows = await work_rows(aconn, "offer-1")
    assert rows["a"][:2] == (3, "") and rows["b"][:3] == (2, "worker-1", 1)


async def test_an_offer_another_worker_claimed_first_writes_nothing(
    store: Store, aconn: psycopg.AsyncConnection
) -> None:
    flow, payload = await started_with_offer(store, aconn, "offer-2")
    [claimed] = await leases.claim(store, "worker-2", LEASE, 1)
    lease = offered(payload, "worker-1")
    started = flow.attempt_started(replay(REGISTRY, lease.events), "a", at=datetime.now(UTC))
    with pytest.raises(StaleLease):
        await leases.commit(store, [started], LeaseFence(lease, finish=False))
    assert (await work_rows(aconn, "offer-2"))["a"][:3] == (2, "worker-2", claimed.token)
    assert len(await history_kinds(store, flow)) == 2


async def test_an_offer_taken_once_is_not_taken_again(
    store: Store, aconn: psycopg.AsyncConnection
) -> None:
    flow, payload = await started_with_offer(store, aconn, "offer-3")
    first, second = offered(payload, "worker-1"), offered(payload, "worker-2")
    started = flow.attempt_started(replay(REGISTRY, first.events), "a", at=datetime.now(UTC))
    await leases.commit(store, [started], LeaseFence(first, finish=False))
    with pytest.raises(StaleLease):  # the same transition: the ledger has it
        await leases.commit(store, [started], LeaseFence(second, finish=False))
    assert (await work_rows(aconn, "offer-3"))["a"][:3] == (2, "worker-1", 1)
    assert (await history_kinds(store, flow)).count(EventKind.ATTEMPT_STARTED) == 1


async def test_an_offer_never_taken_acts_on_nothing_of_its_workers_own_claim(
    store: Store, aconn: psycopg.AsyncConnection
) -> None:
    """A failover lost the write that took the offer; the same worker then claimed the
    work on the promoted server, which leases it under the same owner and token. The
    processor of the offer holds nothing: it must not keep the claim's lease alive (it
    would then run the attempt the claim's processor started), nor release, finish or
    dead-letter the claim's work."""
    _, payload = await started_with_offer(store, aconn, "offer-7")
    lease = offered(payload, "worker-1")
    [claimed] = await leases.claim(store, "worker-1", LEASE, 1)
    assert (claimed.owner, claimed.token) == (lease.owner, lease.token)
    leased = await work_rows(aconn, "offer-7")
    for write in (
        leases.renew(store, lease, LEASE * 2),
        leases.retry_at(store, lease, datetime.now(UTC), "not-yet-due"),
        leases.complete(store, lease),
        leases.dead_letter(store, lease, "poison"),
    ):
        with pytest.raises(StaleLease, match="never took it"):
            await write
    assert await work_rows(aconn, "offer-7") == leased


async def test_an_offer_of_an_instance_that_moved_on_writes_nothing(
    store: Store, aconn: psycopg.AsyncConnection
) -> None:
    """An operator paused the instance after its start: its work stays due (a claim
    would park it), but an attempt built on the state the offer carried is late."""
    flow, payload = await started_with_offer(store, aconn, "offer-4")
    lease = offered(payload, "worker-1")
    offered_state = replay(REGISTRY, lease.events)
    await store.commit(flow.command(offered_state, "pause-1", Action.PAUSE, at=datetime.now(UTC)))
    with pytest.raises(StaleLease):
        await leases.commit(
            store,
            [flow.attempt_started(offered_state, "a", at=datetime.now(UTC))],
            LeaseFence(lease, finish=False),
        )
    assert (await work_rows(aconn, "offer-4"))["a"][:4] == (1, "", 0, 0)
    assert EventKind.ATTEMPT_STARTED not in await history_kinds(store, flow)


async def test_only_a_write_that_starts_the_work_takes_an_offer(
    store: Store, aconn: psycopg.AsyncConnection
) -> None:
    flow, payload = await started_with_offer(store, aconn, "offer-5")
    lease = offered(payload, "worker-1")
    started = flow.attempt_started(replay(REGISTRY, lease.events), "a", at=datetime.now(UTC))
    for fence in (LeaseFence(lease, finish=True), LeaseFence(lease, finish=False, lease_next="x")):
        with pytest.raises(StaleLease, match="only a transition that starts the work"):
            await leases.commit(store, [started], fence)
    with pytest.raises(StaleLease, match="only a transition that starts the work"):
        await leases.commit(store, [], LeaseFence(lease, finish=True))
    assert (await work_rows(aconn, "offer-5"))["a"][:4] == (1, "", 0, 0)


async def test_a_hold_parks_the_offered_work_and_nothing_is_written(
    store: Store, aconn: psycopg.AsyncConnection
) -> None:
    flow, payload = await started_with_offer(store, aconn, "offer-6")
    await holds.place(store, HoldScope("", TWO_STEPS.name), "ann", "incident 9")
    lease = offered(payload, "worker-1")
    started = flow.attempt_started(replay(REGISTRY, lease.events), "a", at=datetime.now(UTC))
    with pytest.raises(StaleLease):
        await leases.commit(store, [started], LeaseFence(lease, finish=False))
    state, owner = (await work_rows(aconn, "offer-6"))["a"][:2]
    assert (state, owner) == (5, "")  # parked, as a claim of held work leaves it
    assert len(await history_kinds(store, flow)) == 2


def test_a_start_offers_only_an_activity_it_can_say_in_a_payload() -> None:
    flow = Flow(REGISTRY, TWO_STEPS, "offer-7")
    start = flow.start(at=datetime.now(UTC))
    history, work = "[]", "[]"
    assert offers.payload(start, "", history, work).startswith("{")
    assert offers.payload(start, "", "[" + " " * offers.MAX_OFFER_BYTES + "]", work) == ""
    later = flow.attempt_started(flow.after(start), "a", at=datetime.now(UTC))
    assert offers.payload(later, "", history, work) == ""
    nothing = {"tenant": "", "history": [], "work": []}
    odd = {"tenant": "", "history": [[["instance_id", "x"]]], "work": [[["work_id", "w"]]]}
    for text in ("", "offer-7", "{", "[]", json.dumps(nothing), json.dumps(odd)):
        assert leases.offered(text, "worker-1", LEASE, datetime.now(UTC)) is None


ONE_STEP = parse_definition(
    {
        "name": "test.offered",
        "version": "1",
        "mode": "orchestration",
        "steps": [
            {"name": step, "kind": "activity", "target": "test.offered", "timeout": "10s"}
            | {"input_limit": 1000, "result_limit": 1000}
            for step in ("a", "b", "c")
        ],
    }
)


async def ready(aconn: psycopg.AsyncConnection, store: Store, workers: list[Worker]) -> None:
    """Until every worker LISTENs for the store's new work (their first NOTIFY would
    otherwise go unheard) and has made its first claim (a claim under way when a start
    commits may take its work before the offer does)."""
    listen = f"LISTEN {store.channel}"
    query = "SELECT count(*) FROM pg_stat_activity WHERE query = %s AND state = 'idle'"
    while (await (await aconn.execute(query, [listen])).fetchone())[0] < len(workers) or any(
        not w.metrics.registry.get_sample_value("wayline_claim_seconds_count") for w in workers
    ):
        await asyncio.sleep(0.01)


@contextlib.asynccontextmanager
async def running(store: Store, *names: str) -> AsyncIterator[list[Worker]]:
    app = ActivityRegistry()
    app.register("test.offered", lambda request: request.step)
    idle = MAX_WORKER_POLL_INTERVAL  # no poll meanwhile: a worker claims when woken
    workers = [Worker(store, app, WorkerConfig(worker_id=n, poll_interval=idle)) for n in names]
    stop = asyncio.Event()
    tasks = [asyncio.create_task(w.run(stop)) for w in workers]
    try:
        yield workers
    finally:
        stop.set()
        await asyncio.gather(*tasks)


async def run_instances(client: Client, store: Store, count: int) -> None:
    """Start ``count`` instances of ``ONE_STEP`` one after the other, each run to its
    end with every step's attempt started once."""
    for k in range(count):
        await client.start(ONE_STEP.name, f"offered-{k}")
        ended = await client.wait(f"offered-{k}", timedelta(seconds=30))
        assert ended.status is InstanceStatus.COMPLETED
        events = await history(store, f"offered-{k}")
        starts = [e.step for e in events if e.kind is EventKind.ATTEMPT_STARTED]
        assert starts == ["a", "b", "c"]


async def test_an_idle_worker_runs_each_started_instance_on_its_offer(
    store: Store, aconn: psycopg.AsyncConnection
) -> None:
    client = Client(store)
    await client.publish(ONE_STEP, "tester")
    async with running(store, "offers-1") as workers:
        await ready(aconn, store, workers)
        await run_instances(client, store, 4)
    [counts] = [w.metrics.counts() for w in workers]
    assert (counts["offered"], counts["offers_missed"], counts["claimed"]) == (4, 0, 0)


async def test_two_idle_workers_lease_each_first_step_once(
    store: Store, aconn: psycopg.AsyncConnection
) -> None:
    """Both hear each start: one takes its offer, the other's write finds it taken (or
    the other's claim was first), and every step runs once."""
    client = Client(store)
    await client.publish(ONE_STEP, "tester")
    async with running(store, "offers-1", "offers-2") as workers:
        await ready(aconn, store, workers)
        await run_instances(client, store, 4)
    counts = [w.metrics.counts() for w in workers]
    taken = sum(c["offered"] - c["offers_missed"] for c in counts)
    assert taken + sum(c["claimed"] for c in counts) == 4
    assert taken > 0
