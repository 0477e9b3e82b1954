"""The store reads the studio's operator pages use, against a real PostgreSQL.

Per-team dead-letter pages and their triage groups, the audit of resolutions, an
instance's work rows with their leases, the leases each worker holds, several instance
rows at once, and the instance list's id and start-time filters.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from engine.model.transitions import WorkKind
from engine.store import leases, reads, work_views
from engine.store.clock import ManualClock
from engine.store.dead_letters import (
    dead_letter_groups,
    find_resolution,
    list_dead_letters,
    make_resolution,
    recent_resolutions,
    resolve,
)
from engine.store.store import Store
from engine.store.work_views import WorkState
from tests.integration.factories import DEFINITION, seed_work

T0 = datetime(2031, 6, 7, 8, 9, 10, tzinfo=UTC)
LEASE = timedelta(seconds=30)


async def dead_letters_of(store: Store, tenant: str, code: str, count: int) -> list[leases.Lease]:
    ids = await seed_work(store, count, tenant=tenant)
    claimed = await leases.claim(store, f"w-{tenant}", LEASE, count)
    assert sorted(lease.work_id for lease in claimed) == sorted(ids)
    for lease in claimed:
        await leases.dead_letter(store, lease, code)
    return claimed


async def test_dead_letters_are_listed_and_grouped_per_team(
    store: Store, clock: ManualClock
) -> None:
    red = await dead_letters_of(store, "red", "poison", 2)
    clock.advance(timedelta(seconds=1))
    await dead_letters_of(store, "red", "deadline-exceeded", 1)
    blue = await dead_letters_of(store, "blue", "poison", 1)

    page = await list_dead_letters(store, tenant="red")
    assert {d.tenant_id for d in page.items} == {"red"} and len(page.items) == 3
    poison = await list_dead_letters(store, tenant="red", failure_code="poison")
    assert sorted(d.work_id for d in poison.items) == sorted(lease.work_id for lease in red)
    assert [d.work_id for d in (await list_dead_letters(store, tenant="blue")).items] == [
        blue[0].work_id
    ]

    groups = await dead_letter_groups(store, tenant="red")
    assert [(g.failure_code, g.definition_name, g.definition_version, g.count) for g in groups] == [
        ("poison", DEFINITION.name, DEFINITION.version, 2),
        ("deadline-exceeded", DEFINITION.name, DEFINITION.version, 1),
    ]
    assert len(await dead_letter_groups(store, tenant="red", scan=1)) == 1  # bounded scan

    lease = red[0]
    fence = (lease.instance_id, lease.work_id, lease.token)
    discard = make_resolution("c-1", *fence, "discard", "alice", "obsolete", store.now())
    await resolve(store, discard)
    assert [g.count for g in await dead_letter_groups(store, tenant="red")] == [1, 1]
    audit = await recent_resolutions(store, tenant="red")
    assert [(r.command_id, r.actor, r.reason, r.action.value) for r in audit] == [
        ("c-1", "alice", "obsolete", "discard")
    ]
    assert audit[0].instance_id == lease.instance_id
    assert await find_resolution(store, lease.instance_id, "c-1") == audit[0]
    assert await find_resolution(store, lease.instance_id, "c-2") is None
    assert await find_resolution(store, "another-instance", "c-1") is None
    assert await recent_resolutions(store, tenant="blue") == []


async def test_an_instances_work_rows_and_the_leases_workers_hold(store: Store) -> None:
    await seed_work(store, 2, tenant="red")
    [lease] = await leases.claim(store, "worker-a", LEASE, 1)
    instance = lease.instance_id

    rows = await work_views.instance_work(store, instance)
    assert [r.work_id for r in rows] == [lease.work_id]
    row = rows[0]
    assert row.state is WorkState.LEASED and row.kind is WorkKind.ACTIVITY
    assert (row.lease_owner, row.token, row.deliveries) == ("worker-a", lease.token, 1)
    assert row.step == "charge" and row.attempt == 1
    assert row.lease_live(store.now())
    assert not row.lease_live(store.now() + LEASE)

    held = await work_views.held_leases(store, ["worker-a", "worker-b"])
    assert [r.work_id for r in held] == [lease.work_id]
    assert await work_views.held_leases(store, ["worker-a"], tenant="blue") == []
    assert await work_views.held_leases(store, []) == []
    key = (instance, lease.work_id)
    unknown = [(instance, "missing"), ("another-instance", lease.work_id)]
    rows_by_key = await work_views.work_rows(store, [key, *unknown])
    assert list(rows_by_key) == [key] and rows_by_key[key].tenant_id == "red"
    assert await work_views.work_rows(store, []) == {}
    with pytest.raises(ValueError, match="limit"):
        await work_views.instance_work(store, instance, limit=0)


async def test_several_instance_rows_and_list_filters(store: Store, clock: ManualClock) -> None:
    await seed_work(store, 1)
    clock.advance(timedelta(hours=1))
    await seed_work(store, 2)
    everything = await reads.list_instances(store, reads.InstanceView.ALL)
    ids = [r.instance_id for r in everything.rows]
    assert len(ids) == 3

    rows = await reads.get_instances(store, [ids[0], ids[2], "missing"])
    assert sorted(rows) == sorted([ids[0], ids[2]])
    assert await reads.get_instances(store, []) == {}

    one = await reads.list_instances(store, reads.InstanceView.ALL, instance_id=ids[1])
    assert [r.instance_id for r in one.rows] == [ids[1]]
    later = await reads.list_instances(
        store, reads.InstanceView.ALL, started_from=T0 + timedelta(minutes=30)
    )
    assert [r.instance_id for r in later.rows] == ids[1:]
    earlier = await reads.list_instances(
        store, reads.InstanceView.ALL, started_before=T0 + timedelta(minutes=30)
    )
    assert [r.instance_id for r in earlier.rows] == ids[:1]
