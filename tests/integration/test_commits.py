"""Committing transitions against a real PostgreSQL: all or nothing, once, in order.

Each test names the invariant of the reference's section d that it checks. Races use a
gate: a transaction that holds the lock every racer needs until all of them are blocked
on it (seen in the ``pg_blocking_pids`` graph), then lets go, so the racers really contend inside
PostgreSQL instead of merely being started together by ``asyncio.gather``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from engine.decide.operator_actions import Action
from engine.model.errors import TransitionInvalid
from engine.model.events import EventKind, renumber
from engine.model.instance import InstanceStatus
from engine.model.transitions import Transition, make_transition
from engine.store.commits import CommitResult
from engine.store.errors import (
    CommitOutcome,
    DuplicateTransition,
    InstanceExists,
    Reconciliation,
    SequenceConflict,
    StoreError,
)
from engine.store.group_commit import CommitGroup
from engine.store.rows import HISTORY_COLUMNS, event_from_row
from engine.store.store import DEFAULT_POOL_SIZE, Store
from tests.integration.factories import open_store
from tests.integration.transition_builders import Flow, catalog, ledger, relabel, rows_of

CATALOG = catalog()
GATE_WAIT_SECONDS = 10.0
GATE_POLL_SECONDS = 0.01

HOLD_INSTANCE = "SELECT 1 FROM instances WHERE instance_id = %(id)s FOR UPDATE"
HOLD_NEW_INSTANCE = """
INSERT INTO instances (instance_id, definition_name, definition_version,
                       definition_fingerprint, status, sequence, created_at, updated_at)
VALUES (%(id)s, 'gate', 'gate', repeat('0', 64), 1, 0, now(), now())
"""
HOLD_TRANSITION_ID = """
INSERT INTO transitions (transition_id, instance_id, fingerprint, expected_sequence,
                         committed_sequence)
