"""Leases on work against a real PostgreSQL: fencing, expiry, fairness, recovery.

Each test names the invariant of the reference's section d (or gap of section f) it
checks. Time-precise tests use a ManualClock, whose instant every statement compares
against; the dead-owner and race tests use PostgreSQL's own clock.
"""

from __future__ import annotations

import asyncio
import random
from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from engine.model.transitions import WorkKind
from engine.store import leases, sweeps, transactions
from engine.store.clock import DatabaseClock, ManualClock
from engine.store.embedded import EmbeddedPostgres
from engine.store.errors import CommitOutcome, CommitUnknown, StaleLease, StoreError
from engine.store.leases import Lease, WorkRequestInvalid
from engine.store.migrations import apply_migrations
from engine.store.rows import WorkState
from engine.store.store import Store
from tests.integration.factories import adjust_work, open_store, seed_work, work_row
from verification.standby import StandbyPair

T0 = datetime(2031, 3, 4, 5, 6, 7, 123456, tzinfo=UTC)
LEASE = timedelta(seconds=30)
MICRO = timedelta(microseconds=1)
POLL_SECONDS = 0.01
WAIT_SECONDS = 10.0


async def claim_one(store: Store, owner: str = "worker-1", lease: timedelta = LEASE) -> Lease:
    claimed = await leases.claim(store, owner, lease, 1)
    assert len(claimed) == 1, claimed
    return claimed[0]


async def execute(store: Store, statement: Any, params: Any = None) -> list[tuple]:
    async with store.connection() as conn:
        cursor = await conn.execute(statement, params or {})
        rows = await cursor.fetchall() if cursor.description else []
        await conn.commit()
    return rows


# Bounds -------------------------------------------------------------------------------


async def test_bounds_are_rejected_before_the_database_is_touched() -> None:
    """45: lease > 15 min, claim > 100, empty owner; the store has no pool at all."""
    nowhere = Store(None, "nowhere", ManualClock(T0))  # type: ignore[arg-type]
    lease = Lease("w", WorkKind.ACTIVITY, "i", 2, None, "", "", "o", 1, 1, T0, T0, T0)
    cases = [
        (leases.claim(nowhere, "o", timedelta(minutes=15, microseconds=1), 1), "MAX_LEASE"),
        (leases.claim(nowhere, "o", timedelta(0), 1), "MAX_LEASE"),
        (leases.claim(nowhere, "o", LEASE, 101), "MAX_WORK_CLAIM_ITEMS"),
        (leases.claim(nowhere, "o", LEASE, 0), "MAX_WORK_CLAIM_ITEMS"),
        (leases.claim(nowhere, "", LEASE, 1), "owner"),
        (leases.renew(nowhere, lease, timedelta(minutes=16)), "MAX_LEASE"),
        (leases.retry_at(nowhere, lease, T0, ""), "code"),
        (leases.retry_at(nowhere, lease, T0 + MICRO, "late"), "deadline"),
        (leases.dead_letter(nowhere, lease, ""), "code"),
    ]
    for attempt, fragment in cases:
        with pytest.raises(WorkRequestInvalid, match=fragment):
            await attempt


# Claiming -----------------------------------------------------------------------------


async def test_claim_renew_complete(store: Store, clock: ManualClock) -> None:
    """A claim leases due work with token and attempt 1; renew keeps the token."""
    (work_id,) = await seed_work(store, 1)
    lease = await claim_one(store)
    assert (lease.work_id, lease.token, lease.attempt, lease.owner) == (work_id, 1, 1, "worker-1")
    assert (lease.kind, lease.target, lease.claimed_at) == (WorkKind.ACTIVITY, "pay.charge", T0)
    assert lease.expires_at == T0 + LEASE
    assert lease.payload is not None and '"step":"charge"' in lease.payload
    clock.advance(timedelta(seconds=10))
    renewed = await leases.renew(store, lease, LEASE)
    assert (renewed.token, renewed.expires_at) == (1, T0 + timedelta(seconds=40))
    await leases.complete(store, renewed)
    row = await work_row(store, work_id)
    assert (row["state"], row["lease_owner"], row["lease_expires_at"]) == (
        WorkState.COMPLETED,
        "",
        None,
    )
    assert row["completed_at"] == clock.now()
    clock.advance(timedelta(hours=1))
    assert await leases.claim(store, "worker-2", LEASE, 10) == []


