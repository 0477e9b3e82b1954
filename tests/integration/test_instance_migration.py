"""Migrating running instances along declared edges on a real store (issue 21): the
catalog keeps the edges and loads them into every registry; an instance is paused,
migrated and resumed, each audited with who, why and from which fingerprint to which;
the judge decides on the instance's state when acting, so an incompatible one (or one
that moved on since it was judged) is never migrated."""

from __future__ import annotations

import pytest

from engine import BulkCommands, DecisionRejected, IncompatibleInstances, InstanceStatus, Queries
from engine.api.bulk_commands import BulkCommand, command_id
from engine.api.client import Client
from engine.decide.bulk_actions import bulk_request
from engine.decide.operator_actions import Action
from engine.replay.fold import replay
from engine.store import catalog, reads
from engine.store.store import Store
from tests.integration.test_compatibility_reports import NAME, PAID, activity, order

V1 = order("1", PAID, activity("charge"))
WITHOUT_CHARGE = order("2", PAID, activity("ship"))
WITH_SHIP = order("3", PAID, activity("charge"), activity("ship"))


@pytest.fixture
def store(default_store: Store) -> Store:
    return default_store


async def published(store: Store) -> Client:
    client = Client(store)
    for definition in (V1, WITHOUT_CHARGE, WITH_SHIP):
        await client.publish(definition, "alice", "team-a")
    return client


async def test_an_instance_moves_along_a_declared_edge_and_the_audit_says_how(
    store: Store,
) -> None:
    client = await published(store)
    await client.start(NAME, "order-78", {"n": 78}, "1", tenant="team-a")
    with pytest.raises(DecisionRejected, match="no migration of order from 1 to 3"):
        await client.migrate("order-78", "3", "olga", "ship v3")
    assert await client.declare_migration(NAME, "1", "3", "olga", "v3 adds shipping")
    assert not await client.declare_migration(NAME, "1", "3", "bob", "again")
    (edge,) = await Queries(store).migration_edges(NAME)
    assert (edge.from_version, edge.to_version, edge.declared_by) == ("1", "3", "olga")

    moved = await client.migrate("order-78", "3", "olga", "ship v3", command_id="m-78")
    assert moved.definition == WITH_SHIP.ref and moved.status is InstanceStatus.RUNNING
    how = f"ship v3 (order@1 {V1.fingerprint[:12]}… -> order@3 {WITH_SHIP.fingerprint[:12]}…)"
    assert [(a.action, a.actor, a.reason) for a in moved.audit] == [
        ("pause", "olga", how),
        ("migrate", "olga", how),
        ("resume", "olga", how),
    ]
    again = await client.migrate("order-78", "3", "olga", "ship v3", command_id="m-78")
    assert again.audit == moved.audit, "a repeated migration acts once"
    history = [e async for e in reads.export_history(store, "order-78")]
    assert replay(await catalog.load_registry(store), history).digest == moved.digest

    await client.signal("order-78", "paid", "pay-78", {"by": "card"})
    state = await client.inspect("order-78")
    assert state.activities["charge"].input is not None, "v3 carries it on"


async def test_an_incompatible_instance_is_never_migrated(store: Store) -> None:
    client = await published(store)
    await client.declare_migration(NAME, "1", "2", "olga", "v2 ships instead of charging")
    await client.start(NAME, "order-77", {"n": 77}, "1", tenant="team-a")
    await client.signal("order-77", "paid", "pay-77", {"by": "card"})
    with pytest.raises(IncompatibleInstances) as refused:
        await client.migrate("order-77", "2", "olga", "ship v2")
    assert str(refused.value) == (
        "order-77: step charge is in flight and was removed; it was not migrated to order@2"
    )
    state = await client.inspect("order-77")
    assert state.definition == V1.ref and state.status is InstanceStatus.RUNNING
    assert state.audit == ()


async def test_a_verdict_is_taken_again_when_acting_never_reused(store: Store) -> None:
    client = await published(store)
    await client.declare_migration(NAME, "1", "2", "olga", "v2 ships instead of charging")
    await client.start(NAME, "order-79", {"n": 79}, "1", tenant="team-a")
    assert (await client.judge("order-79", "2")).compatible  # waiting to be paid
    await client.signal("order-79", "paid", "pay-79", {"by": "card"})  # it moves on
    with pytest.raises(IncompatibleInstances, match="step charge is in flight"):
        await client.migrate("order-79", "2", "olga", "ship v2")
    assert (await client.inspect("order-79")).definition == V1.ref


async def test_a_bulk_migration_judges_again_an_instance_that_moved_after_its_preview(
    store: Store,
) -> None:
    client = await published(store)
    await client.declare_migration(NAME, "1", "2", "olga", "v2 ships instead of charging")
    ids = ["order-80", "order-81", "order-82"]
    for n, instance_id in enumerate(ids):
        await client.start(NAME, instance_id, {"n": n}, "1", tenant="team-a")
    await client.command("order-82", Action.PAUSE, "olga", "looking at it")
    bulk = BulkCommands(client)
    request = bulk_request(Action.MIGRATE, arguments={"version": "2"})
    previews = await bulk.preview(ids, request)
    assert [(p.verdict.value, p.moves_to) for p in previews] == [
        ("applies", WITHOUT_CHARGE.ref)
    ] * 3
    effects = [r for r in previews[0].records if r != "operator_command_recorded"]
    assert effects[:3] == ["paused", "definition_migrated", "resumed"], "as migrate commits"

    await client.signal("order-81", "paid", "pay-81", {"by": "card"})  # it moves on
    asked = BulkCommand(
        "b-80", "team-a", "migrate", "", {"version": "2"}, "olga", "ship v2", tuple(ids)
    )
    outcome = await bulk.act(asked)
    results = {r.instance_id: (r.outcome, r.detail, r.status_after) for r in outcome.results}
    assert results == {
        "order-80": ("done", "migrated from order@1 to order@2", InstanceStatus.RUNNING),
        "order-81": (
            "refused",
            "step charge is in flight and was removed; it was not migrated to order@2",
            InstanceStatus.RUNNING,
        ),
        "order-82": ("done", "migrated from order@1 to order@2", InstanceStatus.PAUSED),
    }
    moved = await client.inspect("order-81")
    assert moved.definition == V1.ref and moved.audit == (), "never paused, never migrated"
    for instance_id in ("order-80", "order-82"):
        state = await client.inspect(instance_id)
        assert state.definition == WITHOUT_CHARGE.ref
        migrated = [a for a in state.audit if a.action == "migrate"]
        assert [a.command_id for a in migrated] == [f"{command_id('b-80', instance_id)}.migrate"]
    again = await bulk.act(asked)
    assert again.replayed and again.results == outcome.results
