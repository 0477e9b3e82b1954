"""A COMMIT whose answer is lost: the store settles it truthfully, or says it cannot.

Invariants 8 to 10 of the reference's section d: a failure of COMMIT itself is never
reported as not committed when it did commit (nor as committed when it did not); when
the outcome cannot be settled the caller gets CommitUnknown, and reconciliation later
tells the truth; retrying a transition that reconciled missing converges.

The store's pool connects through ``CommitProxy``, which loses the COMMIT on the wire
(see its module docstring); the truth is read on a direct connection (``aconn``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import psycopg
import pytest
from psycopg import sql

from engine.store.errors import CommitOutcome, CommitUnknown, Reconciliation, StoreError
from engine.store.store import Store
from engine.transitions import Transition
from tests.integration.commit_proxy import CommitProxy, Cut
from tests.integration.transition_builders import catalog, ledger, rows_of

CATALOG = catalog()
SETTLEMENT_WAIT_SECONDS = 0.5
"""How long settlement may wait for a connection during an outage (the pool's default
is much longer; the outcome is the same, only slower)."""
ANSWER_WAIT_SECONDS = 10.0

TRUTH = {Cut.AFTER_COMMIT: Reconciliation.COMMITTED, Cut.BEFORE_COMMIT: Reconciliation.MISSING}


@pytest.fixture
async def proxy(pg_dsn: str) -> AsyncIterator[CommitProxy]:
    async with CommitProxy.running(pg_dsn) as running:
        yield running


@pytest.fixture
async def store(proxy: CommitProxy, schema: str) -> AsyncIterator[Store]:
    """A store whose every connection, settlement included, goes through the proxy."""
    opened = await Store.open(proxy.conninfo(), schema)
    yield opened
    await opened.close()


async def started_instance(store: Store, instance_id: str) -> tuple[Transition, Transition]:
    """Commit a start normally; return it and the next transition (not committed)."""
    flow = CATALOG.flow(CATALOG.pair, instance_id)
    start = flow.start({"order": instance_id})
    await store.commit(start)
    return start, flow.attempt_started(flow.after(start), "x")


def expected_rows(truth: Reconciliation, *transitions: Transition) -> tuple[object, object]:
    """History and work rows: all of ``transitions``, or all but the last when missing."""
    kept = transitions if truth is Reconciliation.COMMITTED else transitions[:-1]
    return rows_of(*kept)


async def test_a_commit_whose_reply_is_lost_is_settled_as_committed(
    proxy: CommitProxy, store: Store, aconn: psycopg.AsyncConnection
) -> None:
    start, step = await started_instance(store, "lost-reply")
    proxy.arm(Cut.AFTER_COMMIT)

    result = await store.commit(step)

    assert proxy.intercepted == ["Q"]  # psycopg's commit() is a simple query
    assert not result.replayed
    verdict = await store.reconcile(step.transition_id, step.fingerprint)
    assert verdict is Reconciliation.COMMITTED
    assert (await ledger(aconn, step.instance_id)).rows == rows_of(start, step)
    assert (await store.commit(step)).replayed


async def test_a_commit_lost_before_the_server_is_reported_not_committed(
    proxy: CommitProxy, store: Store, aconn: psycopg.AsyncConnection
) -> None:
    start, step = await started_instance(store, "lost-commit")
    before = await ledger(aconn, step.instance_id)
    proxy.arm(Cut.BEFORE_COMMIT)

    with pytest.raises(StoreError) as caught:
        await store.commit(step)

    assert proxy.intercepted == ["Q"]
    # settled (the transaction aborted) or honestly unknown; never success
    assert caught.value.outcome in (CommitOutcome.NOT_COMMITTED, CommitOutcome.UNKNOWN)
    assert (caught.value.outcome is CommitOutcome.UNKNOWN) == isinstance(
        caught.value, CommitUnknown
    )
    verdict = await store.reconcile(step.transition_id, step.fingerprint)
    assert verdict is Reconciliation.MISSING
    assert await ledger(aconn, step.instance_id) == before
    assert not (await store.commit(step)).replayed  # retrying after MISSING converges
    assert (await ledger(aconn, step.instance_id)).rows == rows_of(start, step)


@pytest.mark.parametrize("cut", list(Cut), ids=lambda c: c.value)
async def test_an_unsettleable_commit_is_unknown_until_reconciled(
    proxy: CommitProxy,
    store: Store,
    aconn: psycopg.AsyncConnection,
    pg_dsn: str,
    cut: Cut,
) -> None:
    start, step = await started_instance(store, f"outage-{cut.value}")
    patient = store.pool.timeout
    store.pool.timeout = SETTLEMENT_WAIT_SECONDS
    proxy.arm(cut, outage=True)

    with pytest.raises(CommitUnknown) as caught:
        await store.commit(step)

    assert caught.value.outcome is CommitOutcome.UNKNOWN
    assert isinstance(caught.value.__cause__, psycopg.Error)
    assert pg_dsn not in str(caught.value) and "server closed" not in str(caught.value)
    if cut is Cut.AFTER_COMMIT:  # the server has the COMMIT; wait until it has answered
        await asyncio.wait_for(proxy.commit_answered.wait(), ANSWER_WAIT_SECONDS)
    truth = TRUTH[cut]
    assert (await ledger(aconn, step.instance_id)).rows == expected_rows(truth, start, step)

    proxy.restore()
    store.pool.timeout = patient
    assert await store.reconcile(step.transition_id, step.fingerprint) is truth
    retried = await store.commit(step)
    assert retried.replayed is (truth is Reconciliation.COMMITTED)
    assert (await ledger(aconn, step.instance_id)).rows == rows_of(start, step)


@pytest.mark.parametrize("cut", list(Cut), ids=lambda c: c.value)
@pytest.mark.parametrize("protocol", ["simple", "extended"])
async def test_the_proxy_recognises_commit_in_both_protocols(
    proxy: CommitProxy, aconn: psycopg.AsyncConnection, schema: str, cut: Cut, protocol: str
) -> None:
    """The tool itself: a COMMIT as 'Q' or as Parse/Bind/Execute is cut as armed."""
    await aconn.execute("CREATE TABLE marks (mark text)")
    async with await psycopg.AsyncConnection.connect(proxy.conninfo()) as conn:
        await conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        await conn.execute("INSERT INTO marks VALUES ('written')")
        proxy.arm(cut)
        with pytest.raises(psycopg.OperationalError):
            if protocol == "simple":
                await conn.commit()
            else:  # a binary cursor makes psycopg use the extended protocol
                await conn.cursor(binary=True).execute("COMMIT")
    assert proxy.intercepted == ["Q" if protocol == "simple" else "E"]
    if cut is Cut.AFTER_COMMIT:
        await asyncio.wait_for(proxy.commit_answered.wait(), ANSWER_WAIT_SECONDS)
    marks = await (await aconn.execute("SELECT count(*) FROM marks")).fetchone()
    # BEFORE: the aborted transaction may still be ending; its rows are invisible either way
    assert marks[0] == (1 if cut is Cut.AFTER_COMMIT else 0)