VALUES (%(transition)s, %(id)s, repeat('0', 64), 0, 1)
"""
# Transitive: the second waiter for a row lock waits on the first waiter, not the holder.
QUEUED_BEHIND = """
WITH RECURSIVE queue(pid) AS (
    SELECT pid FROM pg_stat_activity WHERE %(pid)s = ANY(pg_blocking_pids(pid))
    UNION
    SELECT a.pid FROM pg_stat_activity a JOIN queue q ON q.pid = ANY(pg_blocking_pids(a.pid))
)
SELECT count(*) FROM queue
"""
STARTED_EVENTS = "SELECT count(*) FROM history WHERE instance_id = %(id)s AND kind = %(kind)s"


@pytest.fixture
def store(default_store: Store) -> Store:
    return default_store


@pytest.fixture
async def rival(pg_dsn: str, schema: str) -> AsyncIterator[Store]:
    """A second store on the same schema: another process racing the first."""
    async with open_store(pg_dsn, schema, max_size=DEFAULT_POOL_SIZE) as opened:
        yield opened


async def commit_in_order(store: Store, *transitions: Transition) -> None:
    for transition in transitions:
        await store.commit(transition)


async def race(
    pg_dsn: str,
    schema: str,
    observer: psycopg.AsyncConnection,
    hold: Sequence[str],
    params: dict[str, str],
    *commits: Coroutine[Any, Any, CommitResult],
) -> list[CommitResult | BaseException]:
    """Run ``commits`` queued behind locks taken by ``hold``, then release them together.

    Returns each commit's result or exception, in order. A commit that finishes before
    it blocks (it never needed the lock) ends the wait early; the test then sees it.
    """
    async with await psycopg.AsyncConnection.connect(pg_dsn) as holder:
        await holder.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        try:
            for statement in hold:
                await holder.execute(statement, params)
        except BaseException:
            for commit in commits:
                commit.close()
            raise
        tasks = [asyncio.ensure_future(c) for c in commits]
        try:
            await until_queued(observer, holder.info.backend_pid, tasks)
        finally:
            await holder.rollback()
            # always wait for the racers: one left behind would keep its transaction open
            results = await asyncio.gather(*tasks, return_exceptions=True)
    return list(results)


async def until_queued(
    observer: psycopg.AsyncConnection, holder_pid: int, tasks: Sequence[asyncio.Future]
) -> None:
    """Wait until every task waits (directly or in a queue) for the holder's lock.

    PostgreSQL announces nothing when a backend starts waiting for a lock, so this polls
    the lock graph; it stops early when a task finishes without ever waiting.
    """
    async with asyncio.timeout(GATE_WAIT_SECONDS):
        while not any(t.done() for t in tasks):
            cur = await observer.execute(QUEUED_BEHIND, {"pid": holder_pid})
            if (await cur.fetchone())[0] >= len(tasks):
                return
            await asyncio.sleep(GATE_POLL_SECONDS)


def not_committed(error: BaseException, kind: type[StoreError]) -> None:
    """``error`` is ``kind`` and says that nothing was written."""
    assert isinstance(error, kind), repr(error)
    assert error.outcome is CommitOutcome.NOT_COMMITTED


def compensating_path(flow: Flow, input: object = None) -> list[Transition]:
    """Start, attempt, cancel while it runs, then its success schedules a compensation.

    The last transition creates a work row at a later position of an existing instance,
    which is what the duplicate-work-id tests need.
    """
    start = flow.start(input)
    started = flow.attempt_started(flow.after(start), "a")
    cancel = flow.command(flow.after(start, started), "cancel-1", Action.CANCEL)
    succeeded = flow.attempt_succeeded(flow.after(start, started, cancel), "a", {"ok": 1})
    assert [w.kind.label for w in succeeded.work] == ["compensation"]
    return [start, started, cancel, succeeded]


def reusing_work_id(transition: Transition, work_id: str) -> Transition:
    return relabel(transition, work=[replace(w, work_id=work_id) for w in transition.work])


# Invariant 1: all or nothing --------------------------------------------------------


async def test_duplicate_work_id_aborts_the_whole_transition(
    store: Store, aconn: psycopg.AsyncConnection
) -> None:
    flow = CATALOG.flow(CATALOG.single, "dup-work")
    *committed, last = compensating_path(flow)
    await commit_in_order(store, *committed)
    before = await ledger(aconn, flow.instance_id)
    clash = reusing_work_id(last, committed[0].work[0].work_id)

    with pytest.raises(StoreError) as caught:
        await store.commit(clash)

    not_committed(caught.value, StoreError)
    assert isinstance(caught.value.__cause__, psycopg.errors.UniqueViolation)
    assert await ledger(aconn, flow.instance_id) == before
    assert (
        await store.reconcile(clash.instance_id, clash.transition_id, clash.fingerprint)
        is Reconciliation.MISSING
    )
    await store.commit(last)  # the correct transition at that position still commits
    assert (await ledger(aconn, flow.instance_id)).history == rows_of(*committed, last)[0]


# Invariant 2: exact replay ----------------------------------------------------------


async def test_committing_twice_is_an_exact_replay(
    store: Store, aconn: psycopg.AsyncConnection
) -> None:
    flow = CATALOG.flow(CATALOG.pair, "replay-seq")
    start = flow.start({"n": 1})
    started = flow.attempt_started(flow.after(start), "x")
    for transition in (start, started):
        assert await store.commit(transition) == CommitResult(transition.transition_id)
        after_first = await ledger(aconn, flow.instance_id)
        replayed = await store.commit(transition)
        assert replayed == CommitResult(transition.transition_id, replayed=True)
        assert await ledger(aconn, flow.instance_id) == after_first
    assert (after_first.history, after_first.work) == rows_of(start, started)


@pytest.mark.parametrize("position", ["start", "next"])
async def test_the_same_transition_from_two_stores_at_once(
    pg_dsn: str,
    schema: str,
    store: Store,
    rival: Store,
    aconn: psycopg.AsyncConnection,
    position: str,
) -> None:
    flow = CATALOG.flow(CATALOG.pair, f"replay-{position}")
    start = flow.start()
    if position == "start":
        transition, hold = start, (HOLD_NEW_INSTANCE,)
    else:
        await store.commit(start)
        transition, hold = flow.attempt_started(flow.after(start), "y"), (HOLD_INSTANCE,)

    results = await race(
        pg_dsn,
        schema,
        aconn,
        hold,
        {"id": flow.instance_id},
        store.commit(transition),
        rival.commit(transition),
    )

    assert all(isinstance(r, CommitResult) for r in results), results
    assert sorted(r.replayed for r in results) == [False, True]
    state = await ledger(aconn, flow.instance_id)
    expected = (start,) if position == "start" else (start, transition)
    assert (state.history, state.work) == rows_of(*expected)
    assert [t[0] for t in state.transitions] == [t.transition_id for t in expected]


# Invariant 3: one id, one content ---------------------------------------------------


async def test_reusing_an_id_with_other_content_writes_nothing(
    store: Store, aconn: psycopg.AsyncConnection
) -> None:
    flow = CATALOG.flow(CATALOG.single, "reuse")
    start = flow.start({"n": 1})
    pause = flow.command(flow.after(start), "op-1", Action.PAUSE)
    await commit_in_order(store, start, pause)
    before = await ledger(aconn, flow.instance_id)
    other_start = flow.start({"n": 2})
    # the same command id, now naming another action at the next position
    other_command = flow.command(flow.after(start, pause), "op-1", Action.RESUME)
    assert other_command.transition_id == pause.transition_id

    for reused in (other_start, other_command):
        with pytest.raises(DuplicateTransition) as caught:
            await store.commit(reused)
        not_committed(caught.value, DuplicateTransition)
        verdict = await store.reconcile(
            reused.instance_id, reused.transition_id, reused.fingerprint
        )
        assert verdict is Reconciliation.CONFLICTING
    assert await ledger(aconn, flow.instance_id) == before


async def test_an_id_not_derived_from_its_instance_is_refused(
    store: Store, aconn: psycopg.AsyncConnection
) -> None:
    """The ledger is keyed (instance_id, transition_id) (migration 0027); one id stays
    one content everywhere because every id starts with its instance's id, which the
    store checks before it writes: another instance's id is refused, not committed."""
    first = CATALOG.flow(CATALOG.single, "owner")
    second = CATALOG.flow(CATALOG.single, "borrower")
    start = first.start()
    await store.commit(start)
    borrowed = replace(second.start(), transition_id=start.transition_id)  # unchecked

    with pytest.raises(TransitionInvalid, match="must start with its instance id and '#'"):
        await store.commit(borrowed)

    assert (await ledger(aconn, second.instance_id)).instance is None
    assert (await ledger(aconn, first.instance_id)).history == rows_of(start)[0]


