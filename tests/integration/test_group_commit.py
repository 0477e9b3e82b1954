"""Group commit against a real PostgreSQL: commits that wait share one transaction, and
a member that fails takes nobody down with it."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg import sql

from engine.decide.operator_actions import Action
from engine.model.instance import AttemptStatus, Instance
from engine.model.transitions import Transition
from engine.store import batches, leases
from engine.store.commits import CommitResult
from engine.store.errors import Reconciliation, SequenceConflict, StaleLease
from engine.store.group_commit import CommitGroup
from engine.store.leases import LeaseFence
from engine.store.store import Store
from tests.integration.test_commits import HOLD_INSTANCE, until_queued
from tests.integration.transition_builders import BASE_TIME, Flow, catalog

CATALOG = catalog()
LEASE = timedelta(seconds=30)
SHARED_XACTS = "SELECT count(DISTINCT xact_id) FROM transitions WHERE transition_id = ANY(%s)"
MEMBERS = 5


@pytest.fixture
def store(default_store: Store) -> Store:
    return default_store


async def started(
    store: Store, prefix: str, count: int, at: datetime = BASE_TIME
) -> list[tuple[Flow, Instance]]:
    """``count`` started instances of the one-activity definition, with their states."""
    flows = [CATALOG.flow(CATALOG.single, f"{prefix}-{k}") for k in range(count)]
    for flow in flows:
        await store.commit(flow.start(at=at))
    return [(flow, await flow.load(store)) for flow in flows]


async def transactions_of(aconn: psycopg.AsyncConnection, transitions: list[Transition]) -> int:
    ids = [t.transition_id for t in transitions]
    return (await (await aconn.execute(SHARED_XACTS, [ids])).fetchone())[0]


async def test_commits_that_arrive_together_share_one_transaction(
    store: Store, aconn: psycopg.AsyncConnection
) -> None:
    flows = await started(store, "share", MEMBERS)
    transitions = [flow.attempt_started(state, "a") for flow, state in flows]
    group = CommitGroup(store, lanes=1)

    results = await asyncio.gather(*(group.commit_all([t]) for t in transitions))

    assert [c.results for c in results] == [[CommitResult(t.transition_id)] for t in transitions]
    assert await transactions_of(aconn, transitions) == 1
    for flow, _ in flows:
        assert (await flow.load(store)).activities["a"].status is AttemptStatus.RUNNING


async def test_a_group_of_single_statements_is_sent_as_one_message(
    store: Store, aconn: psycopg.AsyncConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under load a worker's round trips cost more than its statements: a group whose
    members are each one statement reaches the server in one message, then its COMMIT."""
    flows = await started(store, "message", MEMBERS)
    transitions = [flow.attempt_started(state, "a") for flow, state in flows]
    messages = []
    send = batches.send

    async def counted(conn: psycopg.AsyncConnection, calls: list) -> list:
        messages.append([values["id"] for _, values in calls])
        return await send(conn, calls)

    monkeypatch.setattr(batches, "send", counted)
    group = CommitGroup(store, lanes=1)

    await asyncio.gather(*(group.commit_all([t]) for t in transitions))

    assert messages == [[t.transition_id for t in transitions]]
    assert await transactions_of(aconn, transitions) == 1


async def test_a_session_that_lost_its_prepared_statements_still_commits(
    pg_dsn: str, schema: str, aconn: psycopg.AsyncConnection
) -> None:
    """psycopg deallocates a session's prepared statements (after a rollback): a group
    that finds its statement gone ran nothing, so each member commits on its own, and
    the next group prepares again and is one transaction again."""
    store = await Store.open(pg_dsn, schema, max_size=1)  # every group uses this session
    try:
        flows = await started(store, "vanished", 6)
        group = CommitGroup(store, lanes=1)
        first = [flow.attempt_started(state, "a") for flow, state in flows[:2]]
        await asyncio.gather(*(group.commit_all([t]) for t in first))
        async with store.connection() as conn:
            await conn.execute("DEALLOCATE ALL")
            await conn.commit()
        lost = [flow.attempt_started(state, "a") for flow, state in flows[2:4]]
        again = [flow.attempt_started(state, "a") for flow, state in flows[4:]]

        results = await asyncio.gather(*(group.commit_all([t]) for t in lost))
        assert [c.results for c in results] == [[CommitResult(t.transition_id)] for t in lost]
        assert await transactions_of(aconn, lost) == len(lost)  # each on its own
        await asyncio.gather(*(group.commit_all([t]) for t in again))
        assert await transactions_of(aconn, again) == 1
    finally:
        await store.close()


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(stale=st.sets(st.integers(0, MEMBERS - 1)))
async def test_a_member_that_conflicts_fails_alone(
    store: Store, aconn: psycopg.AsyncConnection, stale: set[int]
) -> None:
    """Whichever members were decided on a position that has moved on get their own
    SequenceConflict; every other member of the group commits."""
    flows = await started(store, f"conflict-{uuid.uuid4().hex[:8]}", MEMBERS)
    for k in stale:
        flow, state = flows[k]
        await store.commit(flow.command(state, f"pause-{k}", Action.PAUSE))
    transitions = [flow.attempt_started(state, "a") for flow, state in flows]

    group = CommitGroup(store, lanes=1)

    outcomes = await asyncio.gather(
        *(group.commit_all([t]) for t in transitions), return_exceptions=True
    )

    for k, (transition, outcome) in enumerate(zip(transitions, outcomes, strict=True)):
        if k in stale:
            assert isinstance(outcome, SequenceConflict), outcome
            verdict = await store.reconcile(
                transition.instance_id, transition.transition_id, transition.fingerprint
            )
            assert verdict is Reconciliation.MISSING
        else:
            assert outcome.results == [CommitResult(transition.transition_id)]


