"""The replay-compatibility gate on a real store (issue 21): publishing judges the
running instances of other versions, keeps the report with the version, and
``require_compatible`` refuses a version an instance could not move to, naming it."""

from __future__ import annotations

from typing import Any

import pytest

from engine import IncompatibleInstances, Queries
from engine.api.client import Client
from engine.model.definitions import Definition
from engine.model.validation import parse_definition
from engine.store import catalog
from engine.store.store import Store
from tests.integration.transition_builders import RETRY

NAME = "order"


@pytest.fixture
def store(default_store: Store) -> Store:
    return default_store


def activity(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "kind": "activity",
        "target": f"shop.{name}",
        "timeout": "10s",
        "input_limit": 1000,
        "result_limit": 1000,
        "retry": RETRY,
    }


PAID = {"name": "paid", "kind": "signal", "target": "on.paid", "timeout": "1h", "input_limit": 100}


def order(version: str, *steps: dict[str, Any]) -> Definition:
    return parse_definition(
        {"name": NAME, "version": version, "mode": "orchestration", "steps": list(steps)}
    )


async def two_running(client: Client) -> None:
    """order-77 has paid, so its charge is in flight; order-78 still waits to be paid."""
    await client.publish(order("1", PAID, activity("charge")), "alice", "team-a")
    await client.start(NAME, "order-77", {"n": 77}, tenant="team-a")
    await client.start(NAME, "order-78", {"n": 78}, tenant="team-a")
    await client.signal("order-77", "paid", "pay-77", {"by": "card"})


async def test_require_compatible_refuses_a_version_a_running_instance_cannot_take(
    store: Store,
) -> None:
    client = Client(store)
    await two_running(client)
    without_charge = order("2", PAID, activity("ship"))
    with pytest.raises(IncompatibleInstances) as refused:
        await client.publish(without_charge, "alice", "team-a", require_compatible=True)
    assert str(refused.value) == (
        "order@2 was not published: 1 running instance cannot move to it: "
        "order-77: step charge is in flight and was removed"
    )
    assert [v.definition.version for v in await catalog.versions(store)] == ["1"]
    assert await Queries(store).compatibility_report(NAME, "2") is None


async def test_the_report_is_stored_with_the_version_it_judged(store: Store) -> None:
    client = Client(store)
    await two_running(client)
    assert await client.publish(order("2", PAID, activity("ship")), "alice", "team-a")
    stored = await Queries(store).compatibility_report(NAME, "2")
    assert stored is not None
    report = stored.report
    assert report.summary() == [
        "order@2: 2 running checked: 1 compatible, 1 incompatible",
        "incompatible order-77 (v1): step charge is in flight and was removed",
    ]
    by_id = {v.instance_id: v for v in report.verdicts}
    assert by_id["order-78"].compatible
    assert by_id["order-78"].from_fingerprint == order("1", PAID, activity("charge")).fingerprint

    keeps_charge = order("3", PAID, activity("charge"), activity("ship"))
    assert await client.publish(keeps_charge, "alice", "team-a", require_compatible=True)
    third = await Queries(store).compatibility_report(NAME, "3")
    assert third is not None and third.report.acceptable
    assert [v.instance_id for v in third.report.verdicts] == ["order-77", "order-78"]
    assert not await client.publish(keeps_charge, "bob", "team-a")
    again = await Queries(store).compatibility_report(NAME, "3")
    assert again == third, "publishing again keeps the first report"
