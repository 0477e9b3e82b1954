"""Every engine call that acts for a team refuses a team id that is not one, before
anything is written: a typo would otherwise start, hold or keep for a team that does
not exist."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest

from engine.api.bulk_commands import BulkCommands
from engine.api.client import Client
from engine.api.executions import Executions
from engine.model.errors import InputRefused
from engine.model.holds import HoldScope
from engine.store import bulk_commands, reads, retention
from engine.store.bulk_commands import BulkCommand
from engine.store.store import Store
from tests.integration.transition_builders import SINGLE, single_definition

BAD = "../escaped"


@pytest.fixture
async def client(pg_dsn: str, schema: str) -> AsyncIterator[Client]:
    store = await Store.open(pg_dsn, schema)
    client = Client(store)
    await client.publish(single_definition("1"))
    yield client
    await store.close()


CALLS: dict[str, Callable[[Client], Awaitable[Any]]] = {
    "start": lambda c: c.start(SINGLE, "x", tenant=BAD),
    "start_run": lambda c: c.start_run(SINGLE, id="x", tenant=BAD),
    "place_hold": lambda c: c.place_hold(HoldScope(BAD), "ada", "incident"),
    "release_hold": lambda c: c.release_hold(BAD, "h1", "ada", "over"),
    "retention policy": lambda c: retention.set_policy(c.store, BAD, timedelta(days=1), "ada"),
    "retention policy removal": lambda c: retention.remove_policy(c.store, BAD),
    "bulk command": lambda c: BulkCommands(c).act(
        BulkCommand("b1", BAD, "pause", "", {}, "ada", "incident", ("x",))
    ),
    "machine submit": lambda c: Executions(c).submit(
        SINGLE, parent="p", input=None, key="k", actor="ada", team=BAD, scope="operator"
    ),
}


@pytest.mark.parametrize("call", CALLS.values(), ids=CALLS.keys())
async def test_a_bad_team_is_refused_and_nothing_is_written(
    client: Client, call: Callable[[Client], Awaitable[Any]]
) -> None:
    with pytest.raises(InputRefused, match="a team id has 1 to 63 characters"):
        await call(client)

    assert (await reads.list_instances(client.store, limit=10)).rows == ()
    assert await retention.policies(client.store) == []
    assert await bulk_commands.find_bulk(client.store, "b1") is None