async def test_claim_filters_kinds_and_targets(store: Store) -> None:
    """Workers claim only what they can run."""
    await seed_work(store, 1)
    assert await leases.claim(store, "w", LEASE, 5, targets=["other.target"]) == []
    assert await leases.claim(store, "w", LEASE, 5, kinds=[WorkKind.TIMER]) == []
    claimed = await leases.claim(
        store, "w", LEASE, 5, kinds=[WorkKind.ACTIVITY], targets=["pay.charge"]
    )
    assert len(claimed) == 1


async def test_sixteen_claimers_never_share_a_fence(
    pg_dsn: str, schema: str, store: Store, clock: ManualClock
) -> None:
    """13, 14: no two claimers get the same (work_id, token); +1 per claim, every round."""
    work_ids = set(await seed_work(store, 48))
    grants: list[Lease] = []
    async with _claimers(pg_dsn, schema, clock, 16) as stores:
        for round_number in range(1, 4):
            rounds = await asyncio.gather(*(_claim_until_empty(s, n) for n, s in enumerate(stores)))
            granted = [lease for claimed in rounds for lease in claimed]
            assert sorted(lease.work_id for lease in granted) == sorted(work_ids)
            assert {(lease.token, lease.attempt) for lease in granted} == {
                (round_number, round_number)
            }
            grants.extend(granted)
            clock.advance(LEASE)  # every lease of this round expires exactly now
    fences = [(lease.work_id, lease.token) for lease in grants]
    assert len(fences) == len(set(fences)) == 3 * len(work_ids)
    tokens = defaultdict(list)
    for lease in grants:
        tokens[lease.work_id].append(lease.token)
    assert all(sorted(seen) == [1, 2, 3] for seen in tokens.values())


@asynccontextmanager
async def _claimers(
    dsn: str, schema: str, clock: ManualClock, count: int
) -> AsyncIterator[list[Store]]:
    """``count`` stores on one schema, each its own pool and connection: 16 processes."""
    opening = (Store.open(dsn, schema, clock=clock, max_size=1) for _ in range(count))
    stores = list(await asyncio.gather(*opening))
    try:
        yield stores
    finally:
        await asyncio.gather(*(s.close() for s in stores))


async def _claim_until_empty(store: Store, number: int) -> list[Lease]:
    """A tight claim loop with random batch sizes until a claim comes back empty."""
    rng = random.Random(number)
    claimed: list[Lease] = []
    while batch := await leases.claim(store, f"claimer-{number}", LEASE, rng.randint(1, 4)):
        claimed.extend(batch)
    return claimed


# Boundaries and expiry ----------------------------------------------------------------


