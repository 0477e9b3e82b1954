"""Lease-fenced transitions written as one set statement (``FENCED_SET``) against a real
PostgreSQL: each member gets what its own ``FENCED_WRITE`` would have given it."""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace
from datetime import UTC, datetime

import psycopg
import pytest

from engine.model.instance import AttemptStatus, InstanceStatus
from engine.model.transitions import Transition
from engine.store import commits, leases
from engine.store.leases import LeaseFence
from engine.store.statements import transitions as transition_sql
from engine.store.store import Store
from tests.integration.test_fenced_writes import (
    LEASE,
    a_succeeds_and_b_starts,
    running_a,
    work_rows,
)
from tests.integration.transition_builders import Flow

INSTANCE_ROW = (
    "SELECT status, sequence, archived_at IS NOT NULL FROM instances WHERE instance_id = %s"
)
OPEN_WORK = """
INSERT INTO work (work_id, kind, instance_id, sequence, available_at, deadline)
SELECT %(id)s, 2, %(instance)s, 1, now() + interval '1 hour', now() + interval '2 hours'
"""
STATE_OF = "SELECT state, failure_code FROM work WHERE work_id = %s"
EXPLAIN_EVERY_STATEMENT = (
    "LOAD 'auto_explain'",
    "SET auto_explain.log_min_duration = 0",
    "SET auto_explain.log_level = notice",
)
PLAN_ROUNDS = 8
"""Past PostgreSQL's five custom plans of a prepared statement: the generic one shows."""


@pytest.fixture
def store(db_store: Store) -> Store:
    return db_store  # leases are taken on the database's clock


async def outcomes(store: Store, count: int, prefix: str) -> list[tuple[Flow, leases.Lease]]:
    return [await running_a(store, f"{prefix}-{k}") for k in range(count)]


def clean(row: tuple | None) -> bool:
    """The member's transition was written now (not a replay, the instance moved)."""
    return row is not None and row[1] is None and row[transition_sql.WRITE_COLUMNS - 2] == 1


async def write_set(
    store: Store, commits_: list[tuple[Transition, LeaseFence]]
) -> list[tuple | None]:
    async with store.connection() as conn:
        return await run_set(conn, store, commits_)


async def run_set(
    conn: psycopg.AsyncConnection, store: Store, commits_: list[tuple[Transition, LeaseFence]]
) -> list[tuple | None]:
    """The members' rows of one message on ``conn``, then COMMIT: what the members that
    were written wrote becomes durable (a member that was not written wrote nothing)."""
    now = store.clock.sql_now()
    members = [
        {**commits.write_of(t, store.channel, store.ended_channel).params, **f.params(now)}
        for t, f in commits_
    ]
    await conn.set_autocommit(True)
    rows = await leases.write_set(conn, members)
    await conn.execute("COMMIT")
    return rows


async def test_each_member_finishes_its_lease_and_leases_its_next_activity_on(
    store: Store, aconn: psycopg.AsyncConnection
) -> None:
    running = await outcomes(store, 4, "set")
    commits_, next_ids = [], []
    for flow, lease in running:
        outcome, next_id = await a_succeeds_and_b_starts(store, flow)
        commits_.append((outcome, LeaseFence(lease, lease_next=next_id, lease_for=LEASE)))
        next_ids.append(next_id)

    rows = await write_set(store, commits_)

    for (flow, lease), row, next_id in zip(running, rows, next_ids, strict=True):
        assert clean(row), row
        rows_of = await work_rows(aconn, flow.instance_id)
        assert rows_of["a"][:4] == (3, "", lease.token, 1)
        state, owner, token, attempts, expires = rows_of["b"]
        assert (state, owner, token, attempts) == (2, lease.owner, 1, 1)
        next_lease = leases._lease(row[transition_sql.WRITE_COLUMNS :])
        assert (next_lease.work_id, next_lease.token, next_lease.expires_at) == (
            next_id,
            1,
            expires,
        )
        loaded = await flow.load(store)
        assert loaded.activities["b"].status is AttemptStatus.RUNNING


async def test_a_member_without_its_lease_gets_no_row_and_writes_nothing(
    store: Store, aconn: psycopg.AsyncConnection
) -> None:
    running = await outcomes(store, 3, "stale")
    commits_ = []
    for k, (flow, lease) in enumerate(running):
        outcome, next_id = await a_succeeds_and_b_starts(store, flow)
        held = lease if k != 1 else replace(lease, token=lease.token + 1)
        commits_.append((outcome, LeaseFence(held, lease_next=next_id)))
    before = await work_rows(aconn, running[1][0].instance_id)

    rows = await write_set(store, commits_)

    assert rows[1] is None
    assert clean(rows[0]) and clean(rows[2])
    assert await work_rows(aconn, running[1][0].instance_id) == before
    assert (await running[1][0].load(store)).activities["a"].status is AttemptStatus.RUNNING