async def test_an_id_taken_meanwhile_fails_the_ledger_key(
    pg_dsn: str, schema: str, store: Store, aconn: psycopg.AsyncConnection
) -> None:
    """The ledger's key decides what the lookup cannot see: a transaction that wrote the
    instance's start id (and moved nothing) commits while the start waits on the key;
    the start then fails the key (``commits.LEDGER_KEY``) and writes nothing."""
    flow = CATALOG.flow(CATALOG.single, "taken")
    start = flow.start()
    taken = {"transition": start.transition_id, "id": flow.instance_id}
    async with await psycopg.AsyncConnection.connect(pg_dsn) as holder:
        await holder.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        await holder.execute(HOLD_TRANSITION_ID, taken)
        task = asyncio.ensure_future(store.commit(start))
        await until_queued(aconn, holder.info.backend_pid, [task])
        await holder.commit()
        (result,) = await asyncio.gather(task, return_exceptions=True)

    not_committed(result, DuplicateTransition)
    assert (await ledger(aconn, flow.instance_id)).instance is None
    verdict = await store.reconcile(flow.instance_id, start.transition_id, start.fingerprint)
    assert verdict is Reconciliation.CONFLICTING


# Invariant 4: optimistic concurrency ------------------------------------------------


async def test_two_decisions_at_one_position_exactly_one_commits(
    pg_dsn: str, schema: str, store: Store, rival: Store, aconn: psycopg.AsyncConnection
) -> None:
    flow = CATALOG.flow(CATALOG.pair, "contended")
    start = flow.start()
    await store.commit(start)
    state = flow.after(start)
    decisions = {"x": flow.attempt_started(state, "x"), "y": flow.attempt_started(state, "y")}

    results = await race(
        pg_dsn,
        schema,
        aconn,
        (HOLD_INSTANCE,),
        {"id": flow.instance_id},
        store.commit(decisions["x"]),
        rival.commit(decisions["y"]),
    )

    outcomes = dict(zip(decisions, results, strict=True))
    won = [step for step, r in outcomes.items() if isinstance(r, CommitResult)]
    assert len(won) == 1, results
    lost = "y" if won == ["x"] else "x"
    not_committed(outcomes[lost], SequenceConflict)
    loser, winner = decisions[lost], decisions[won[0]]
    assert (
        await store.reconcile(loser.instance_id, loser.transition_id, loser.fingerprint)
        is Reconciliation.MISSING
    )
    assert await store.reconcile(winner.instance_id, winner.transition_id, winner.fingerprint) is (
        Reconciliation.COMMITTED
    )
    with pytest.raises(SequenceConflict):  # the stale transition stays stale
        await rival.commit(loser)

    reloaded = await flow.load(rival)
    retried = flow.attempt_started(reloaded, lost)
    assert not (await rival.commit(retried)).replayed
    final = await flow.load(store)
    assert {s: final.activities[s].attempt for s in decisions} == {"x": 1, "y": 1}
    assert (await ledger(aconn, flow.instance_id)).history == rows_of(start, winner, retried)[0]


