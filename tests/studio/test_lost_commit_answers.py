"""A commit whose answer was lost, met by an operator in the studio: the answer says the
outcome is unknown and how to learn it without acting twice (it was an "unexpected
error" 500, and a command the API had named itself could not be sent again)."""

from __future__ import annotations

import re
import uuid

import pytest

from engine import Client, CommitUnknown
from studio.operations.dead_letters import LOST_ANSWER
from studio.roles import Role
from tests.studio.live import LiveStudio, SignedInClient, definition


async def _lost(*args: object, **kwargs: object) -> None:
    raise CommitUnknown("the outcome is unknown")


@pytest.fixture
def instance(studio: LiveStudio, team: str) -> str:
    """A new instance of a definition of its own."""
    name = f"lost.{uuid.uuid4().hex[:6]}"
    studio.publish(team, definition(name))
    return studio.start(team, name)


@pytest.fixture
def operator(studio: LiveStudio, team: str) -> SignedInClient:
    return studio.client(studio.user(team, Role.OPERATOR))


def test_a_command_whose_commit_answer_was_lost_names_its_id_to_send_again(
    instance: str, operator: SignedInClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    operator.headers["X-CSRF-Token"] = operator.csrf
    actions = f"/api/instances/{instance}/actions"

    with monkeypatch.context() as patched:
        patched.setattr(Client, "command", _lost)
        lost = operator.post(actions, json={"action": "pause", "reason": "incident"})
    assert lost.status_code == 503
    said = re.fullmatch(
        r"the outcome is unknown \(the answer to the commit was lost\): send the same "
        r"command again with command id ([0-9a-f]{32}) to learn it",
        lost.json()["error"],
    )
    assert said, lost.text

    body = {"action": "pause", "reason": "incident", "command_id": said.group(1)}
    for _ in range(2):  # once recorded, the same id again is a replay
        assert operator.post(actions, json=body).status_code == 200
    audit = operator.get(f"/api/instances/{instance}").json()["audit"]
    assert [(a["action"], a["command_id"]) for a in audit] == [("pause", said.group(1))]


def test_a_dead_letter_whose_resolution_answer_was_lost_says_so_and_stays_listed(
    studio: LiveStudio, instance: str, operator: SignedInClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert studio.overdue(instance) == 1
    page = operator.get("/dead-letters").text
    (item,) = [f for f in re.findall(r'name="item" value="([^"]+)"', page) if instance in f]
    command_id = re.search(r'name="command_id" value="(\w+)"', page).group(1)
    form = {"action": "discard", "reason": "obsolete", "command_id": command_id}

    monkeypatch.setattr(Client, "resolve_dead_letter", _lost)
    answer = operator.post(
        "/dead-letters/resolve", data={**form, "_csrf": operator.csrf, "item": [item]}
    )
    assert answer.status_code == 200
    assert re.findall(r'<span class="pill error">(\w+)</span>', answer.text) == ["unknown"]
    assert LOST_ANSWER in answer.text
    assert f'name="item" value="{item}"' in answer.text, "not resolved: still listed"
