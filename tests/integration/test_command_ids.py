"""A command id names one command: a repeat of it acts once, and the id reused for
another command is refused, not reported as done (it would say "resume recorded" on
an instance that stays paused)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from engine.api.client import Client
from engine.decide.operator_actions import Action
from engine.model.errors import CommandConflict
from engine.model.instance import InstanceStatus
from engine.store.store import Store
from tests.integration.transition_builders import SINGLE, single_definition


@pytest.fixture
async def client(pg_dsn: str, schema: str) -> AsyncIterator[Client]:
    store = await Store.open(pg_dsn, schema)
    client = Client(store)
    await client.publish(single_definition("1"))
    await client.start(SINGLE, "o-1")
    yield client
    await store.close()


async def test_a_repeated_command_is_recorded_once(client: Client) -> None:
    await client.command("o-1", Action.PAUSE, "ops", "hold on", "c1")
    again = await client.command("o-1", Action.PAUSE, "ops", "hold on", "c1")

    assert again.status is InstanceStatus.PAUSED
    assert [a.command_id for a in again.audit] == ["c1"]


@pytest.mark.parametrize(
    ("action", "actor", "reason"),
    [
        (Action.RESUME, "ops", "hold on"),
        (Action.PAUSE, "someone-else", "hold on"),
        (Action.PAUSE, "ops", "another reason"),
    ],
)
async def test_a_command_id_reused_for_another_command_is_refused(
    client: Client, action: Action, actor: str, reason: str
) -> None:
    await client.command("o-1", Action.PAUSE, "ops", "hold on", "c1")

    with pytest.raises(CommandConflict, match="command id c1 was already used for pause by ops"):
        await client.command("o-1", action, actor, reason, "c1")

    state = await client.inspect("o-1")
    assert state.status is InstanceStatus.PAUSED
    assert [(a.command_id, a.action) for a in state.audit] == [("c1", "pause")]