async def test_microsecond_boundaries_under_a_non_utc_session(
    pg_dsn: str, schema: str, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """15, 46: 1 µs before due/expiry nothing; at due claimed; at expiry token 2."""
    monkeypatch.setenv("PGTZ", "Pacific/Chatham")  # +13:45 / +12:45: nothing lines up
    due = T0 + timedelta(hours=1, microseconds=7)
    async with open_store(pg_dsn, schema, clock) as chatham:
        (zone,) = (await execute(chatham, "SHOW TimeZone"))[0]
        assert zone == "Pacific/Chatham"
        (work_id,) = await seed_work(chatham, 1, available_at=due, deadline=due + timedelta(days=1))
        clock.set(due - MICRO)
        assert await leases.claim(chatham, "early", LEASE, 1) == []
        clock.set(due)
        first = await claim_one(chatham, "first")
        assert (first.work_id, first.token, first.claimed_at) == (work_id, 1, due)
        assert first.expires_at == due + LEASE
        clock.set(first.expires_at - MICRO)
        assert await leases.claim(chatham, "second", LEASE, 1) == []
        clock.set(first.expires_at)
        second = await claim_one(chatham, "second")
        assert (second.work_id, second.token, second.attempt) == (work_id, 2, 2)
        row = await work_row(chatham, work_id)
        assert row["lease_expires_at"] == first.expires_at + LEASE
        assert row["available_at"] == due


async def test_expiry_is_authoritative_without_a_competitor(
    store: Store, clock: ManualClock
) -> None:
    """18: at the expiry instant renew and complete fail even though nobody reclaimed."""
    await seed_work(store, 1)
    lease = await claim_one(store)
    clock.set(lease.expires_at - MICRO)
    lease = await leases.renew(store, lease, timedelta(microseconds=1))
    assert lease.expires_at == clock.now() + MICRO
    clock.set(lease.expires_at)
    before = await work_row(store, lease.work_id)
    with pytest.raises(StaleLease):
        await leases.renew(store, lease, LEASE)
    with pytest.raises(StaleLease):
        await leases.complete(store, lease)
    assert await work_row(store, lease.work_id) == before


async def test_a_stale_owner_can_change_nothing(store: Store, clock: ManualClock) -> None:
    """17: after expiry and reclaim, the old owner's every write fails; the row stays."""
    await seed_work(store, 1)
    old = await claim_one(store, "old")
    clock.set(old.expires_at)
    new = await claim_one(store, "new")
    assert new.token == old.token + 1
    before = await work_row(store, new.work_id)
    impostors = [old, replace(new, owner="old"), replace(new, token=old.token)]
    for stale in impostors:
        for write in (
            leases.complete(store, stale),
            leases.retry_at(store, stale, clock.now(), "retry"),
            leases.dead_letter(store, stale, "poison"),
            leases.renew(store, stale, LEASE),
        ):
            with pytest.raises(StaleLease) as caught:
                await write
            assert "no longer held" in str(caught.value)
    assert await work_row(store, new.work_id) == before
    await leases.complete(store, new)


async def test_a_lease_never_outlives_its_deadline(store: Store, clock: ManualClock) -> None:
    """16: expiry is min(now + lease, deadline), on claim and on every renewal."""
    deadline = T0 + timedelta(minutes=5)
    (work_id,) = await seed_work(store, 1, deadline=deadline)
    lease = await claim_one(store, lease=timedelta(minutes=15))
    assert lease.expires_at == lease.deadline == deadline
    clock.advance(timedelta(minutes=4))
    renewed = await leases.renew(store, lease, timedelta(minutes=15))
    assert renewed.expires_at == deadline
    assert (await work_row(store, work_id))["lease_expires_at"] == deadline


async def test_retried_work_waits_for_its_time(store: Store, clock: ManualClock) -> None:
    """20: work released with a retry time is not claimable a microsecond before it."""
    await seed_work(store, 1)
    lease = await claim_one(store)
    again = T0 + timedelta(seconds=90)
    await leases.retry_at(store, lease, again, "busy")
    row = await work_row(store, lease.work_id)
    assert (row["state"], row["failure_code"], row["available_at"]) == (
        WorkState.AVAILABLE,
        "busy",
        again,
    )
    clock.set(again - MICRO)
    assert await leases.claim(store, "w", LEASE, 1) == []
    clock.set(again)
    retried = await claim_one(store)
    assert (retried.token, retried.attempt) == (2, 2)


async def test_overdue_work_is_never_claimed_and_becomes_a_dead_letter(
    store: Store, clock: ManualClock
) -> None:
    """21 and gap f.2: past its deadline, work is swept to ``deadline-exceeded``."""
    deadline = T0 + timedelta(seconds=10)
    waiting = await seed_work(store, 2, deadline=deadline)
    leased = await claim_one(store, lease=timedelta(minutes=1))
    assert leased.expires_at == deadline
    healthy = await seed_work(store, 1)
    clock.set(deadline - MICRO)
    assert await sweeps.sweep_expired_deadlines(store) == 0
    clock.set(deadline)
    assert [x.work_id for x in await leases.claim(store, "w", LEASE, 10)] == healthy
    assert await sweeps.sweep_expired_deadlines(store) == 2
    for work_id in waiting:
        row = await work_row(store, work_id)
        assert (row["state"], row["failure_code"], row["completed_at"]) == (
            WorkState.DEAD_LETTERED,
            sweeps.DEADLINE_EXCEEDED,
            deadline,
        )
        assert row["lease_token"] >= 1, "a dead letter's fence is at least 1"
    assert await sweeps.sweep_expired_deadlines(store) == 0


async def test_a_claim_walks_past_rows_another_claim_holds(
    pg_dsn: str, schema: str, store: Store, clock: ManualClock
) -> None:
    """Concurrent claimers do not starve on one window: held rows are passed, not waited."""
    work_ids = await seed_work(store, 8)
    oldest = sorted(work_ids)[:4]
    await adjust_work(store, oldest, available_at=T0 - timedelta(seconds=1))
    async with await psycopg.AsyncConnection.connect(pg_dsn) as holder:
        await holder.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        await holder.execute("SELECT 1 FROM work WHERE work_id = ANY(%s) FOR UPDATE", [oldest])
        claimed = await leases.claim(store, "second", LEASE, 4)
        await holder.rollback()
    assert sorted(lease.work_id for lease in claimed) == sorted(set(work_ids) - set(oldest))


async def test_claims_are_fair_between_tenants(store: Store, clock: ManualClock) -> None:
    """22: tenant A has 100 due items and B one (the newest); a claim of 2 takes one each."""
    await seed_work(store, 100, tenant="tenant-a")
    clock.advance(timedelta(seconds=1))
    (late,) = await seed_work(store, 1, tenant="tenant-b")
    claimed = await leases.claim(store, "w", LEASE, 2)
    assert sorted(lease.tenant_id for lease in claimed) == ["tenant-a", "tenant-b"]
    assert late in {lease.work_id for lease in claimed}


async def test_an_expired_lease_is_claimed_before_a_backlog_of_new_work(
    store: Store, clock: ManualClock
) -> None:
    """A started step whose worker died goes first: older due work does not starve it."""
    (started,) = await seed_work(store, 1)
    lease = await claim_one(store, owner="dead-worker")
    await seed_work(store, 20, available_at=T0 - timedelta(hours=1))
    clock.set(lease.expires_at)
    claimed = await leases.claim(store, "fresh-worker", LEASE, 2)
    assert started in {c.work_id for c in claimed}


# Finishing inside the caller's transaction --------------------------------------------


async def test_completion_rides_in_the_callers_transaction(
    store: Store, clock: ManualClock
) -> None:
    """The outcome and the lease completion commit together or not at all."""
    await seed_work(store, 1)
    lease = await claim_one(store)
    async with store.connection() as conn:
        await leases.check_on(conn, lease, clock.now())
        await leases.complete_on(conn, lease, clock.now())
        await conn.rollback()
    assert (await work_row(store, lease.work_id))["state"] == WorkState.LEASED
    async with store.connection() as conn:
        await leases.check_on(conn, lease, clock.now())
        await leases.complete_on(conn, lease, clock.now())
        await conn.commit()
    assert (await work_row(store, lease.work_id))["state"] == WorkState.COMPLETED
    async with store.connection() as conn:
        with pytest.raises(StaleLease):
            await leases.check_on(conn, lease, clock.now())
        await conn.rollback()


async def test_a_claim_lost_on_the_wire_is_unknown_not_unwritten(store: Store) -> None:
    """A claim is one statement in autocommit: the server commits it by itself, so a
    connection lost while it runs may have leased work. That is CommitUnknown (the
    leases expire), never "nothing was written"."""
    await seed_work(store, 1)

    async def claimed_then_cut(conn: psycopg.AsyncConnection) -> None:
        await conn.execute("UPDATE work SET attempts = attempts + 1")
        raise psycopg.OperationalError("server closed the connection unexpectedly")

    with pytest.raises(CommitUnknown) as caught:
        await transactions.transact(store, "claim", claimed_then_cut, single_statement=True)
    assert caught.value.outcome is CommitOutcome.UNKNOWN
    assert "server closed" not in str(caught.value)
    rows = await execute(store, "SELECT attempts FROM work")
    assert rows == [(1,)], "the statement committed without a COMMIT"


# Races with a claim (gap f.1, invariant 19) ------------------------------------------

BLOCKING_CLOCK = """
CREATE FUNCTION {schema}.statement_timestamp() RETURNS timestamptz
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_catalog.pg_advisory_xact_lock_shared({key}, 1);
    RETURN pg_catalog.statement_timestamp();
END $$
"""
WAITING_ON_GATE = """
SELECT count(*) FROM pg_locks
WHERE locktype = 'advisory' AND NOT granted AND classid = (%(key)s::int)::oid
"""
EXPIRE_LEASE = """
UPDATE work SET lease_expires_at = statement_timestamp() - interval '1 second'
WHERE work_id = %(id)s RETURNING lease_expires_at
"""


async def test_a_locked_completion_is_skipped_not_resurrected(
    pg_dsn: str, schema: str, db_store: Store
) -> None:
    """19: the row is locked and completed while the claim runs; SKIP LOCKED passes it."""
    (work_id,) = await seed_work(db_store, 1)
    async with await psycopg.AsyncConnection.connect(pg_dsn) as holder:
        await holder.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        await holder.execute("SELECT 1 FROM work WHERE work_id = %s FOR UPDATE", [work_id])
        await holder.execute(
            f"UPDATE work SET state = {WorkState.COMPLETED}, completed_at = now() "
            "WHERE work_id = %s",
            [work_id],
        )
        assert await leases.claim(db_store, "claimer", LEASE, 5) == []
        await holder.commit()
    assert await leases.claim(db_store, "claimer", LEASE, 5) == []
    assert (await work_row(db_store, work_id))["state"] == WorkState.COMPLETED


@pytest.mark.parametrize("rival_write", ["complete", "dead_letter", "claim"])
async def test_a_write_committed_after_the_claims_snapshot_is_not_undone(
    pg_dsn: str, schema: str, db_store: Store, rival_write: str
) -> None:
    """19 / f.1: a claim whose snapshot predates a rival's commit re-checks the locked row.

    The claiming session's clock function waits on a gate, so the claim statement has
    taken its snapshot and read nothing yet. While it waits, a rival completes,
    dead-letters or claims the row and commits. Released, the claim locks the row's new
    version and must find it no longer eligible.
    """
    (work_id,) = await seed_work(db_store, 1)
    rival_lease = await _rival_setup(db_store, rival_write)
    key = random.randint(1, 2**31 - 1)
    async with (
        await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as gate,
        open_store(pg_dsn, schema, DatabaseClock(), max_size=1) as gated,
    ):
        await gate.execute(sql.SQL(BLOCKING_CLOCK.format(schema=schema, key=key)))
        await gate.execute("SELECT pg_advisory_lock(%s::int, 1)", [key])
        await execute(
            gated, sql.SQL("SET search_path TO {}, pg_catalog").format(sql.Identifier(schema))
        )
        claim = asyncio.ensure_future(leases.claim(gated, "late-claimer", LEASE, 5))
        await _until_waiting(gate, key, claim)
        winner = await _rival_write(db_store, rival_write, rival_lease)
        await gate.execute("SELECT pg_advisory_unlock(%s::int, 1)", [key])
        late = await claim
    assert late == []
    row = await work_row(db_store, work_id)
    expected = {
        "complete": (WorkState.COMPLETED, ""),
        "dead_letter": (WorkState.DEAD_LETTERED, ""),
        "claim": (WorkState.LEASED, winner),
    }
    assert (row["state"], row["lease_owner"]) == expected[rival_write]
    assert row["lease_token"] == 1


async def _rival_setup(store: Store, rival_write: str) -> Lease | None:
    """For complete/dead-letter: a lease that looks expired to the late claim."""
    if rival_write == "claim":
        return None
    lease = await claim_one(store, "holder")
    (expired,) = (await execute(store, EXPIRE_LEASE, {"id": lease.work_id}))[0]
    return replace(lease, expires_at=expired)


async def _rival_write(store: Store, rival_write: str, lease: Lease | None) -> str:
    """Commit the rival's write; its statement ran before the lease expired."""
    if lease is None:
        return (await claim_one(store, "rival")).owner
    before_expiry = lease.expires_at - MICRO
    async with store.connection() as conn:
        if rival_write == "complete":
            await leases.complete_on(conn, lease, before_expiry)
        else:
            await leases.dead_letter_on(conn, lease, "poison", before_expiry)
        await conn.commit()
    return ""


async def _until_waiting(gate: psycopg.AsyncConnection, key: int, claim: asyncio.Future) -> None:
    async with asyncio.timeout(WAIT_SECONDS):
        while not (await (await gate.execute(WAITING_ON_GATE, {"key": key})).fetchone())[0]:
            assert not claim.done(), "the claim finished without reaching the gate"
            await asyncio.sleep(POLL_SECONDS)


# Dead owners --------------------------------------------------------------------------

REGISTER_WORKER = """
INSERT INTO workers (worker_id, started_at, heartbeat_at) VALUES (%(id)s, now(), now())
"""


async def test_leases_of_a_dead_owner_expire_at_once(
    pg_dsn: str, schema: str, db_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A registered owner whose lock session is gone loses its leases now; a live one not."""
    monkeypatch.setattr(sweeps, "OWNER_LOCK_WAIT", timedelta(milliseconds=200))
    await seed_work(db_store, 3)
    for owner in ("alive", "dead"):
        await execute(db_store, REGISTER_WORKER, {"id": owner})
    async with (
        await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as alive,
        await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as dead,
    ):
        await sweeps.hold_owner_lock(alive, schema, "alive")
        await sweeps.hold_owner_lock(dead, schema, "dead")
        claimed = {
            o: await claim_one(db_store, o, timedelta(minutes=10))
            for o in ("alive", "dead", "adhoc")
        }
        assert await sweeps.expire_leases_of_dead_owners(db_store) == 0
        with pytest.raises(sweeps.OwnerLockHeld):
            await sweeps.hold_owner_lock(alive, schema, "dead")  # a second session, same id
        (killed,) = (
            await execute(
                db_store, "SELECT pg_terminate_backend(%s::int, 5000)", [dead.info.backend_pid]
            )
        )[0]
        assert killed
        assert await sweeps.expire_leases_of_dead_owners(db_store) == 1
        assert (await work_row(db_store, claimed["alive"].work_id))["lease_expires_at"] == claimed[
            "alive"
        ].expires_at
        assert (await work_row(db_store, claimed["adhoc"].work_id))["lease_expires_at"] == claimed[
            "adhoc"
        ].expires_at
        rescued = await claim_one(db_store, "rescuer")
        assert (rescued.work_id, rescued.token) == (claimed["dead"].work_id, 2)
        with pytest.raises(StaleLease):
            await leases.complete(db_store, claimed["dead"])  # fencing, if it was alive after all
        async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as revived:
            await sweeps.hold_owner_lock(revived, schema, "dead")  # the sweep kept no lock


async def lock_and_die(store: Store, dsn: str, owner: str) -> None:
    """``owner`` takes its lock in a session of its own, which then ends: once this
    returns, the session is gone and its lock free (closing a connection only asks the
    server to end it, and a sweep right after could still find the lock held)."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as session:
        await sweeps.hold_owner_lock(session, "wayline", owner)
        pid = session.info.backend_pid
        (ended,) = (await execute(store, "SELECT pg_terminate_backend(%s::int, 5000)", [pid]))[0]
        assert ended


async def test_a_database_restart_does_not_make_every_worker_look_dead(
    cluster: EmbeddedPostgres, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A restart ends every worker's lock session: a worker that took its lock before the
    server started keeps its leases for RESTART_GRACE (it is taking its lock again), while
    one that took its lock on the running server and lost it is dead at once. Operators
    saw every attempt in flight across a restart of a few seconds recorded unknown."""
    dsn = cluster.start()
    apply_migrations(dsn, "wayline")
    before = await psycopg.AsyncConnection.connect(dsn, autocommit=True)  # lives on
    async with open_store(dsn, "wayline") as store:
        await seed_work(store, 2)
        for owner in ("before", "after"):
            await execute(store, REGISTER_WORKER, {"id": owner})
        await sweeps.hold_owner_lock(before, "wayline", "before")
        claimed = {o: await claim_one(store, o, timedelta(minutes=10)) for o in ("before", "after")}
    cluster.stop()
    cluster.start()
    async with open_store(dsn, "wayline") as store:
        await lock_and_die(store, dsn, "after")
        assert await sweeps.expire_leases_of_dead_owners(store) == 1
        assert (await work_row(store, claimed["before"].work_id))["lease_expires_at"] == claimed[
            "before"
        ].expires_at
        monkeypatch.setattr(sweeps, "RESTART_GRACE", timedelta(0))  # it never came back
        assert await sweeps.expire_leases_of_dead_owners(store) == 1
    await before.close()


async def test_a_failover_does_not_make_every_worker_look_dead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A promoted standby keeps its postmaster's start time, which may be days old: the
    grace of a restart, counted from it, did not cover a failover, and the first sweep
    on the promoted server expired every worker's leases (their lock sessions were on
    the old primary). The grace now counts from when the server began serving the store
    (``serving_since``): for a promotion, from the epoch the promoted server made."""
    with StandbyPair.start(tmp_path, synchronous=True) as pair:
        apply_migrations(pair.primary_dsn, "wayline")
        async with open_store(pair.primary_dsn, "wayline") as store:
            await seed_work(store, 2)
            for owner in ("before", "after"):
                await execute(store, REGISTER_WORKER, {"id": owner})
            before = await psycopg.AsyncConnection.connect(pair.primary_dsn, autocommit=True)
            await sweeps.hold_owner_lock(before, "wayline", "before")
            claims = {
                o: await claim_one(store, o, timedelta(minutes=10)) for o in ("before", "after")
            }
            # Claims commit without waiting for the standby; this commit waits for both.
            await execute(store, "UPDATE workers SET heartbeat_at = now()")
        with psycopg.connect(pair.standby_dsn, autocommit=True) as standby:
            started, read_before = standby.execute(
                "SELECT pg_postmaster_start_time(), now()"
            ).fetchone()
        pair.kill_primary()
        pair.promote()
        # Any grace the promoted server's postmaster start has already run out of.
        monkeypatch.setattr(sweeps, "RESTART_GRACE", (read_before - started) / 2)
        async with open_store(pair.standby_dsn, "wayline") as store:
            await lock_and_die(store, pair.standby_dsn, "after")
            assert await sweeps.expire_leases_of_dead_owners(store) == 1
            (since,) = (await execute(store, "SELECT serving_since()"))[0]
            assert since > read_before
            kept = await work_row(store, claims["before"].work_id)
            assert kept["lease_expires_at"] == claims["before"].expires_at
            monkeypatch.setattr(sweeps, "RESTART_GRACE", timedelta(0))  # it never came back
            assert await sweeps.expire_leases_of_dead_owners(store) == 1
        await before.close()


async def test_the_owner_lock_needs_its_own_autocommit_session(pg_dsn: str, schema: str) -> None:
    """The lock must outlive transactions, so it is refused on a transactional session."""
    async with await psycopg.AsyncConnection.connect(pg_dsn) as in_transaction:
        with pytest.raises(WorkRequestInvalid, match="autocommit"):
            await sweeps.hold_owner_lock(in_transaction, schema, "w")


# Errors -------------------------------------------------------------------------------


async def test_errors_carry_no_driver_text(store: Store) -> None:
    """47: a refused statement says what failed, not what the driver said."""
    await execute(store, "ALTER TABLE work RENAME TO work_hidden_name")
    with pytest.raises(StoreError) as caught:
        await leases.claim(store, "w", LEASE, 1)
    message = str(caught.value)
    assert "claim failed" in message
    for driver_text in ("relation", "work_hidden_name", "does not exist", "postgres"):
        assert driver_text not in message
    assert isinstance(caught.value.__cause__, psycopg.Error)
