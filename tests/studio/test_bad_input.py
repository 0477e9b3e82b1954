"""Hostile input on every kind of field gets a clear 4xx, never a 500.

A NUL character anywhere (path, query, form, JSON body; PostgreSQL text cannot hold
one), JSON nested a thousand levels, a step that is not a step, a page cursor without
a time zone: each is answered with a status that says whose mistake it was and a
message saying what was wrong.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from engine.decide.operator_actions import Action
from studio.failures import NO_SUCH_PATH
from studio.roles import Role
from tests.studio.live import LiveStudio, SignedInClient, definition, login_token

DEEP = "[" * 1000 + "]" * 1000


@dataclass(frozen=True)
class World:
    """A team with a published definition, an instance waiting for approval (then a
    signal), and an admin of the team."""

    client: SignedInClient
    name: str
    instance: str

    def send(
        self, method: str, path: str, headers: dict[str, str] | None = None, **kwargs: Any
    ) -> httpx.Response:
        headers = {"X-CSRF-Token": self.client.csrf, **(headers or {})}
        path = path.format(name=self.name, instance=self.instance)
        return self.client.request(method, path, headers=headers, **kwargs)


@pytest.fixture(scope="module")
def world(studio: LiveStudio) -> Iterator[World]:
    team = studio.team()
    name = f"bad.{uuid.uuid4().hex[:6]}"
    document = definition(name)
    wait = {"target": "ops.sign", "timeout": "1h", "input_limit": 1024}
    document["steps"][:0] = [
        {"name": "sign", "kind": "approval", **wait},
        {"name": "go", "kind": "signal", **wait},
    ]
    studio.publish(team, document)
    instance = studio.start(team, name)
    yield World(studio.client(studio.user(team, Role.ADMIN)), name, instance)


NUL_REQUESTS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "api path id": ("GET", "/api/instances/a%00b", {}),
    "page path id": ("GET", "/instances/a%00b", {}),
    "api definition name": ("GET", "/api/definitions/a%00b", {}),
    "api version": ("GET", "/api/definitions/{name}/versions/1%00", {}),
    "api draft id": ("GET", "/api/drafts/a%00b", {}),
    "page draft id": ("GET", "/drafts/a%00b", {}),
    "api drill run": ("GET", "/api/drills/runs/a%00b", {}),
    "api token id": ("DELETE", "/api/tokens/a%00b", {}),
    "api query filter": ("GET", "/api/instances?definition=a%00b", {}),
    "page query filter": ("GET", "/instances?version=1%00", {}),
    "dead letter filter": ("GET", "/api/dead-letters?code=a%00b", {}),
    "api start input": ("POST", "/api/instances", {"json": {"definition": "?", "input": "\x00"}}),
    "api draft document": ("POST", "/api/drafts", {"json": {"document": {"name": "a\x00b"}}}),
    "api command reason": (
        "POST",
        "/api/instances/{instance}/actions",
        {"json": {"action": "pause", "reason": "why\x00"}},
    ),
    "api signal payload key": (
        "POST",
        "/api/instances/{instance}/signals",
        {"json": {"step": "go", "payload": {"a\x00": 1}}},
    ),
    "form field": ("POST", "/drafts", {"data": {"name": "a\x00b"}}),
    "form json field": (
        "POST",
        "/instances",
        {"data": {"definition": "{name}", "version": "1", "input": '"a\\u0000b"'}},
    ),
    "member username": ("POST", "/settings/members", {"data": {"username": "a\x00b"}}),
}


@pytest.mark.parametrize("request_", NUL_REQUESTS.values(), ids=NUL_REQUESTS.keys())
def test_a_nul_character_anywhere_is_a_400_with_a_message(
    world: World, request_: tuple[str, str, dict[str, Any]]
) -> None:
    method, path, kwargs = request_
    if "json" in kwargs and kwargs["json"].get("definition"):
        kwargs = {"json": {**kwargs["json"], "definition": world.name, "version": "1"}}
    if "data" in kwargs:
        data = {k: v.format(name=world.name) for k, v in kwargs["data"].items()}
        kwargs = {"data": {"_csrf": world.client.csrf, **data}}
    response = world.send(method, path, **kwargs)
    assert response.status_code == 400, response.text
    assert "NUL character" in response.text


def test_a_username_with_a_nul_character_is_a_400_at_sign_in(studio: LiveStudio) -> None:
    client = studio.client()
    token = login_token(client.get("/login"))
    response = client.post(
        "/login", data={"_login": token, "username": "ad\x00min", "password": "whatever"}
    )
    assert response.status_code == 400
    assert "NUL character" in response.text


def test_json_nested_a_thousand_levels_is_a_400(world: World) -> None:
    body = f'{{"definition": "{world.name}", "version": "1", "input": {DEEP}}}'
    api = world.send(
        "POST", "/api/instances", content=body, headers={"Content-Type": "application/json"}
    )
    assert api.status_code == 400
    assert api.json()["error"] == (
        "the request body is nested too deeply: at most 100 levels of arrays and objects"
    )
    csrf = {"_csrf": world.client.csrf}
    for path, field in (
        ("/instances", {"definition": world.name, "version": "1", "input": DEEP}),
        ("/instances/{instance}/signals/go", {"reason": "r", "payload": DEEP}),
        ("/instances/{instance}/actions/approve", {"step": "sign", "reason": "r", "payload": DEEP}),
    ):
        form = world.send("POST", path, data={**csrf, **field})
        assert form.status_code == 400, path
        assert "is nested too deeply: at most 100 levels" in form.text


@pytest.mark.parametrize("step", ["bad name!", "nosuch"])
@pytest.mark.parametrize("action", [Action.APPROVE, Action.RESOLVE_COMPENSATION])
def test_a_command_on_a_step_that_is_not_a_step_is_a_422(
    world: World, action: Action, step: str
) -> None:
    command = {"action": action.value, "reason": "why", "step": step, "code": "done"}
    if action is Action.APPROVE:
        del command["code"]
    api = world.send("POST", "/api/instances/{instance}/actions", json=command)
    assert api.status_code == 422, api.text
    assert step in api.json()["error"] or "the step must be" in api.json()["error"]
    form = world.send(
        "POST",
        f"/instances/{{instance}}/actions/{action.value}",
        data={"_csrf": world.client.csrf, **command},
    )
    assert form.status_code == 422, form.text


@pytest.mark.parametrize("path", ["/api/dead-letters", "/dead-letters"])
def test_a_page_cursor_without_a_time_zone_is_a_400(world: World, path: str) -> None:
    response = world.send("GET", path, params={"after": "2026-01-01T00:00:00|work-1"})
    assert response.status_code == 400
    assert "its time has no time zone" in response.text


@pytest.mark.parametrize(
    ("form", "says"),
    [
        ({"name": "x" * 100_000}, "the definition name must be 1 to 200 characters"),
        ({"name": "a name"}, "the definition name must be 1 to 200 characters"),
        ({"name": "fine", "version": "v 2"}, "the definition version must be 1 to 200"),
    ],
)
def test_a_new_draft_needs_a_name_and_version_publishing_would_take(
    world: World, form: dict[str, str], says: str
) -> None:
    """Refused at once, before a draft with a 100 KB name widens every page that lists
    it: the definitions page comes back with the form open, as typed, and the reason
    beside the field at fault (never an error page)."""
    created = world.send("POST", "/drafts", data={"_csrf": world.client.csrf, **form})
    assert created.status_code == 422
    field = "version" if "version" in form else "name"
    assert f'<p class="field-error" id="new-{field}-error" role="alert">{says}' in created.text
    assert f'id="new-{field}"' in created.text and 'aria-describedby="new-' in created.text
    assert f'value="{form[field]}"' in created.text
    assert '<details class="card new-definition" open>' in created.text


def test_an_api_path_no_route_serves_points_to_the_list_of_paths(world: World) -> None:
    """A mistyped path is told apart from a resource that is not there."""
    mistyped = world.send("GET", "/api/instance")
    assert mistyped.status_code == 404
    assert mistyped.json() == {"error": NO_SUCH_PATH, "problems": []}
    missing = world.send("GET", "/api/instances/no-such-instance")
    assert missing.status_code == 404
    assert missing.json()["error"] != NO_SUCH_PATH
