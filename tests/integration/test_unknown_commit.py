"""A COMMIT whose answer is lost: the store settles it truthfully, or says it cannot.

Invariants 8 to 10 of the reference's section d: a failure of COMMIT itself is never
reported as not committed when it did commit (nor as committed when it did not); when
the outcome cannot be settled the caller gets CommitUnknown, and reconciliation later
tells the truth; retrying a transition that reconciled missing converges.

The store's pool connects through ``DrillProxy``, which loses the COMMIT on the wire
(see its module docstring); the truth is read on a direct connection (``aconn``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import psycopg
import pytest
from psycopg import sql

from engine.model.transitions import Transition
from engine.store.commits import CommitResult
from engine.store.errors import CommitOutcome, CommitUnknown, Reconciliation, StoreError
from engine.store.group_commit import CommitGroup
from engine.store.store import Store
from tests.integration.transition_builders import catalog, ledger, rows_of
from verification.proxy import Cut, DrillProxy

CATALOG = catalog()
SETTLEMENT_WAIT_SECONDS = 0.5
"""How long settlement may wait for a connection during an outage (the pool's default
is much longer; the outcome is the same, only slower)."""
ANSWER_WAIT_SECONDS = 10.0

TRUTH = {
    Cut.SEVER_AFTER_COMMIT: Reconciliation.COMMITTED,
    Cut.SEVER_BEFORE_COMMIT: Reconciliation.MISSING,
}


@pytest.fixture
async def proxy(pg_dsn: str) -> AsyncIterator[DrillProxy]:
    async with DrillProxy(pg_dsn) as running:
        yield running


@pytest.fixture
async def store(proxy: DrillProxy, schema: str) -> AsyncIterator[Store]:
    """A store whose every connection, settlement included, goes through the proxy."""
    opened = await Store.open(proxy.conninfo(), schema)
    yield opened
    await opened.close()


WAYS = {"alone": "E", "together": "Q", "group": "Q"}
"""How a commit reaches the server, and the message the proxy cuts: one transition
alone is written by one statement in autocommit (its Execute is the commit), two
together are a transaction ended by psycopg's COMMIT (a simple query), and so are two
members of a group commit, whose statements went in one message before it."""


@dataclass
class Pending:
    """Started instances (committed normally) and their next transitions (not yet)."""

    starts: list[Transition]
    steps: list[Transition]

    async def check_rows(self, aconn: psycopg.AsyncConnection, truth: Reconciliation) -> None:
        for start, step in zip(self.starts, self.steps, strict=True):
            kept = (start, step) if truth is Reconciliation.COMMITTED else (start,)
            assert (await ledger(aconn, step.instance_id)).rows == rows_of(*kept)

    async def verdicts(self, store: Store) -> set[Reconciliation]:
        return {
            await store.reconcile(s.instance_id, s.transition_id, s.fingerprint) for s in self.steps
        }


async def pending(store: Store, name: str, way: str) -> Pending:
    starts, steps = [], []
    for k in range(1 if way == "alone" else 2):
        flow = CATALOG.flow(CATALOG.pair, f"{name}-{k}")
        start = flow.start({"order": name})
        await store.commit(start)
        starts.append(start)
        steps.append(flow.attempt_started(flow.after(start), "x"))
    return Pending(starts, steps)


async def commit(store: Store, work: Pending, way: str) -> list[CommitResult]:
    """Commit the pending steps the way named (see ``WAYS``)."""
    if way != "group":
        return await store.commit_all(work.steps)
    group = CommitGroup(store, lanes=1)
    answers = await asyncio.gather(*(group.commit_all([step]) for step in work.steps))
    return [result for answer in answers for result in answer.results]


@pytest.mark.parametrize("way", WAYS)
async def test_a_commit_whose_reply_is_lost_is_settled_as_committed(
    proxy: DrillProxy, store: Store, aconn: psycopg.AsyncConnection, way: str
) -> None:
    work = await pending(store, f"lost-reply-{way}", way)
    proxy.arm(Cut.SEVER_AFTER_COMMIT)

    results = await commit(store, work, way)

    assert proxy.intercepted == [WAYS[way]]
    assert not any(r.replayed for r in results)
    assert await work.verdicts(store) == {Reconciliation.COMMITTED}
    await work.check_rows(aconn, Reconciliation.COMMITTED)
    assert all(r.replayed for r in await store.commit_all(work.steps))


@pytest.mark.parametrize("way", WAYS)
async def test_a_commit_lost_before_the_server_is_reported_not_committed(
    proxy: DrillProxy, store: Store, aconn: psycopg.AsyncConnection, way: str
) -> None:
    work = await pending(store, f"lost-commit-{way}", way)
    proxy.arm(Cut.SEVER_BEFORE_COMMIT)

    with pytest.raises(StoreError) as caught:
        await commit(store, work, way)

    assert proxy.intercepted == [WAYS[way]]
    # settled (the transaction aborted) or honestly unknown; never success
    assert caught.value.outcome in (CommitOutcome.NOT_COMMITTED, CommitOutcome.UNKNOWN)
    assert (caught.value.outcome is CommitOutcome.UNKNOWN) == isinstance(
        caught.value, CommitUnknown
    )
    assert await work.verdicts(store) == {Reconciliation.MISSING}
    await work.check_rows(aconn, Reconciliation.MISSING)
    assert not any(r.replayed for r in await store.commit_all(work.steps))  # converges
    await work.check_rows(aconn, Reconciliation.COMMITTED)


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("cut", list(Cut), ids=lambda c: c.value)
async def test_an_unsettleable_commit_is_unknown_until_reconciled(
    proxy: DrillProxy,
    store: Store,
    aconn: psycopg.AsyncConnection,
    pg_dsn: str,
    cut: Cut,
    way: str,
) -> None:
    work = await pending(store, f"outage-{cut.value}-{way}", way)
    patient = store.pool.timeout
    store.pool.timeout = SETTLEMENT_WAIT_SECONDS
    proxy.arm(cut, outage=True)

    with pytest.raises(CommitUnknown) as caught:
        await commit(store, work, way)

    assert caught.value.outcome is CommitOutcome.UNKNOWN
    assert isinstance(caught.value.__cause__, psycopg.Error)
    assert pg_dsn not in str(caught.value) and "server closed" not in str(caught.value)
    if cut is Cut.SEVER_AFTER_COMMIT:  # the server has the COMMIT; wait until it has answered
        assert await proxy.settled(ANSWER_WAIT_SECONDS)
    truth = TRUTH[cut]
    await work.check_rows(aconn, truth)

    proxy.restore()
    store.pool.timeout = patient
    assert await work.verdicts(store) == {truth}
    retried = await store.commit_all(work.steps)
    assert all(r.replayed is (truth is Reconciliation.COMMITTED) for r in retried)
    await work.check_rows(aconn, Reconciliation.COMMITTED)


@pytest.mark.parametrize("cut", list(Cut), ids=lambda c: c.value)
@pytest.mark.parametrize("protocol", ["simple", "extended"])
async def test_the_proxy_recognises_commit_in_both_protocols(
    proxy: DrillProxy, aconn: psycopg.AsyncConnection, schema: str, cut: Cut, protocol: str
) -> None:
    """The tool itself: a COMMIT as 'Q' or as Parse/Bind/Execute is cut as armed."""
    await aconn.execute("CREATE TABLE marks (mark text)")
    async with await psycopg.AsyncConnection.connect(proxy.conninfo()) as conn:
        await conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        await conn.execute("INSERT INTO marks VALUES ('written')")
        proxy.arm(cut, "write")  # any transaction that wrote: this one is not the engine's
        with pytest.raises(psycopg.OperationalError):
            if protocol == "simple":
                await conn.commit()
            else:  # a binary cursor makes psycopg use the extended protocol
                await conn.cursor(binary=True).execute("COMMIT")
    assert proxy.intercepted == ["Q" if protocol == "simple" else "E"]
    if cut is Cut.SEVER_AFTER_COMMIT:
        assert await proxy.settled(ANSWER_WAIT_SECONDS)
    marks = await (await aconn.execute("SELECT count(*) FROM marks")).fetchone()
    # BEFORE: the aborted transaction may still be ending; its rows are invisible either way
    assert marks[0] == (1 if cut is Cut.SEVER_AFTER_COMMIT else 0)
