"""Incident holds against a real PostgreSQL, with a real worker running beside them.

A held instance's work is never claimed (a control instance of another definition runs
to its end meanwhile); an attempt in flight when the hold is placed finishes and
records, and the step it hands on is parked; a start is accepted and parked; a timer
that falls due during the hold fires after it; releases by count and by rate let the
backlog go gradually, each exactly once, and every placement and release is kept with
who and why.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from engine import (
    ActivityRegistry,
    Client,
    DefinitionNotFound,
    HoldNotFound,
    HoldReleased,
    HoldScope,
    InputRefused,
    Queries,
    ReleaseMode,
    Worker,
    WorkerConfig,
)
from engine.decide.operator_actions import Action
from engine.model.instance import InstanceStatus
from engine.model.validation import parse_definition
from engine.store import holds, leases
from engine.store.clock import ManualClock
from engine.store.errors import StaleLease
from engine.store.rows import WorkState
from engine.store.store import Store
from tests.e2e.conftest import until
from tests.integration.factories import DEFINITION, open_store, seed_work, work_row

T0 = datetime(2031, 3, 4, 5, 6, 7, tzinfo=UTC)
LIMITS = {"input_limit": 1024, "result_limit": 1024}
RETRY = {"max_attempts": 3, "initial_delay": "1s", "max_delay": "1s"}


def order(name: str) -> Any:
    return parse_definition(
        {
            "name": name,
            "version": "1",
            "mode": "orchestration",
            "steps": [
                {"name": "reserve", "kind": "activity", "target": "hold.reserve",
                 "timeout": "30s", "retry": RETRY, **LIMITS},
                {"name": "cool", "kind": "timer", "timeout": "1s"},
                {"name": "ship", "kind": "activity", "target": "hold.ship", "timeout": "30s",
                 "retry": RETRY, **LIMITS},
            ],
        }
    )  # fmt: skip


HELD, OTHER = order("hold.order"), order("hold.other")


@dataclass
class Effects:
    """Every handler call, and a gate that keeps ``reserve`` in flight while a test wants."""

    calls: Counter[tuple[str, str]] = field(default_factory=Counter)
    entered: asyncio.Event = field(default_factory=asyncio.Event)
    gate: asyncio.Event = field(default_factory=asyncio.Event)

    def app(self) -> ActivityRegistry:
        app = ActivityRegistry()

        async def reserve(request: Any) -> dict:
            self.entered.set()
            await self.gate.wait()
            self.calls["reserve", request.instance_id] += 1
            return {"reserved": True}

        async def ship(request: Any) -> dict:
            self.calls["ship", request.instance_id] += 1
            return {"shipped": True}

        app.register("hold.reserve", reserve)
        app.register("hold.ship", ship)
        return app


@dataclass
class Running:
    client: Client
    queries: Queries
    effects: Effects

    def calls(self, instance_id: str) -> tuple[int, int]:
        """How many times reserve and ship ran for the instance."""
        calls = self.effects.calls
        return calls["reserve", instance_id], calls["ship", instance_id]

    async def status(self, instance_id: str) -> InstanceStatus:
        return (await self.client.inspect(instance_id)).status

    async def completed(self, *ids: str) -> None:
        async def done() -> bool:
            return all([await self.status(i) is InstanceStatus.COMPLETED for i in ids])

        await until(done, what=f"{', '.join(ids)} completed")

    async def parked(self, instance_id: str) -> bool:
        rows = await self.queries.instance_work(instance_id)
        return any(r.state is WorkState.HELD for r in rows)

    async def backlog(self, hold_id: str) -> int:
        hold = await self.queries.hold("", hold_id)
        assert hold is not None
        return hold.backlog


@pytest.fixture
async def running(db_store: Store) -> AsyncIterator[Running]:
    """A client, both definitions published, and a worker running beside them."""
    client, effects = Client(db_store), Effects()
    await client.publish(HELD)
    await client.publish(OTHER)
    config = WorkerConfig(worker_id="hold-worker", poll_interval=timedelta(milliseconds=50))
    stop = asyncio.Event()
    task = asyncio.create_task(Worker(db_store, effects.app(), config).run(stop))
    try:
        yield Running(client, Queries(db_store), effects)
    finally:
        effects.gate.set()
        stop.set()
        await task


async def hold_on(run: Running, name: str = HELD.name) -> str:
    hold = await run.client.place_hold(HoldScope("", name), "ann", "incident 7: payments down")
    return hold.hold_id


async def held_starts(running: Running, prefix: str, count: int) -> tuple[str, list[str]]:
    """A hold on HELD, then ``count`` starts of it (parked): the hold id and their ids."""
    running.effects.gate.set()
    hold_id = await hold_on(running)
    ids = [f"{prefix}-{n}" for n in range(count)]
    for instance_id in ids:
        await running.client.start(HELD.name, instance_id, {})
    return hold_id, ids


async def test_a_start_under_a_hold_is_accepted_parked_and_runs_once_after_release(
    running: Running,
) -> None:
    running.effects.gate.set()
    hold_id = await hold_on(running)
    await running.client.start(HELD.name, "held-1", {})
    await running.client.start(OTHER.name, "free-1", {})
    await running.completed("free-1")  # the worker ran meanwhile, and skipped held-1
    assert await running.parked("held-1")
    assert running.effects.calls["reserve", "held-1"] == 0
    assert await running.backlog(hold_id) == 1

    hold, resumed = await running.client.release_hold("", hold_id, "bob", "payments back")
    assert (hold.active, hold.backlog, resumed) == (False, 0, 1)
    await running.completed("held-1")
    assert running.calls("held-1") == (1, 1)


async def test_an_instance_migrated_off_a_held_version_runs_on_while_that_hold_stays(
    running: Running,
) -> None:
    """Its work stayed parked for the old version's hold, which no longer covered it:
    the instance stalled until that hold's release, while ``inspect`` and the hold's
    backlog said nothing held it."""
    running.effects.gate.set()
    client = running.client
    hold = await client.place_hold(HoldScope("", HELD.name, "1"), "ann", "bad v1")
    await client.start(HELD.name, "moved-1", {})
    assert await running.parked("moved-1")
    await client.publish(replace(HELD, version="2"), "ann")
    await client.declare_migration(HELD.name, "1", "2", "ann", "v2 fixes the incident")
    await client.migrate("moved-1", "2", "ann", "off the held version")
    await running.completed("moved-1")
    assert running.calls("moved-1") == (1, 1)
    assert (await running.queries.hold("", hold.hold_id)).active


async def test_an_attempt_in_flight_finishes_and_records_and_its_next_step_waits(
    running: Running,
) -> None:
    await running.client.start(HELD.name, "flying", {})
    await running.effects.entered.wait()  # reserve is leased and running
    hold_id = await hold_on(running)
    running.effects.gate.set()

    async def recorded() -> bool:
        state = await running.client.inspect("flying")
        return state.activities["reserve"].status.label == "succeeded"

    await until(recorded, what="reserve recorded under the hold")
    await until(lambda: running.parked("flying"), what="the timer parked")
    await running.client.start(OTHER.name, "free-2", {})
    await running.completed("free-2")
    assert running.effects.calls["ship", "flying"] == 0

    await running.client.release_hold("", hold_id, "bob", "all clear")
    await running.completed("flying")
    assert running.calls("flying") == (1, 1)


async def test_a_step_handed_on_into_a_hold_runs_after_it_and_is_not_in_doubt(
    running: Running,
) -> None:
    """The attempt a finishing one hands on by eager dispatch is started in the outcome's
    statement, whose work row the hold parks: no worker ever leased it. After the
    release its claim took it for a redelivery and recorded it unknown, so every
    instance in flight when the hold was placed waited for an operator to resolve a
    step that never ran."""
    direct = parse_definition(
        {
            "name": "hold.direct",
            "version": "1",
            "mode": "orchestration",
            "steps": [
                {"name": step, "kind": "activity", "target": f"hold.{step}", "timeout": "30s",
                 "retry": RETRY, **LIMITS}
                for step in ("reserve", "ship")
            ],
        }
    )  # fmt: skip
    await running.client.publish(direct)
    await running.client.start(direct.name, "handed", {})
    await running.effects.entered.wait()  # reserve is leased and running
    hold = await running.client.place_hold(HoldScope("", direct.name), "ann", "payments down")
    running.effects.gate.set()
    await until(lambda: running.parked("handed"), what="ship handed on and parked")

    await running.client.release_hold("", hold.hold_id, "bob", "all clear")
    await running.completed("handed")
    assert running.calls("handed") == (1, 1)


async def test_a_timer_due_during_the_hold_fires_after_it(running: Running) -> None:
    running.effects.gate.set()
    await running.client.start(HELD.name, "cooling", {})

    async def waiting_on_timer() -> Any:
        rows = await running.queries.instance_work("cooling")
        timers = [r for r in rows if r.state is WorkState.AVAILABLE and r.kind.name == "TIMER"]
        return timers[0] if timers else None

    timer = await until(waiting_on_timer, what="the timer written")
    hold_id = await hold_on(running)
    await until(lambda: running.queries.now() > timer.available_at, what="the timer due")
    await running.client.start(OTHER.name, "free-3", {})
    await running.completed("free-3")
    assert await running.parked("cooling")
    assert await running.status("cooling") is InstanceStatus.RUNNING

    await running.client.release_hold("", hold_id, "bob", "all clear")
    await running.completed("cooling")
    assert running.effects.calls["ship", "cooling"] == 1


async def test_release_by_count_lets_that_many_go_and_keeps_the_hold(running: Running) -> None:
    hold_id, ids = await held_starts(running, "batch", 3)
    assert await running.backlog(hold_id) == 3

    hold, resumed = await running.client.release_hold("", hold_id, "bob", "one first", count=1)
    assert (hold.active, hold.backlog, resumed) == (True, 2, 1)
    await running.completed(ids[0])  # the longest-waiting one
    assert all([await running.parked(i) for i in ids[1:]])

    hold, _ = await running.client.release_hold("", hold_id, "cy", "the rest", count=2)
    await running.completed(*ids)
    assert all(running.effects.calls["ship", i] == 1 for i in ids)
    assert [(r.mode, r.amount, r.actor, r.reason) for r in hold.releases] == [
        (ReleaseMode.COUNT, 1, "bob", "one first"),
        (ReleaseMode.COUNT, 2, "cy", "the rest"),
    ]
    assert (hold.actor, hold.reason, hold.active) == ("ann", "incident 7: payments down", True)


async def test_release_by_rate_drains_the_backlog_and_ends_the_hold(running: Running) -> None:
    hold_id, ids = await held_starts(running, "drip", 4)
    hold, resumed = await running.client.release_hold("", hold_id, "bob", "slowly", rate=4.0)
    assert (hold.active, hold.drain_rate, resumed) == (True, 4.0, 0)

    await running.completed(*ids)
    assert all(running.effects.calls["reserve", i] == 1 for i in ids)

    async def ended() -> Any:
        found = await running.queries.hold("", hold_id)
        return found if found and not found.active else None

    hold = await until(ended, what="the drained hold ended")
    assert hold.backlog == 0
    assert [(r.mode, r.amount) for r in hold.releases] == [(ReleaseMode.RATE, 4.0)]
    with pytest.raises(HoldReleased):
        await running.client.release_hold("", hold_id, "bob", "again")


async def test_a_released_hold_has_no_backlog_while_another_hold_keeps_the_work(
    running: Running,
) -> None:
    """Two operators held the same definition; once one hold was released, it still
    showed the instances the other one keeps parked as its backlog (``hold list``, the
    Holds page, the release's answer), as if releasing it had let nothing go."""
    running.effects.gate.set()
    first = await hold_on(running)
    second = await hold_on(running)
    await running.client.start(HELD.name, "twice", {})
    hold, resumed = await running.client.release_hold("", first, "bob", "mine is done")
    assert (hold.active, hold.backlog, resumed) == (False, 0, 0)
    assert await running.backlog(first) == 0
    assert await running.backlog(second) == 1
    assert await running.parked("twice")


async def test_holds_cover_a_version_or_a_team_and_belong_to_their_team(running: Running) -> None:
    client = running.client
    version = await client.place_hold(HoldScope("", HELD.name, "1"), "ann", "bad v1")
    team = await client.place_hold(HoldScope("red"), "ann", "red team incident")
    assert [h.hold_id for h in await running.queries.holds_covering("", HELD.name, "1")] == [
        version.hold_id
    ]
    assert await running.queries.holds_covering("", OTHER.name) == []
    assert [h.hold_id for h in await running.queries.holds_covering("red")] == [team.hold_id]
    with pytest.raises(HoldNotFound):  # another team's hold is not there for this one
        await client.release_hold("", team.hold_id, "bob", "not mine")
    for bad in ({"count": 0}, {"rate": 0.0}, {"count": 1, "rate": 1.0}, {"rate": 10_000.0}):
        with pytest.raises(InputRefused):
            await client.release_hold("", version.hold_id, "bob", "why", **bad)
    with pytest.raises(InputRefused):
        await client.place_hold(HoldScope("", HELD.name), "ann", "   ")


async def test_an_expired_lease_of_a_held_instance_is_parked_and_fenced(
    pg_dsn: str, schema: str
) -> None:
    """A dead worker's lease comes due under a hold: the claim parks the work (its old
    owner stays fenced out), and after the release it is claimed once, token bumped."""
    clock = ManualClock(T0)
    async with open_store(pg_dsn, schema, clock) as store:
        [work_id] = await seed_work(store, 1)
        [lease] = await leases.claim(store, "dead", timedelta(seconds=5), 1)
        await Client(store).publish(DEFINITION, "ann")  # a hold names a published definition
        hold = await Client(store).place_hold(HoldScope("", "lease-test"), "ann", "why")
        clock.advance(timedelta(seconds=6))
        assert await leases.claim(store, "live", timedelta(seconds=5), 10) == []
        row = await work_row(store, work_id)
        assert (row["state"], row["lease_token"], row["lease_owner"]) == (WorkState.HELD, 1, "")
        with pytest.raises(StaleLease):
            await leases.complete(store, lease)

        await Client(store).release_hold("", hold.hold_id, "bob", "back")
        [again] = await leases.claim(store, "live", timedelta(seconds=5), 10)
        assert (again.work_id, again.token, again.attempt) == (work_id, 2, 2)


async def test_work_a_claim_parked_while_its_hold_ended_is_made_due_by_the_next_sweep(
    pg_dsn: str, schema: str
) -> None:
    """A claim parks work by its statement's snapshot: one still open when the release
    that ends the hold commits parks the work after it, and nothing else would ever make
    it due (the instance stuck, as a drill once found). The worker's sweep
    (``holds.drain``) does, and the work is then claimed once, token bumped."""
    clock = ManualClock(T0)
    async with open_store(pg_dsn, schema, clock) as store:
        [work_id] = await seed_work(store, 1)
        await leases.claim(store, "dead", timedelta(seconds=5), 1)
        await Client(store).publish(DEFINITION, "ann")
        hold = await Client(store).place_hold(HoldScope("", "lease-test"), "ann", "why")
        async with await psycopg.AsyncConnection.connect(pg_dsn) as claimer:
            await claimer.execute(  # the claim's write of the dead lease, not yet committed
                f"UPDATE {schema}.work SET state = 2, lease_token = lease_token + 1, "
                "lease_owner = 'live' WHERE work_id = %s",
                [work_id],
            )
            await Client(store).release_hold("", hold.hold_id, "bob", "over")
            await claimer.commit()
        assert (await work_row(store, work_id))["state"] == WorkState.HELD
        ended = await Queries(store).hold("", hold.hold_id)
        assert ended is not None and not ended.active

        assert await holds.drain(store) == 1
        assert (await work_row(store, work_id))["state"] == WorkState.AVAILABLE
        clock.advance(timedelta(seconds=6))
        [again] = await leases.claim(store, "live", timedelta(seconds=5), 10)
        assert (again.work_id, again.token) == (work_id, 2)


async def test_an_instance_that_ends_under_the_hold_leaves_no_held_work(running: Running) -> None:
    hold_id, [instance_id] = await held_starts(running, "ended", 1)
    await running.client.command(instance_id, Action.TERMINATE, "ann", "not needed any more")
    assert not await running.parked(instance_id)
    assert await running.backlog(hold_id) == 0


async def test_claims_racing_a_hold_never_lease_held_work_once_it_is_placed(
    db_store: Store,
) -> None:
    """Claimers hand work back as fast as they claim it while a hold is placed and then
    released: no claim sent after the hold committed leases its work, and after the
    release every item is claimed again (nothing is lost), each claim one token on."""
    work_ids = set(await seed_work(db_store, 12))
    client, stop = Client(db_store), asyncio.Event()
    after_hold: list[str] = []
    held = asyncio.Event()

    async def claimer(n: int) -> None:
        while not stop.is_set():
            sent_after_hold = held.is_set()
            for lease in await leases.claim(db_store, f"racer-{n}", timedelta(seconds=5), 3):
                if sent_after_hold:
                    after_hold.append(lease.work_id)
                await leases.retry_at(db_store, lease, db_store.now(), "handed-back")
            await asyncio.sleep(0)

    await client.publish(DEFINITION, "ann")
    racers = [asyncio.create_task(claimer(n)) for n in range(4)]
    hold = await client.place_hold(HoldScope("", "lease-test"), "ann", "race")
    held.set()

    async def all_parked() -> bool:
        rows = [await work_row(db_store, w) for w in work_ids]
        return all(r["state"] == WorkState.HELD for r in rows)

    await until(all_parked, what="every item parked")
    assert after_hold == []
    tokens = {w: (await work_row(db_store, w))["lease_token"] for w in work_ids}
    await client.release_hold("", hold.hold_id, "bob", "go")
    held.clear()

    async def all_claimed_again() -> bool:
        rows = {w: await work_row(db_store, w) for w in work_ids}
        return all(r["lease_token"] > tokens[w] for w, r in rows.items())

    await until(all_claimed_again, what="every item claimed after the release")
    stop.set()
    await asyncio.gather(*racers)


async def test_a_hold_on_a_name_or_version_never_published_is_refused(store: Store) -> None:
    client = Client(store)
    await client.publish(DEFINITION, "ann")
    with pytest.raises(DefinitionNotFound, match="no version of lease-tset is published"):
        await client.place_hold(HoldScope("", "lease-tset"), "ann", "typo")
    with pytest.raises(DefinitionNotFound, match="lease-test@9 is not published"):
        await client.place_hold(HoldScope("", "lease-test", "9"), "ann", "typo")
    with pytest.raises(DefinitionNotFound):  # another team's view: not published there
        await client.place_hold(HoldScope("blue", "lease-test"), "ann", "typo")
    assert await Queries(store).holds("") == []


async def test_a_session_naming_the_schema_writes_work_and_held_work_stays_parked(
    pg_dsn: str, schema: str, running: Running
) -> None:
    """A repair from psql names tables with their schema and sets no search_path: the
    hold trigger still finds the holds and parks the held instance's claim."""
    await held_starts(running, "repair", 1)
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as repair:
        await repair.execute("SET search_path TO pg_catalog")
        await repair.execute(
            f"UPDATE {schema}.work SET state = 2, lease_token = lease_token + 1, "
            "lease_owner = 'psql' WHERE instance_id = 'repair-0'"
        )
    assert await running.parked("repair-0")


async def test_a_session_naming_the_schema_writes_leased_work_while_nothing_is_held(
    pg_dsn: str, schema: str, db_store: Store
) -> None:
    """With no hold active, a repair with no usable search_path writes work as it asked,
    leased: the hold trigger's check for an active hold still finds its schema's holds
    (migration 0026), where it once failed every write to work."""
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as repair:
        await repair.execute("SET search_path TO pg_catalog")
        await repair.execute(
            f"INSERT INTO {schema}.work (work_id, kind, instance_id, sequence, available_at,"
            " deadline, state, lease_owner, lease_expires_at, lease_token)"
            " VALUES ('repair#w', 1, 'repair', 1, now(), now() + interval '1 hour', 2,"
            " 'psql', now() + interval '1 minute', 1)"
        )
        cursor = await repair.execute(
            f"SELECT state, lease_owner FROM {schema}.work WHERE work_id = 'repair#w'"
        )
        assert await cursor.fetchone() == (WorkState.LEASED, "psql")