# Invariant 5: contiguous history under concurrent writers -------------------------------


async def started_singles(store: Store, prefix: str, count: int) -> list[Flow]:
    """``count`` instances of the single-step definition, ``prefix-0`` onwards, started."""
    flows = [CATALOG.flow(CATALOG.single, f"{prefix}-{n}") for n in range(count)]
    for flow in flows:
        await store.commit(flow.start())
    return flows


async def toggle_until(store: Store, flow: Flow, writer: str, commits: int) -> int:
    """Pause or resume the instance ``commits`` times, reloading after every conflict."""
    conflicts = 0
    for n in range(commits):
        while True:
            state = await flow.load(store)
            action = Action.PAUSE if state.status is InstanceStatus.RUNNING else Action.RESUME
            try:
                await store.commit(flow.command(state, f"{writer}-{n}", action))
                break
            except SequenceConflict:
                conflicts += 1
    return conflicts


async def test_concurrent_writers_leave_history_exactly_one_to_n(
    store: Store, rival: Store, aconn: psycopg.AsyncConnection
) -> None:
    flows = await started_singles(store, "busy", 2)
    writers, commits = 4, 3

    conflicts = await asyncio.gather(
        *(
            toggle_until((store, rival)[w % 2], flow, f"w{w}", commits)
            for flow in flows
            for w in range(writers)
        )
    )

    assert sum(conflicts) > 0, "the writers never contended; the test proved nothing"
    for flow in flows:
        state = await ledger(aconn, flow.instance_id)
        n = state.instance[0]
        assert n == 2 + 2 * writers * commits
        assert state.history == tuple(range(1, n + 1))
        assert max(t[3] for t in state.transitions) == n
        expected_from = [0] + [t[3] for t in state.transitions[:-1]]
        assert [t[2] for t in state.transitions] == expected_from  # the ranges tile 1..N


# Invariant 6: one start per instance --------------------------------------------------