async def test_a_member_whose_lease_is_lost_fails_alone(
    store: Store, aconn: psycopg.AsyncConnection
) -> None:
    """A stale owner's member is rejected by its own fence; the group's others commit."""
    now = datetime.now(UTC)  # leases are taken on the database's clock: work must be due
    flows = await started(store, "fenced", MEMBERS, at=now)
    claimed = {lease.instance_id: lease for lease in await leases.claim(store, "w", LEASE, MEMBERS)}
    fences = [LeaseFence(claimed[flow.instance_id], finish=False) for flow, _ in flows]
    fences[2] = replace(fences[2], lease=replace(fences[2].lease, token=fences[2].lease.token + 1))
    transitions = [flow.attempt_started(state, "a", at=now) for flow, state in flows]
    group = CommitGroup(store, lanes=1)

    outcomes = await asyncio.gather(
        *(group.commit_all([t], f) for t, f in zip(transitions, fences, strict=True)),
        return_exceptions=True,
    )

    assert isinstance(outcomes[2], StaleLease)
    assert (await flows[2][0].load(store)).activities["a"].status is AttemptStatus.READY
    others = [t for k, t in enumerate(transitions) if k != 2]
    assert [o.results for k, o in enumerate(outcomes) if k != 2] == [
        [CommitResult(t.transition_id)] for t in others
    ]
    # the group was rolled back and each member committed again on its own
    assert await transactions_of(aconn, others) == len(others)


async def test_a_member_cancelled_while_it_waits_writes_nothing(
    store: Store, pg_dsn: str, schema: str, aconn: psycopg.AsyncConnection
) -> None:
    """A processor cancelled (its lease lost) before its group starts leaves no trace,
    while the group ahead of it, held up by a lock, still commits."""
    (first, first_state), (second, second_state) = await started(store, "cancel", 2)
    ahead = first.attempt_started(first_state, "a")
    behind = second.attempt_started(second_state, "a")
    group = CommitGroup(store, lanes=1)
    async with await psycopg.AsyncConnection.connect(pg_dsn) as holder:
        await holder.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        await holder.execute(HOLD_INSTANCE, {"id": first.instance_id})
        writing = asyncio.ensure_future(group.commit_all([ahead]))
        await until_queued(aconn, holder.info.backend_pid, [writing])
        waiting = asyncio.ensure_future(group.commit_all([behind]))
        await asyncio.sleep(0)  # let it join the queue behind the group being written
        waiting.cancel()
        await holder.rollback()

    assert (await writing).results == [CommitResult(ahead.transition_id)]
    with pytest.raises(asyncio.CancelledError):
        await waiting
    await group.close()
    verdict = await store.reconcile(behind.instance_id, behind.transition_id, behind.fingerprint)
    assert verdict is Reconciliation.MISSING


@pytest.mark.parametrize("turns", range(6))
async def test_a_commit_made_as_the_last_writer_finishes_is_still_written(
    store: Store, turns: int
) -> None:
    """However many event-loop turns pass between a commit's answer and the next commit,
    the next one gets a writer. A commit nobody writes stalls its instance for good: its
    processor waits and the worker keeps renewing its lease. (With the writer counted
    until its task's done-callback ran, two turns, a task awaited by its caller, lost it.)"""
    (first_flow, first), (second_flow, second) = await started(store, f"last-{turns}", 2)
    group = CommitGroup(store, lanes=1)
    await asyncio.ensure_future(group.commit_all([first_flow.attempt_started(first, "a")]))
    for _ in range(turns):
        await asyncio.sleep(0)

    commit = group.commit_all([second_flow.attempt_started(second, "a")])

    assert len((await asyncio.wait_for(commit, timeout=10)).results) == 1
