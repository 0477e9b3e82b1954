"""A lease-fenced transition against a real PostgreSQL: one statement writes the outcome,
finishes the lease and leases the next activity on, and writes nothing without the
lease."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from psycopg import sql

from engine.decide import decisions
from engine.decide.operator_actions import Action
from engine.model.events import EventKind
from engine.model.instance import AttemptStatus
from engine.model.registry import Registry
from engine.model.transitions import Draft, Transition, WorkKind
from engine.model.validation import parse_definition
from engine.modes import decide
from engine.store import leases
from engine.store.errors import SequenceConflict, StaleLease
from engine.store.leases import LeaseFence
from engine.store.store import Store
from tests.integration.transition_builders import RETRY, Flow

TWO_STEPS = parse_definition(
    {
        "name": "test.two",
        "version": "1",
        "mode": "orchestration",
        "steps": [
            {"name": step, "kind": "activity", "target": f"test.{step}", "timeout": "10s"}
            | {"input_limit": 1000, "result_limit": 1000, "retry": RETRY}
            for step in ("a", "b")
        ],
    }
)
REGISTRY = Registry([TWO_STEPS])
LEASE = timedelta(seconds=30)
WORK_ROWS = """
SELECT payload, state, lease_owner, lease_token, attempts, lease_expires_at
FROM work WHERE instance_id = %s ORDER BY sequence
"""


@pytest.fixture
def store(db_store: Store) -> Store:
    return db_store  # leases are taken on the database's clock: a manual one would not do


async def running_a(store: Store, instance_id: str) -> tuple[Flow, leases.Lease]:
    """An instance whose step ``a`` is started under a worker's lease (as a processor
    leaves it before running the handler)."""
    now = datetime.now(UTC)  # leases are taken on the database's clock: work must be due
    flow = Flow(REGISTRY, TWO_STEPS, instance_id)
    await store.commit(flow.start(at=now))
    [lease] = await leases.claim(store, "worker-1", LEASE, 1)
    started = flow.attempt_started(await flow.load(store), "a", at=now)
    await leases.commit(store, [started], LeaseFence(lease, finish=False))
    return flow, lease


async def a_succeeds_and_b_starts(store: Store, flow: Flow) -> tuple[Transition, str]:
    """The outcome of ``a`` with ``b``'s attempt start riding along (eager dispatch)."""
    draft = Draft(REGISTRY, await flow.load(store), datetime.now(UTC))
    decisions.record_outcome(draft, "a", 1, EventKind.ATTEMPT_SUCCEEDED)
    decide(draft)
    [next_work] = [w for w in draft.work if w.kind is WorkKind.ACTIVITY]
    decisions.start_activity_attempt(draft, "b", 1, decisions.attempt_key(flow.instance_id, "b", 1))
    return draft.build(), next_work.work_id


async def work_rows(aconn: psycopg.AsyncConnection, instance_id: str) -> dict[str, tuple]:
    rows = await (await aconn.execute(WORK_ROWS, [instance_id])).fetchall()
    return {json.loads(bytes(payload))["step"]: tuple(rest) for payload, *rest in rows}


async def test_an_outcome_finishes_its_lease_and_leases_the_next_activity_as_it_writes_it(
    store: Store, aconn: psycopg.AsyncConnection
) -> None:
    flow, lease = await running_a(store, "two-1")
    outcome, next_id = await a_succeeds_and_b_starts(store, flow)
    fence = LeaseFence(lease, finish=True, lease_next=next_id, lease_for=LEASE)

    committed = await leases.commit(store, [outcome], fence)

    rows = await work_rows(aconn, "two-1")
    assert rows["a"][:4] == (3, "", lease.token, 1)  # completed, nobody's any more
    state, owner, token, attempts, expires = rows["b"]
    assert (state, owner, token, attempts) == (2, "worker-1", 1, 1)  # as a claim leaves it
    assert committed.next_lease is not None
    assert (committed.next_lease.work_id, committed.next_lease.token) == (next_id, 1)
    assert committed.next_lease.expires_at == expires
    assert await leases.claim(store, "worker-2", LEASE, 10) == []  # b is not up for grabs
    state = await flow.load(store)
    assert state.activities["a"].status is AttemptStatus.SUCCEEDED
    assert state.activities["b"].status is AttemptStatus.RUNNING