@pytest.mark.parametrize(
    ("ids", "loser_error"),
    [(("start", "start"), DuplicateTransition), (("start-a", "start-b"), InstanceExists)],
)
async def test_racing_starts_yield_one_instance_started(
    pg_dsn: str,
    schema: str,
    store: Store,
    rival: Store,
    aconn: psycopg.AsyncConnection,
    ids: tuple[str, str],
    loser_error: type[StoreError],
) -> None:
    flow = CATALOG.flow(CATALOG.single, f"born-{ids[1]}")
    starts = [flow.start({"by": n}, ids[n]) for n in (0, 1)]

    results = await race(
        pg_dsn,
        schema,
        aconn,
        (HOLD_NEW_INSTANCE,),
        {"id": flow.instance_id},
        store.commit(starts[0]),
        rival.commit(starts[1]),
    )

    winners = [n for n, r in enumerate(results) if isinstance(r, CommitResult)]
    assert len(winners) == 1, results
    not_committed(results[1 - winners[0]], loser_error)
    params = {"id": flow.instance_id, "kind": int(EventKind.INSTANCE_STARTED)}
    assert (await (await aconn.execute(STARTED_EVENTS, params)).fetchone())[0] == 1
    state = await ledger(aconn, flow.instance_id)
    assert [t[1] for t in state.transitions] == [starts[winners[0]].fingerprint]


# Invariant 7: the pinned definition ---------------------------------------------------


async def test_a_transition_for_another_pinned_definition_is_rejected(
    store: Store, aconn: psycopg.AsyncConnection
) -> None:
    flow = CATALOG.flow(CATALOG.single, "pinned")
    v1, v2 = CATALOG.single.ref, CATALOG.single_v2.ref
    start = flow.start()
    pause = flow.command(flow.after(start), "pause", Action.PAUSE)
    await commit_in_order(store, start, pause)
    paused = flow.after(start, pause)
    before = await ledger(aconn, flow.instance_id)

    with pytest.raises(SequenceConflict) as caught:
        await store.commit(relabel(flow.command(paused, "resume", Action.RESUME), definition=v2))
    not_committed(caught.value, SequenceConflict)
    assert await ledger(aconn, flow.instance_id) == before

    migrate = flow.command(paused, "migrate", Action.MIGRATE, target=v2, input={"v": 2})
    assert migrate.definition == v1  # the migration is decided under the old pin
    await store.commit(migrate)
    assert (await ledger(aconn, flow.instance_id)).instance[2] == "2"

    resume = flow.command(flow.after(start, pause, migrate), "resume", Action.RESUME)
    assert resume.definition == v2
    with pytest.raises(SequenceConflict):
        await store.commit(relabel(resume, definition=v1))
    assert not (await store.commit(resume)).replayed


# Invariant 11b: nothing replay would refuse is written ----------------------------------


def misnumbered(transition: Transition) -> Transition:
    """The events one position further on than the transition expects (a gap)."""
    events = tuple(renumber(e, e.sequence + 1) for e in transition.events)
    return replace(transition, events=events)


def backwards(transition: Transition) -> Transition:
    """The last event an hour before the one ahead of it."""
    *first, last = transition.events
    earlier = replace(last, occurred_at=first[-1].occurred_at - timedelta(hours=1))
    return replace(transition, events=(*first, earlier))


async def via_commit(store: Store, aconn: psycopg.AsyncConnection, t: Transition) -> None:
    await store.commit(t)


async def via_group(store: Store, aconn: psycopg.AsyncConnection, t: Transition) -> None:
    group = CommitGroup(store)
    try:
        await group.commit_all([t])
    finally:
        await group.close()


async def via_stage(store: Store, aconn: psycopg.AsyncConnection, t: Transition) -> None:
    async with aconn.transaction():
        await store.stage(aconn, t)