async def test_two_members_of_one_instance_never_share_a_statement(
    store: Store, aconn: psycopg.AsyncConnection
) -> None:
    """Both were decided at one position. In one statement both would pass the
    position check and write the same history positions (a unique violation that
    fails the whole group); in turn, the first writes and the second finds its lease
    finished, as it would alone, and nothing is written twice."""
    [(flow, lease)] = await outcomes(store, 1, "twice")
    first, next_id = await a_succeeds_and_b_starts(store, flow)
    second = replace(first, transition_id=first.transition_id + "-again")
    fence = LeaseFence(lease, lease_next=next_id)

    rows = await write_set(store, [(first, fence), (second, LeaseFence(lease))])

    assert clean(rows[0])
    assert rows[1] is None  # the first member finished the lease the second relied on
    assert (await flow.load(store)).sequence == first.committed_sequence
    ledger = "SELECT count(*) FROM transitions WHERE transition_id = %s"
    assert (await (await aconn.execute(ledger, [second.transition_id])).fetchone())[0] == 0


async def test_a_member_that_ends_its_instance_retires_its_open_work_and_archives_it(
    store: Store, aconn: psycopg.AsyncConnection
) -> None:
    flow, lease = await running_a(store, "ending")
    outcome, _ = await a_succeeds_and_b_starts(store, flow)
    await leases.commit(store, [outcome], LeaseFence(lease))
    [lease_b] = await leases.claim(store, "worker-1", LEASE, 1)
    await aconn.execute(OPEN_WORK, {"id": "stray", "instance": "ending"})
    state = await flow.load(store)
    ended = flow.attempt_succeeded(state, "b", at=datetime.now(UTC))
    assert ended.terminal and not ended.work

    [row] = await write_set(store, [(ended, LeaseFence(lease_b))])

    assert clean(row)
    assert await (await aconn.execute(STATE_OF, ["stray"])).fetchone() == (3, "instance-ended")
    status, sequence, archived = await (await aconn.execute(INSTANCE_ROW, ["ending"])).fetchone()
    assert (status, sequence, archived) == (
        int(InstanceStatus.COMPLETED),
        ended.committed_sequence,
        True,
    )


async def test_new_work_that_is_not_handed_on_is_announced(
    store: Store, aconn: psycopg.AsyncConnection
) -> None:
    [(flow, lease)] = await outcomes(store, 1, "announce")
    outcome, _ = await a_succeeds_and_b_starts(store, flow)
    listener = await psycopg.AsyncConnection.connect(aconn.info.dsn, autocommit=True)
    try:
        await listener.execute(f'LISTEN "{store.channel}"')
        notifies = listener.notifies()

        await write_set(store, [(outcome, LeaseFence(lease))])

        notice = await asyncio.wait_for(anext(notifies), timeout=10)
        assert notice.channel == store.channel
    finally:
        await listener.close()


async def test_only_a_member_that_ends_its_instance_announces_it_by_its_id(
    store: Store, aconn: psycopg.AsyncConnection
) -> None:
    """``Client.wait`` listens on the end channel: the set statement that writes an end
    tells it which instance ended, and a member that does not end one sends nothing."""
    flow, lease = await running_a(store, "to-end")
    outcome, _ = await a_succeeds_and_b_starts(store, flow)
    await leases.commit(store, [outcome], LeaseFence(lease))
    [lease_b] = await leases.claim(store, "worker-1", LEASE, 1)
    ended = flow.attempt_succeeded(await flow.load(store), "b", at=datetime.now(UTC))
    [(going, lease_a)] = await outcomes(store, 1, "going-on")
    goes_on, next_id = await a_succeeds_and_b_starts(store, going)
    async with await psycopg.AsyncConnection.connect(aconn.info.dsn, autocommit=True) as listener:
        await listener.execute(f'LISTEN "{store.ended_channel}"')

        rows = await write_set(
            store,
            [(goes_on, LeaseFence(lease_a, lease_next=next_id)), (ended, LeaseFence(lease_b))],
        )
        await aconn.execute("SELECT pg_notify(%s, 'marker')", [store.ended_channel])

        payloads = [n.payload async for n in listener.notifies(timeout=10, stop_after=2)]
    assert all(clean(row) for row in rows)
    assert payloads == ["to-end", "marker"]


async def test_the_set_statement_finds_its_rows_by_key_even_in_small_tables(
    store: Store,
) -> None:
    """A scan of the work or instances table at every step would grow with the
    deployment; the plans a session settles on (custom ones first, then the generic
    one) probe the keys' indexes, even while the tables are small enough for a scan to
    look cheap."""
    plans: list[str] = []
    async with store.connection() as conn:
        conn.add_notice_handler(lambda notice: plans.append(notice.message_primary or ""))
        for statement in EXPLAIN_EVERY_STATEMENT:
            await conn.execute(statement)
        await conn.commit()
        for k in range(PLAN_ROUNDS):
            members = []
            for flow, lease in await outcomes(store, 2, f"plan-{k}"):
                outcome, next_id = await a_succeeds_and_b_starts(store, flow)
                members.append((outcome, LeaseFence(lease, lease_next=next_id)))
            assert all(clean(row) for row in await run_set(conn, store, members))
    set_plans = [plan for plan in plans if "json_to_recordset" in plan]
    assert len(set_plans) == PLAN_ROUNDS
    for plan in set_plans:
        assert not re.search(r"Seq Scan on (work|instances|transitions|history)\b", plan), plan
