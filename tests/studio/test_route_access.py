"""Every route of the route table, tried by every kind of caller.

Generated from ``studio.routes.ROUTES``: an anonymous caller and a member with each
role call each route (with valid CSRF tokens and real objects of their team in the
path), and the answer must be what the route's rule says: sign in first (401, or a
redirect to the sign-in page for pages), not allowed (403), or allowed (anything but
401/403, and never a server error). A route added without a rule cannot pass.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field

import httpx
import pytest

from engine.api.client import Client
from engine.decide.operator_actions import Action
from studio.accounts import api_tokens, people
from studio.app import create_app
from studio.definitions import drafts
from studio.instance_urls import instance_ref
from studio.roles import Access, Role, allows
from studio.routes import ROUTES, Route
from studio.settings import StudioSettings
from tests.studio.live import (
    PASSWORD,
    LiveStudio,
    SignedInClient,
    definition,
    login_token,
)
from verification import runs

CALLERS: tuple[Role | None, ...] = (None, *Role)
PLACEHOLDERS = {
    "{step:str}": "no_such_step",
    "{action:str}": "pause",
    "{job_id:str}": "no-such-job",
    "{drill_id:str}": "D1-kill-after_handler-s0",
    "{invitation_id:str}": "no-such-invitation",
    "{bulk_id:str}": "no-such-bulk",
    "{hold_id:str}": "no-such-hold",
    "{plan:str}": "no-such-plan",
    "{number:str}": "1",
}
"""Path values that name nothing real: the answer is then 404/409/422, never 401/403
for an allowed role (and never a server error)."""
PUBLIC_PREFIXES = ("/static/", "/schema")


@dataclass
class World:
    """One team with a member of each role, and fresh objects for path parameters."""

    studio: LiveStudio
    team: str = ""
    usernames: dict[Role, str] = field(default_factory=dict)
    clients: dict[Role, SignedInClient] = field(default_factory=dict)

    def client(self, role: Role | None) -> SignedInClient:
        if role is None:
            return self.studio.client()
        if role not in self.clients:
            self.clients[role] = self.studio.client(self.usernames[role])
        return self.clients[role]

    def forget(self, role: Role | None) -> None:
        self.clients.pop(role, None)  # type: ignore[arg-type]

    def path(self, route: Route) -> str:
        """The route's path with fresh objects of the team for its parameters."""
        path = route.path
        if "{name:str}" in path:
            name = f"route.{uuid.uuid4().hex[:8]}"
            self.studio.publish(self.team, definition(name))
            path = path.replace("{name:str}", name).replace("{version:str}", "1")
        if "{draft_id:str}" in path:
            draft = self.studio.run(
                lambda store: drafts.create_draft(store, self.team, definition("d"), "", "seed")
            )
            path = path.replace("{draft_id:str}", draft.draft_id)
        if "{user_id:str}" in path:
            path = path.replace("{user_id:str}", self._member())
        if "{ref:str}" in path:
            path = path.replace("{ref:str}", self._instance())
        if "{run_id:str}" in path:
            path = path.replace("{run_id:str}", self._drill_run())
        for name, value in PLACEHOLDERS.items():
            path = path.replace(name, value)
        if "{token_id:str}" in path:
            _, token = self.studio.run(
                lambda store: api_tokens.create_token(
                    store, self.team, Role.VIEWER, "t", "seed", creator_id=""
                )
            )
            path = path.replace("{token_id:str}", token.token_id)
        assert "{" not in path, f"no value for a parameter of {route.path}"
        return path

    def _instance(self) -> str:
        """An ended instance of the team (so its live stream ends at once)."""
        name = f"route.{uuid.uuid4().hex[:8]}"
        self.studio.publish(self.team, definition(name))
        instance_id = f"{name}/i-{uuid.uuid4().hex[:6]}"  # a '/' as child ids have

        async def start(store) -> None:
            client = Client(store)
            await client.start(name, instance_id, {}, "1", tenant=self.team)
            await client.command(instance_id, Action.TERMINATE, "seed", "routes test")

        self.studio.run(start)
        return instance_ref(instance_id)

    def _drill_run(self) -> str:
        run_id = f"c-route-{uuid.uuid4().hex[:8]}"
        self.studio.run(
            lambda store: runs.start_run(store, run_id, "ci", 1, [], "given server", 0, self.team)
        )
        return run_id

    def _member(self) -> str:
        async def create(store) -> str:
            user = await people.create_user(store, f"member-{uuid.uuid4().hex[:8]}", PASSWORD)
            await people.set_membership(store, user.user_id, self.team, Role.VIEWER, "seed")
            return user.user_id

        return self.studio.run(create)


@pytest.fixture(scope="module")
def world(studio: LiveStudio) -> World:
    team = studio.team("routes")
    built = World(studio, team)
    built.usernames = {role: studio.user(team, role) for role in Role}
    return built


def call(world: World, route: Route, role: Role | None) -> httpx.Response:
    client = world.client(role)
    path = world.path(route)
    if route.method == "GET":
        return client.get(path)
    if route.method == "DELETE":
        return client.delete(path, headers={"X-CSRF-Token": client.csrf})
    if route.is_api:
        return client.request(route.method, path, json={}, headers={"X-CSRF-Token": client.csrf})
    data = {"_csrf": client.csrf}
    if route.path.startswith("/login"):  # the sign-in and join forms carry their own token
        anonymous = world.studio.client()
        data |= {
            "_login": login_token(anonymous.get("/login")),
            "username": world.usernames[Role.VIEWER],
            "password": PASSWORD,
        }
        client.cookies.set("wayline_login", anonymous.cookies["wayline_login"])
    return client.post(path, data=data)


@pytest.mark.parametrize("role", CALLERS, ids=lambda r: r.value if r else "anonymous")
@pytest.mark.parametrize("route", ROUTES, ids=lambda r: f"{r.method} {r.path}")
def test_route_answers_each_caller_as_its_rule_says(
    world: World, route: Route, role: Role | None
) -> None:
    response = call(world, route, role)
    if route.path in ("/logout", "/login", "/login/join"):
        world.forget(role)  # that client's session ended or changed
    status = response.status_code
    assert status < 500, response.text[:500]
    if route.access.open:
        assert status not in (401, 403)
    elif role is None:
        if route.is_api or route.method != "GET":
            assert status == 401
        else:
            assert status == 303 and response.headers["location"].startswith("/login")
    elif allows(role, route.access):
        assert status not in (401, 403), response.text[:500]
    else:
        assert status == 403


def test_every_route_of_the_app_is_in_the_table() -> None:
    app = create_app(StudioSettings(dsn="postgresql:///unused"))
    table = {(r.method, r.path) for r in ROUTES}
    served = {
        (method, route.path)
        for route in app.routes
        for method in getattr(route, "methods", ())
        if method not in ("OPTIONS", "HEAD") and not route.path.startswith(PUBLIC_PREFIXES)
    }
    assert served == table
    for route in app.routes:
        if route.path.startswith(PUBLIC_PREFIXES):
            continue
        for handler in route.route_handlers:  # type: ignore[attr-defined]
            if handler.http_methods != {"OPTIONS"}:  # Litestar's own CORS preflight
                assert isinstance(handler.opt.get("access"), Access), route.path


def test_the_openapi_document_describes_every_api_route(studio: LiveStudio) -> None:
    document = httpx.get(studio.url + "/schema/openapi.json").json()
    described = {
        (method.upper(), re.sub(r"\{(\w+)\}", r"{\1:str}", path))
        for path, operations in document["paths"].items()
        for method in operations
    }
    assert described == {(r.method, r.path) for r in ROUTES if r.is_api}