async def test_an_outcome_under_a_lost_lease_writes_nothing(
    store: Store, aconn: psycopg.AsyncConnection
) -> None:
    flow, lease = await running_a(store, "two-2")
    outcome, next_id = await a_succeeds_and_b_starts(store, flow)
    before = await work_rows(aconn, "two-2")
    stale = replace(lease, token=lease.token + 1)

    with pytest.raises(StaleLease):
        await leases.commit(store, [outcome], LeaseFence(stale, lease_next=next_id))

    assert await work_rows(aconn, "two-2") == before  # a still leased, no row for b
    ledger = "SELECT count(*) FROM transitions WHERE transition_id = %s"
    assert (await (await aconn.execute(ledger, [outcome.transition_id])).fetchone())[0] == 0
    assert (await flow.load(store)).activities["a"].status is AttemptStatus.RUNNING


async def wake_ups(
    listener: psycopg.AsyncConnection, sender: psycopg.AsyncConnection, channel: str
) -> int:
    """How many work notifications arrived before a marker sent now (notifications
    arrive in commit order, so everything committed earlier comes first)."""
    await sender.execute("SELECT pg_notify(%s, 'marker')", [channel])
    count = 0
    async for notice in listener.notifies(timeout=10):
        if notice.payload == "marker":
            return count
        count += 1
    raise AssertionError("the marker never arrived")


async def test_work_handed_on_by_the_fence_wakes_no_other_worker(
    store: Store, pg_dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    """Eager dispatch leases the new work to its own worker in the same transaction, so
    waking the others would only cost them a claim that finds nothing."""
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as listener:
        await listener.execute(
            sql.SQL("SET search_path TO {}").format(sql.Identifier(store.schema))
        )
        await listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(store.channel)))
        for instance, handed_on, wakes in (("quiet", True, 0), ("loud", False, 1)):
            flow, lease = await running_a(store, instance)
            outcome, next_id = await a_succeeds_and_b_starts(store, flow)
            fence = LeaseFence(lease, lease_next=next_id if handed_on else "")
            await wake_ups(listener, aconn, store.channel)  # those of the set-up

            await leases.commit(store, [outcome], fence)

            assert await wake_ups(listener, aconn, store.channel) == wakes, instance


APP_ROWS = "SELECT note FROM app_notes ORDER BY note"


async def app_notes(aconn: psycopg.AsyncConnection) -> list[str]:
    return [note for (note,) in await (await aconn.execute(APP_ROWS)).fetchall()]


def noting(note: str, transitions: list[Transition], fail: Exception | None = None):
    """A ``commit_built`` body that writes an application row, then gives ``transitions``
    (or raises ``fail``): an advance's writes and its new state."""

    async def build(conn: psycopg.AsyncConnection) -> list[Transition]:
        await conn.execute("INSERT INTO app_notes (note) VALUES (%s)", [note])
        if fail is not None:
            raise fail
        return transitions

    return build


@pytest.fixture
async def notes_table(aconn: psycopg.AsyncConnection) -> None:
    await aconn.execute("CREATE TABLE app_notes (note text PRIMARY KEY)")


@pytest.mark.usefixtures("notes_table")
async def test_what_a_built_commit_writes_commits_with_its_transition(
    store: Store, aconn: psycopg.AsyncConnection
) -> None:
    flow, lease = await running_a(store, "built-1")
    outcome, _ = await a_succeeds_and_b_starts(store, flow)

    committed = await leases.commit_built(
        store, LeaseFence(lease), noting("kept", [outcome]), "advance"
    )

    assert [r.transition_id for r in committed.results] == [outcome.transition_id]
    assert await app_notes(aconn) == ["kept"]
    assert (await work_rows(aconn, "built-1"))["a"][0] == 3  # the lease was completed


@pytest.mark.usefixtures("notes_table")
@pytest.mark.parametrize("case", ["stale lease", "moved instance", "failed body"])
async def test_a_built_commit_that_fails_takes_its_writes_with_it(
    store: Store, aconn: psycopg.AsyncConnection, case: str
) -> None:
    """A lost lease, a conflicting transition or the body's own failure: the body's
    writes roll back with the transition, so they exist exactly when it committed."""
    instance = f"built-{case.replace(' ', '-')}"
    flow, lease = await running_a(store, instance)
    outcome, _ = await a_succeeds_and_b_starts(store, flow)
    fence, body = LeaseFence(lease), noting("lost", [outcome])
    expected: type[Exception] = StaleLease
    if case == "stale lease":
        fence = LeaseFence(replace(lease, token=lease.token + 1))
    elif case == "moved instance":
        moved = flow.command(await flow.load(store), "moved", Action.PAUSE, datetime.now(UTC))
        await store.commit(moved)
        expected = SequenceConflict
    else:
        body, expected = noting("lost", [outcome], ValueError("advance failed")), ValueError

    with pytest.raises(expected):
        await leases.commit_built(store, fence, body, "advance")

    assert await app_notes(aconn) == []
    assert (await work_rows(aconn, instance))["a"][0] == 2  # still leased
    assert (await flow.load(store)).activities["a"].status is AttemptStatus.RUNNING
