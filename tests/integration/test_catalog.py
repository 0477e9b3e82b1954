"""Published definitions: immutable versions, conflicts, deprecation, start resolution."""

from __future__ import annotations

from dataclasses import replace

import pytest

from engine.api.client import Client, StartConflict
from engine.decide.decisions import child_instance_id
from engine.model.definitions import Definition
from engine.model.errors import DefinitionNotFound
from engine.model.identifiers import local_instance_id, team_instance_id
from engine.model.validation import parse_definition
from engine.store import catalog, reads
from engine.store.statements.transitions import START_TRANSITION
from engine.store.store import Store
from examples import documents as document_approval
from tests.integration.transition_builders import RETRY, single_definition


@pytest.fixture
def store(default_store: Store) -> Store:
    return default_store


async def test_publishing_the_same_content_again_is_a_no_op(store: Store) -> None:
    definition = single_definition("1")
    assert await catalog.publish(store, definition, "alice") is True
    assert await catalog.publish(store, definition, "bob") is False
    [published] = await catalog.versions(store)
    assert published.definition.fingerprint == definition.fingerprint
    assert published.published_by == "alice"


async def test_same_version_with_other_content_is_a_conflict(store: Store) -> None:
    await catalog.publish(store, single_definition("1"))
    other = replace(single_definition("1"), deprecated=True)  # another fingerprint
    with pytest.raises(catalog.DefinitionConflict, match="publish a new version"):
        await catalog.publish(store, other)


async def test_latest_active_version_is_started_and_deprecated_ones_refuse(
    store: Store,
) -> None:
    client = Client(store)
    await client.publish(single_definition("1"))
    await client.publish(single_definition("2"))
    state = await client.start("store-single", "latest")
    assert state.definition.version == "2"
    await catalog.deprecate(store, "store-single", "2")
    assert (await client.start("store-single", "older")).definition.version == "1"
    with pytest.raises(DefinitionNotFound, match="deprecated and refuses new instances"):
        await client.start("store-single", "pinned", version="2")
    registry = await catalog.load_registry(store)
    assert registry.get("store-single", "2") is not None  # existing instances still resolve


async def test_starting_is_idempotent_per_id(store: Store) -> None:
    client = Client(store)
    await client.publish(single_definition("1"))
    first = await client.start("store-single", "order-1", {"qty": 1})
    again = await client.start("store-single", "order-1", {"qty": 1})
    assert again.instance_id == first.instance_id and again.input == first.input
    with pytest.raises(StartConflict, match="another definition or input"):
        await client.start("store-single", "order-1", {"qty": 2})


async def test_a_retried_start_joins_after_a_new_version_or_a_deprecation(store: Store) -> None:
    """A start retried (the same id and input) finds the instance its first try made,
    though meanwhile another version became the latest or its own was deprecated: a
    client retrying after a lost answer was told of a conflict, or of a deprecated
    version, about the very instance it had started."""
    client = Client(store)
    await client.publish(single_definition("1"))
    await client.start("store-single", "order-1", {"qty": 1})
    pinned, _ = await client.start_or_join("store-single", "order-2", {"qty": 1}, version="1")
    await client.publish(single_definition("2"))

    retrying = Client(store)  # another process, which never started it on version 1
    again, created = await retrying.start_or_join("store-single", "order-1", {"qty": 1})
    assert (again.instance_id, again.definition.version, created) == ("order-1", "1", False)
    with pytest.raises(StartConflict, match="another definition or input"):
        await client.start("store-single", "order-1", {"qty": 2})
    with pytest.raises(StartConflict, match="another definition or input"):
        await client.start("store-single", "order-2", {"qty": 1}, version="2")

    await catalog.deprecate(store, "store-single", "1")
    again, created = await client.start_or_join("store-single", "order-2", {"qty": 1}, "1")
    assert (again.instance_id, created) == (pinned.instance_id, False)
    with pytest.raises(DefinitionNotFound, match="deprecated and refuses new instances"):
        await client.start("store-single", "order-2", {"qty": 2}, version="1")
    with pytest.raises(DefinitionNotFound, match="deprecated and refuses new instances"):
        await client.start("store-single", "order-3", {"qty": 1}, version="1")


async def test_a_version_published_elsewhere_is_started_by_a_client_that_never_saw_it(
    store: Store,
) -> None:
    """A client keeps parsed definitions in its registry and the version it last read
    as current; a start on that version is refused by the store once another was
    published, the client reads which version is current, and a version the registry
    lacks makes it reload."""
    client = Client(store)
    await client.publish(single_definition("1"))
    assert (await client.start("store-single", "first")).definition.version == "1"
    await Client(store).publish(single_definition("2"))  # another process publishes
    assert (await client.start("store-single", "second")).definition.version == "2"
    pinned = await client.start("store-single", "pinned", version="1")
    assert pinned.definition == single_definition("1").ref