@pytest.mark.parametrize("write", [via_commit, via_group, via_stage], ids=lambda f: f.__name__)
@pytest.mark.parametrize(
    ("damage", "message"),
    [(misnumbered, "numbered contiguously after"), (backwards, "time may not go backwards")],
    ids=["gap", "backwards"],
)
async def test_a_transition_replay_would_refuse_is_never_written(
    store: Store, aconn: psycopg.AsyncConnection, write: Any, damage: Any, message: str
) -> None:
    """Whoever built it (here: ``dataclasses.replace`` past ``make_transition``), a
    transition whose events do not follow its expected sequence or go back in time would
    leave an instance nobody can replay again. The store refuses it before writing."""
    flow = CATALOG.flow(CATALOG.single, f"damaged-{damage.__name__}-{write.__name__}")
    start = flow.start()
    started = flow.attempt_started(flow.after(start), "a")
    cancel = flow.command(flow.after(start, started), "cancel-1", Action.CANCEL)
    await commit_in_order(store, start, started)
    before = await ledger(aconn, flow.instance_id)

    with pytest.raises(TransitionInvalid, match=message):
        await write(store, aconn, damage(cancel))

    assert await ledger(aconn, flow.instance_id) == before
    await store.commit(cancel)
    assert (await flow.load(store)).status is InstanceStatus.CANCELLING


# Invariant 12: staging into the caller's transaction --------------------------------------


async def test_staging_is_atomic_with_the_callers_own_rows(
    store: Store, aconn: psycopg.AsyncConnection
) -> None:
    await aconn.execute("CREATE TABLE outbox (transition_id text PRIMARY KEY)")
    flow = CATALOG.flow(CATALOG.single, "staged")
    start = flow.start({"order": 7})
    outbox_row = ("INSERT INTO outbox VALUES (%s)", [start.transition_id])
    outbox = "SELECT count(*) FROM outbox"

    async with aconn.transaction(force_rollback=True):
        assert await store.stage(aconn, start) is True
        await aconn.execute(*outbox_row)
    assert (await ledger(aconn, flow.instance_id)).instance is None
    assert (await (await aconn.execute(outbox)).fetchone())[0] == 0

    async with aconn.transaction():
        assert await store.stage(aconn, start) is True
        await aconn.execute(*outbox_row)
    assert (await ledger(aconn, flow.instance_id)).history == rows_of(start)[0]
    assert (await (await aconn.execute(outbox)).fetchone())[0] == 1
    assert await store.reconcile(start.instance_id, start.transition_id, start.fingerprint) is (
        Reconciliation.COMMITTED
    )

    async with aconn.transaction():
        assert await store.stage(aconn, start) is False
    assert (await ledger(aconn, flow.instance_id)).history == rows_of(start)[0]


async def test_staging_outside_a_transaction_block_is_refused(
    store: Store, aconn: psycopg.AsyncConnection
) -> None:
    """In autocommit each statement would commit alone: a statement failing after the
    ledger row would leave it (reconciling COMMITTED) and history without the rest."""
    second = CATALOG.flow(CATALOG.pair, "staged-loose")
    loose = second.start()

    with pytest.raises(StoreError) as caught:
        await store.stage(aconn, loose)
    not_committed(caught.value, StoreError)
    verdict = await store.reconcile(loose.instance_id, loose.transition_id, loose.fingerprint)
    assert verdict is Reconciliation.MISSING
    assert (await ledger(aconn, second.instance_id)).instance is None


# Invariant 43 and the status column ---------------------------------------------------


async def finish(store: Store, flow: Flow, terminate: bool) -> None:
    """Run an instance to a terminal event: a completed activity or a termination."""
    state = await flow.load(store)
    await store.commit(flow.attempt_started(state, "a"))
    state = await flow.load(store)
    if terminate:
        await store.commit(flow.command(state, "stop", Action.TERMINATE))
    else:
        await store.commit(flow.attempt_succeeded(state, "a", {"done": True}))


ACTIVE = "SELECT status FROM instances WHERE archived_at IS NULL"
ARCHIVED = "SELECT status FROM instances WHERE archived_at IS NOT NULL"


