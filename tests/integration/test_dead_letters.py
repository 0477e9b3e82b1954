"""Dead letters against a real PostgreSQL: listing, and one audited resolution per fence.

Invariant 42 of the reference's section d: each dead-letter fence is resolved at most
once, the same command replays as a no-op, a different command on the same fence
conflicts, a stale token is rejected, and a retry readmits the work so that the next
claim bumps the token.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from engine.api.client import Client
from engine.cli.runtime import DEAD_LETTERS_WAIT, STOPPED_AT_DEAD_LETTER, STOPPED_AT_DISCARDED
from engine.model.validation import parse_definition
from engine.store import leases, sweeps, work_views
from engine.store.clock import ManualClock
from engine.store.dead_letters import (
    DeadLetterPage,
    ResolutionConflict,
    list_dead_letters,
    resolve,
    retry_window,
)
from engine.store.dead_letters import make_resolution as make
from engine.store.errors import StaleLease
from engine.store.leases import WorkRequestInvalid
from engine.store.rows import WorkState
from engine.store.store import Store
from tests.integration.factories import (
    adjust_work,
    inspect_lines,
    open_store,
    seed_work,
    work_row,
)

T0 = datetime(2031, 6, 7, 8, 9, 10, 654321, tzinfo=UTC)
LEASE = timedelta(seconds=30)
MINUTE = timedelta(minutes=1)
DAY = timedelta(days=1)
RESOLUTIONS = "SELECT command_id, lease_token, action FROM work_resolutions ORDER BY lease_token"


async def dead_lettered(store: Store, code: str = "poison", count: int = 1) -> list[leases.Lease]:
    """Seed, claim and dead-letter ``count`` work items; returns their (finished) leases."""
    await seed_work(store, count)
    claimed = await leases.claim(store, "worker", LEASE, count)
    for lease in claimed:
        await leases.dead_letter(store, lease, code)
    return claimed


async def retry(store: Store, command: str, lease: leases.Lease, at: datetime):
    fence = (lease.instance_id, lease.work_id, lease.token)
    return await resolve(store, make(command, *fence, "retry", "alice", "fixed", at, at, at + DAY))


async def discard(store: Store, command: str, lease: leases.Lease, reason: str = "obsolete"):
    fence = (lease.instance_id, lease.work_id, lease.token)
    return await resolve(store, make(command, *fence, "discard", "bob", reason, store.now()))


def fences(page: DeadLetterPage) -> list[tuple[str, int]]:
    return [(item.work_id, item.token) for item in page.items]


async def resolution_rows(store: Store) -> list[tuple]:
    async with store.connection() as conn:
        rows = await (await conn.execute(RESOLUTIONS)).fetchall()
        await conn.rollback()
    return rows


async def test_a_dead_letter_is_resolved_once_per_fence(
    pg_dsn: str, store: Store, clock: ManualClock
) -> None:
    """42: the whole life: dead letter, list, retry, replay, stale, again, discard."""
    (first,) = await dead_lettered(store)
    page = await list_dead_letters(store)
    assert fences(page) == [(first.work_id, 1)]
    assert (page.items[0].failure_code, page.items[0].failed_at) == ("poison", T0)
    assert page.next_cursor is None

    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as listener:
        await listener.execute(f"LISTEN {store.channel}")
        assert (await retry(store, "cmd-retry", first, T0)).replayed is False
        async with asyncio.timeout(5):  # due now: idle workers are woken
            assert [n async for n in listener.notifies(stop_after=1)]
    assert (await retry(store, "cmd-retry", first, T0)).replayed is True
    assert fences(await list_dead_letters(store)) == []
    with pytest.raises(StaleLease):
        await discard(store, "cmd-late-discard", first)
    row = await work_row(store, first.work_id)
    expected = (WorkState.AVAILABLE, "", T0 + DAY)
    assert (row["state"], row["failure_code"], row["deadline"]) == expected

    second = (await leases.claim(store, "worker", LEASE, 1))[0]
    assert (second.work_id, second.token, second.attempt) == (first.work_id, 2, 2)
    await leases.dead_letter(store, second, "poison-again")
    assert fences(await list_dead_letters(store)) == [(first.work_id, 2)]
    assert (await discard(store, "cmd-discard", second)).replayed is False
    assert fences(await list_dead_letters(store)) == []
    assert (await work_row(store, first.work_id))["state"] == WorkState.DEAD_LETTERED
    assert await resolution_rows(store) == [("cmd-retry", 1, 1), ("cmd-discard", 2, 2)]
    clock.advance(DAY)
    assert await leases.claim(store, "worker", LEASE, 1) == []


async def test_other_commands_on_a_resolved_fence_conflict(store: Store) -> None:
    """42: a different command for the same fence, or a reused command id, conflicts."""
    (lease,) = await dead_lettered(store)
    await discard(store, "cmd-1", lease)
    with pytest.raises(ResolutionConflict, match="already resolved"):
        await discard(store, "cmd-2", lease)
    with pytest.raises(ResolutionConflict, match="already resolved"):
        await retry(store, "cmd-3", lease, T0)
    with pytest.raises(ResolutionConflict, match="cmd-1"):
        await discard(store, "cmd-1", lease, reason="another reason")
    assert await resolution_rows(store) == [("cmd-1", 1, 2)]


async def test_the_same_command_given_again_later_replays_what_was_recorded_first(
    store: Store,
) -> None:
    """A command given again after an unknown outcome reads the clock again: the same id,
    fence, action, actor and reason is still a replay, and the first times stand."""
    (lease,) = await dead_lettered(store)
    assert (await retry(store, "cmd-again", lease, T0)).replayed is False
    again = await retry(store, "cmd-again", lease, T0 + MINUTE)
    assert again.replayed is True and again.recorded is not None
    assert (again.recorded.occurred_at, again.recorded.retry_at) == (T0, T0)
    with pytest.raises(ResolutionConflict, match="cmd-again"):  # another action
        await discard(store, "cmd-again", lease)
    assert await resolution_rows(store) == [("cmd-again", 1, 1)]


def test_a_retry_window_defaults_and_is_bounded() -> None:
    assert retry_window(T0) == (T0, T0 + DAY)
    assert retry_window(T0, T0 + MINUTE) == (T0 + MINUTE, T0 + MINUTE + DAY)
    assert retry_window(T0, None, T0 + MINUTE) == (T0, T0 + MINUTE)
    with pytest.raises(WorkRequestInvalid, match="MAX_RETRY_IN"):
        retry_window(T0, T0 + timedelta(days=31))
    with pytest.raises(WorkRequestInvalid, match="MAX_DEADLINE_IN"):
        retry_window(T0, T0, T0 + timedelta(days=366))


async def test_a_stale_or_unknown_fence_is_rejected(store: Store) -> None:
    (lease,) = await dead_lettered(store)
    unknown = [
        (lease.instance_id, lease.work_id, 2),
        (lease.instance_id, "no-such-work", 1),
        ("no-such-instance", lease.work_id, 1),  # the key names the instance too
    ]
    for n, fence in enumerate(unknown):
        with pytest.raises(StaleLease):
            await resolve(store, make(f"cmd-{n}", *fence, "discard", "bob", "x", T0))
    await seed_work(store, 1)
    (live,) = await leases.claim(store, "worker", LEASE, 1)
    with pytest.raises(StaleLease):  # leased work is no dead letter
        fence = (live.instance_id, live.work_id, live.token)
        await resolve(store, make("cmd-live", *fence, "discard", "bob", "x", T0))
    assert await resolution_rows(store) == []


async def test_the_same_command_sent_twice_at_once_is_recorded_once(
    pg_dsn: str, schema: str, store: Store, clock: ManualClock
) -> None:
    """42, 2: concurrent exact replays both succeed; one writes."""
    (lease,) = await dead_lettered(store)
    async with open_store(pg_dsn, schema, clock) as rival:
        results = await asyncio.gather(
            retry(store, "cmd-twice", lease, T0), retry(rival, "cmd-twice", lease, T0)
        )
    assert sorted(r.replayed for r in results) == [False, True]
    assert await resolution_rows(store) == [("cmd-twice", 1, 1)]


async def test_a_swept_deadline_is_a_dead_letter_that_can_be_retried(
    store: Store, clock: ManualClock
) -> None:
    """Gap f.2: work that was never claimed gets fence 1; its retry readmits it."""
    (work_id,) = await seed_work(store, 1, deadline=T0 + MINUTE)
    clock.set(T0 + MINUTE)
    assert await sweeps.sweep_expired_deadlines(store) == 1
    (item,) = (await list_dead_letters(store)).items
    assert (item.work_id, item.token, item.failure_code) == (work_id, 1, sweeps.DEADLINE_EXCEEDED)
    later = T0 + 2 * MINUTE
    times = (clock.now(), later, later + DAY)
    fence = (item.instance_id, work_id, 1)
    await resolve(store, make("cmd", *fence, "retry", "carol", "more time", *times))
    assert await leases.claim(store, "worker", LEASE, 1) == []
    clock.set(later)
    lease = (await leases.claim(store, "worker", LEASE, 1))[0]
    assert (lease.work_id, lease.token, lease.attempt) == (work_id, 2, 1)


async def test_pages_are_keyset_ordered_and_exact(store: Store, clock: ManualClock) -> None:
    """Keyset on (failed_at, work_id); an exactly full last page says there is no more."""
    await seed_work(store, 5)
    claimed = await leases.claim(store, "worker", LEASE, 5)
    for lease in claimed:
        clock.advance(timedelta(microseconds=1) if lease is not claimed[2] else timedelta(0))
        await leases.dead_letter(store, lease, "poison")
    seen, cursor = [], None
    for expected_size in (2, 2, 1):
        page = await list_dead_letters(store, cursor, 2)
        assert len(page.items) == expected_size
        seen.extend(page.items)
        cursor = page.next_cursor
    assert cursor is None
    keys = [(item.failed_at, item.work_id) for item in seen]
    assert keys == sorted(keys) and len(set(keys)) == 5
    exact = await list_dead_letters(store, None, 5)
    assert len(exact.items) == 5 and exact.next_cursor is None


async def test_invalid_commands_are_rejected_before_the_database() -> None:
    nowhere = Store(None, "nowhere", ManualClock(T0))  # type: ignore[arg-type]
    valid = {
        "command_id": "cmd",
        "instance_id": "i",
        "work_id": "i#w",
        "token": 1,
        "action": "retry",
        "actor": "alice",
        "reason": "fixed",
        "occurred_at": T0,
        "retry_at": T0,
        "deadline": T0 + DAY,
    }
    cases = [
        ({"retry_at": T0 - timedelta(microseconds=1)}, "not in the past"),
        ({"deadline": T0}, "deadline"),
        ({"deadline": None}, "both"),
        ({"action": "discard"}, "neither"),
        ({"action": "delete"}, "action"),
        ({"actor": ""}, "actor"),
        ({"actor": " alice "}, "actor"),
        ({"reason": " "}, "reason"),
        ({"reason": "x" * 501}, "reason"),
        ({"token": 0}, "token"),
        ({"command_id": ""}, "command id"),
        ({"instance_id": ""}, "instance id"),
        ({"work_id": 7}, "work id"),
        ({"occurred_at": datetime(2031, 1, 1)}, "time zone"),
        ({"limit": 101}, "MAX_PAGE_ITEMS"),
    ]
    for change, fragment in cases:
        with pytest.raises(WorkRequestInvalid, match=fragment):
            if "limit" in change:
                await list_dead_letters(nowhere, None, change["limit"])
            else:
                await resolve(nowhere, make(**{**valid, **change}))


RETRY = {"max_attempts": 1, "initial_delay": "1s", "max_delay": "1s"}
FORK = {
    "name": "dl.fork",
    "version": "1",
    "mode": "orchestration",
    "steps": [
        {"name": "both", "kind": "parallel", "branches": ["a", "b"], "fan_out_limit": 2},
        *(
            {"name": n, "kind": "activity", "target": f"t.{n}", "timeout": "5s", "retry": RETRY}
            for n in ("a", "b")
        ),
        {"name": "joined", "kind": "join", "branches": ["a", "b"]},
    ],
}


async def test_inspect_says_stopped_only_when_no_other_work_is_left(
    store: Store, clock: ManualClock, pg_dsn: str, schema: str
) -> None:
    """One branch dead-lettered, the other still due: the instance is not stopped, and
    ``wayline inspect`` says what it waits for, then that the dead letter waits for an
    operator; once the other branch is dead-lettered too, that it is stopped."""
    client = Client(store)
    await client.publish(parse_definition(FORK))
    await client.start("dl.fork", "fork-1")
    rows = await store_rows(store, "fork-1")
    await adjust_work(store, [rows[0]], deadline=clock.now() + MINUTE)
    clock.set(clock.now() + 2 * MINUTE)
    assert await sweeps.sweep_expired_deadlines(store) == 1
    shown = await inspect_lines(pg_dsn, schema, "fork-1")
    assert shown[-2] == f"  {DEAD_LETTERS_WAIT}"
    assert shown[-3].startswith("  now: ")
    assert shown[-1].startswith("  no worker: no running worker runs t.a: "), "none runs here"
    await adjust_work(store, rows[1:], deadline=clock.now() + MINUTE)
    clock.set(clock.now() + 2 * MINUTE)
    assert await sweeps.sweep_expired_deadlines(store) == 1
    assert (await inspect_lines(pg_dsn, schema, "fork-1"))[-1] == f"  now: {STOPPED_AT_DEAD_LETTER}"


async def test_a_discarded_dead_letter_is_not_shown_as_waiting_for_an_operator(
    store: Store, clock: ManualClock, pg_dsn: str, schema: str
) -> None:
    """Once discarded, a dead letter is resolved: ``wayline inspect`` and the work view
    say so, instead of asking an operator to resolve it (the dead letters list, where
    that would lead, no longer shows it)."""
    client = Client(store)
    await client.publish(parse_definition(FORK))
    await client.start("dl.fork", "fork-2")
    rows = await store_rows(store, "fork-2")
    await adjust_work(store, rows, deadline=clock.now() + MINUTE)
    clock.set(clock.now() + 2 * MINUTE)
    assert await sweeps.sweep_expired_deadlines(store) == 2
    for n, row in enumerate(await work_views.instance_work(store, "fork-2")):
        assert row.unresolved and not row.discarded
        fence = ("fork-2", row.work_id, row.token)
        await resolve(store, make(f"c-{n}", *fence, "discard", "bob", "obsolete", clock.now()))
    work = await work_views.instance_work(store, "fork-2")
    assert [(w.discarded, w.unresolved) for w in work] == [(True, False)] * 2
    shown = await inspect_lines(pg_dsn, schema, "fork-2")
    assert shown[-1] == f"  now: {STOPPED_AT_DISCARDED}"
    assert sum(line.startswith("  discarded dead letter activity ") for line in shown) == 2
    assert not any(DEAD_LETTERS_WAIT in line for line in shown)


async def store_rows(store: Store, instance: str) -> list[str]:
    return [w.work_id for w in await work_views.instance_work(store, instance)]