async def test_a_start_on_the_version_a_client_knows_is_latest_is_one_statement(
    pg_dsn: str, schema: str, store: Store
) -> None:
    """A client that read the latest version once starts the next instances without
    reading the catalog again (one round trip: latency), and the start statement itself
    refuses that version once it moved, as the tests above show."""
    sent: list[str] = []
    counting = await Store.open(pg_dsn, schema, statement_filter=lambda q: sent.append(q) or q)
    try:
        client = Client(counting)
        await Client(store).publish(single_definition("1"))
        await client.start("store-single", "first")  # reads which version is latest
        sent.clear()
        assert (await client.start("store-single", "second")).definition.version == "1"
        assert [q for q in sent if "definitions" in str(q)] == [START_TRANSITION]
        assert len(sent) == 1
    finally:
        await counting.close()


async def test_unknown_names_are_clear_errors(store: Store) -> None:
    with pytest.raises(DefinitionNotFound, match="no active version of nothing"):
        await catalog.resolve_for_start(store, "nothing", None)
    with pytest.raises(DefinitionNotFound, match="nothing@1 is not published"):
        await catalog.deprecate(store, "nothing", "1")


async def test_a_name_belongs_to_the_team_that_first_published_it(store: Store) -> None:
    assert await catalog.publish(store, single_definition("1"), "alice", team="red")
    with pytest.raises(catalog.DefinitionConflict, match="belongs to another team"):
        await catalog.publish(store, single_definition("2"), "bob", team="blue")
    assert [v.team_id for v in await catalog.versions(store, team="red")] == ["red"]
    assert await catalog.versions(store, team="blue") == []


async def test_instances_and_their_work_carry_the_starting_team(store: Store) -> None:
    client = Client(store)
    await client.publish(single_definition("1"))
    await client.start("store-single", "team-order", tenant="red")
    row = await reads.get_instance(store, "team-order")
    assert row.tenant_id == "red"
    async with store.connection() as conn:
        tenants = await (await conn.execute("SELECT DISTINCT tenant_id FROM work")).fetchall()
    assert tenants == [("red",)]
    listed = await reads.list_instances(store, tenant="red")
    assert [r.instance_id for r in listed.rows] == ["team-order"]
    assert (await reads.list_instances(store, tenant="blue")).rows == ()


async def test_two_teams_store_their_own_instance_of_one_id(store: Store) -> None:
    client = Client(store)
    await client.publish(single_definition("1"))
    for team, qty in (("red", 1), ("blue", 2)):
        await client.start(
            "store-single", team_instance_id(team, "order-1"), {"qty": qty}, tenant=team
        )

    rows = await reads.get_instances(store, ["red:order-1", "blue:order-1", "order-1"])
    assert {i: r.tenant_id for i, r in rows.items()} == {
        "red:order-1": "red",
        "blue:order-1": "blue",
    }
    blue = await client.inspect("blue:order-1")
    assert blue.value("input") == {"qty": 2}
    async with store.connection() as conn:
        work = await (await conn.execute("SELECT work_id, tenant_id FROM work")).fetchall()
    assert all(work_id.startswith(f"{team}:order-1") for work_id, team in work), work
    kid = child_instance_id(team_instance_id("red", "order-1"), "kid")
    assert local_instance_id("red", kid) == "order-1/kid"  # a child stays in its team


def parent_of(child: Definition, name: str = "store-parent") -> Definition:
    """A definition whose one step runs ``child`` pinned to its exact version."""
    step = {"name": "kid", "kind": "child", "target": child.name, "timeout": "1m"}
    step |= {"input_limit": 1024, "result_limit": 1024, "retry": RETRY}
    pin = {"name": child.name, "version": child.version, "fingerprint": child.fingerprint}
    document = {"name": name, "version": "1", "mode": "orchestration"}
    return parse_definition(document | {"steps": [step | {"child_definition": pin}]})


async def test_a_child_must_pin_a_version_the_team_published(store: Store) -> None:
    child = single_definition("1")
    with pytest.raises(catalog.ChildDefinitionNotFound) as missing:
        await catalog.publish(store, parent_of(child), "bob", team="blue")
    await catalog.publish(store, child, "alice", team="red")

    with pytest.raises(catalog.ChildDefinitionNotFound) as theirs:
        await catalog.publish(store, parent_of(child), "bob", team="blue")

    assert str(theirs.value) == str(missing.value)  # says nothing of red's version
    assert "kid pins child definition store-single@1" in str(theirs.value)
    assert "not published in this team" in str(theirs.value)
    assert await catalog.versions(store, team="blue") == []
    assert await catalog.publish(store, parent_of(child), "alice", team="red")


async def test_a_machine_is_published_and_read_back_with_its_fingerprint(store: Store) -> None:
    """A manifest's state variants are a list, so their order (part of the fingerprint)
    survives PostgreSQL's jsonb, which keeps no object key order."""
    machine = document_approval.flow.definition
    assert await catalog.publish(store, machine, "alice") is True
    assert await catalog.publish(store, parse_definition(document_approval.flow.document)) is False
    [published] = await catalog.versions(store)
    assert published.definition == machine
    assert published.definition.fingerprint == machine.fingerprint