async def watch_lists(conn: psycopg.AsyncConnection, done: asyncio.Event) -> int:
    """List active and archived instances until ``done``; every row must agree."""
    reads = 0
    while not done.is_set():
        for query, terminal in ((ACTIVE, False), (ARCHIVED, True)):
            for (status,) in await (await conn.execute(query)).fetchall():
                assert InstanceStatus(status).terminal is terminal, (query, status)
        reads += 1
    return reads


async def test_a_terminal_commit_archives_in_the_same_transaction(
    store: Store, rival: Store, aconn: psycopg.AsyncConnection
) -> None:
    flows = await started_singles(store, "ending", 8)
    done = asyncio.Event()
    watcher = asyncio.create_task(watch_lists(aconn, done))

    try:
        await asyncio.gather(
            *(finish((store, rival)[n % 2], f, terminate=n % 3 == 0) for n, f in enumerate(flows))
        )
    finally:
        done.set()
    assert await watcher > 0
    for n, flow in enumerate(flows):
        _, status, _, archived = (await ledger(aconn, flow.instance_id)).instance
        expected = InstanceStatus.TERMINATED if n % 3 == 0 else InstanceStatus.COMPLETED
        assert (status, archived) == (expected, True)


OPEN_WORK = """
SELECT kind, state, failure_code FROM work WHERE instance_id = %s ORDER BY sequence, work_id
"""


async def test_an_ending_commit_retires_the_work_nobody_holds(
    store: Store, aconn: psycopg.AsyncConnection
) -> None:
    """Terminated while its first activity waits to be claimed: that work is retired in
    the same transaction, so no worker ever runs it for an instance that is over."""
    flow = CATALOG.flow(CATALOG.single, "retired")
    start = flow.start()
    terminate = flow.command(flow.after(start), "end-1", Action.TERMINATE)
    await commit_in_order(store, start)
    assert await (await aconn.execute(OPEN_WORK, [flow.instance_id])).fetchall() == [(1, 1, "")]

    await store.commit(terminate)

    rows = await (await aconn.execute(OPEN_WORK, [flow.instance_id])).fetchall()
    assert rows == [(1, 3, "instance-ended")]


async def test_the_status_column_follows_lifecycle_events(
    store: Store, aconn: psycopg.AsyncConnection
) -> None:
    flow = CATALOG.flow(CATALOG.single, "lifecycle")
    S = InstanceStatus
    steps = [
        (lambda s: flow.start(), S.RUNNING),
        (lambda s: flow.command(s, "pause", Action.PAUSE), S.PAUSED),
        (lambda s: flow.command(s, "resume", Action.RESUME), S.RUNNING),
        (lambda s: flow.attempt_started(s, "a"), S.RUNNING),
        (lambda s: flow.command(s, "cancel", Action.CANCEL), S.CANCELLING),
        (lambda s: flow.attempt_succeeded(s, "a"), S.CANCELLING),
        (lambda s: flow.compensation_started(s, "a"), S.CANCELLING),
        (lambda s: flow.compensation_succeeded(s, "a"), S.CANCELLED),
    ]
    state = None
    for build, status in steps:
        await store.commit(build(state))
        state = await flow.load(store)
        _, stored, _, archived = (await ledger(aconn, flow.instance_id)).instance
        assert (stored, archived) == (status, status.terminal)
        assert state.status is status


# Invariant 46: instants ---------------------------------------------------------------


WRITER_ZONE = "America/St_Johns"
READER_ZONE = "Asia/Kathmandu"
HISTORY_ROWS = f"SELECT {HISTORY_COLUMNS} FROM history WHERE instance_id = %s ORDER BY sequence"
WORK_TIMES = "SELECT available_at, deadline FROM work WHERE instance_id = %s ORDER BY work_id"


async def test_instants_round_trip_to_the_microsecond_in_any_session_zone(
    pg_dsn: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PGTZ", WRITER_ZONE)  # the store's own sessions are not UTC either
    writer = await Store.open(pg_dsn, schema)
    try:
        async with writer.connection() as conn:
            assert (await (await conn.execute("SHOW TimeZone")).fetchone())[0] == WRITER_ZONE
        flow = CATALOG.flow(CATALOG.single, "instants")
        at = datetime(2026, 3, 29, 1, 59, 59, 999_999, tzinfo=ZoneInfo(WRITER_ZONE))
        start = flow.start({"t": 1}, at=at)
        started = flow.attempt_started(flow.after(start), "a", at=at + timedelta(microseconds=1))
        await commit_in_order(writer, start, started)
    finally:
        await writer.close()
        monkeypatch.delenv("PGTZ")  # libpq would let it override the reader's options
    events = [e for t in (start, started) for e in t.events]
    assert events[-1].due_at is not None

    reader_dsn = make_conninfo(pg_dsn, options=f"-c TimeZone={READER_ZONE}")
    async with await psycopg.AsyncConnection.connect(reader_dsn, autocommit=True) as reader:
        await reader.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        for binary in (False, True):
            cur = reader.cursor(binary=binary)
            rows = await (await cur.execute(HISTORY_ROWS, [flow.instance_id])).fetchall()
            assert rows[0][3].utcoffset() == timedelta(hours=5, minutes=45)
            decoded = [event_from_row(r) for r in rows]
            assert decoded == events
            assert [e.occurred_at.astimezone(UTC) for e in decoded] == [
                e.occurred_at for e in events
            ]
            rebuilt = make_transition(
                started.transition_id,
                started.definition,
                started.expected_sequence,
                decoded[len(start.events) :],
                list(started.work),
            )
            assert rebuilt.fingerprint == started.fingerprint
            work = await (await cur.execute(WORK_TIMES, [flow.instance_id])).fetchall()
            assert work == [(w.available_at, w.deadline) for w in start.work]


@pytest.mark.parametrize(
    "text",
    ["naïve — ✓ 漢字 🙂", 'quotes " and \\ backslashes', "control \u0000\t\n chars", "%(h)s {}"],
)
async def test_event_data_round_trips_character_for_character(
    store: Store, aconn: psycopg.AsyncConnection, text: str
) -> None:
    """Rows travel to the server as one JSON document: whatever a payload holds comes
    back exactly, and the fingerprint of the stored events is unchanged."""
    flow = CATALOG.flow(CATALOG.single, f"text-{len(text)}")
    start = flow.start({"text": text, "list": [text, 1.5, None]})
    await store.commit(start)

    rows = await (await aconn.execute(HISTORY_ROWS, [flow.instance_id])).fetchall()
    assert [event_from_row(r) for r in rows] == list(start.events)
    assert (await flow.load(store)).input == start.events[0].data


# Invariant 47: no driver text in errors -----------------------------------------------


SECRET = "s3cr3t-card-4111111111111111"
DRIVER_PHRASES = ("duplicate key", "violates", "unique constraint", "Key (", "DETAIL")


def leaks(message: str, forbidden: Sequence[str]) -> list[str]:
    return [text for text in forbidden if text.lower() in message.lower()]


async def test_errors_carry_no_driver_text_credentials_or_payload(
    pg_dsn: str, store: Store
) -> None:
    flow = CATALOG.flow(CATALOG.single, "leaky")
    *committed, last = compensating_path(flow, {"card": SECRET})
    await commit_in_order(store, *committed)
    clash = reusing_work_id(last, committed[0].work[0].work_id)

    with pytest.raises(StoreError) as caught:
        await store.commit(clash)

    error, cause = caught.value, caught.value.__cause__
    assert isinstance(cause, psycopg.errors.UniqueViolation)
    assert "duplicate key" in str(cause)  # the driver did say it; we must not repeat it
    message = str(error)
    assert not leaks(message, [*DRIVER_PHRASES, SECRET, pg_dsn, str(cause)]), message
    assert message.strip(), "an error must still say what happened"
