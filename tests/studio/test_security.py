"""People and security as a browser or a script meets them over HTTP."""

from __future__ import annotations

import re
import uuid

from studio.roles import Role
from studio.web.security_headers import CONTENT_SECURITY_POLICY, SECURITY_HEADERS
from tests.studio.live import PASSWORD, LiveStudio, definition, login_token


def test_sign_in_sets_an_httponly_samesite_session_cookie(studio: LiveStudio) -> None:
    team = studio.team()
    username = studio.user(team, Role.VIEWER)
    client = studio.client()
    response = client.sign_in(username)
    assert response.status_code == 303
    cookie = next(
        h for h in response.headers.get_list("set-cookie") if h.startswith("wayline_session=")
    )
    assert "HttpOnly" in cookie and "SameSite=lax" in cookie.replace("Lax", "lax")
    page = client.get("/definitions")
    assert page.status_code == 200
    assert username.title() in page.text


def test_wrong_password_is_refused_without_saying_which_part_was_wrong(studio: LiveStudio) -> None:
    team = studio.team()
    username = studio.user(team, Role.VIEWER)
    client = studio.client()
    wrong = client.sign_in(username, "not the password")
    unknown = client.sign_in(f"nobody-{uuid.uuid4().hex[:6]}", PASSWORD)
    assert wrong.status_code == unknown.status_code == 401
    assert (
        "Wrong username or password" in wrong.text and "Wrong username or password" in unknown.text
    )


def test_sign_in_attempts_are_rate_limited(studio: LiveStudio) -> None:
    team = studio.team()
    username = studio.user(team, Role.VIEWER)
    client = studio.client()
    for _ in range(5):
        assert client.sign_in(username, "guess guess guess").status_code == 401
    throttled = client.sign_in(username, PASSWORD)  # even the right password waits now
    assert throttled.status_code == 429
    assert "Too many failed sign-in attempts" in throttled.text
    assert int(throttled.headers["retry-after"]) > 0


def test_the_sign_in_form_needs_its_own_token(studio: LiveStudio) -> None:
    team = studio.team()
    username = studio.user(team, Role.VIEWER)
    client = studio.client()
    response = client.post("/login", data={"username": username, "password": PASSWORD})
    assert response.status_code == 403


def test_a_post_without_the_csrf_token_is_refused(studio: LiveStudio) -> None:
    team = studio.team()
    client = studio.client(studio.user(team, Role.AUTHOR))
    without = client.post("/drafts", data={"name": "sneaky", "version": "1"})
    assert without.status_code == 403
    assert "CSRF" in without.text
    wrong = client.post("/drafts", data={"name": "sneaky", "version": "1", "_csrf": "x" * 43})
    assert wrong.status_code == 403
    header = client.post("/drafts", data={"name": "fine"}, headers={"X-CSRF-Token": client.csrf})
    assert header.status_code == 303
    api = client.post("/api/drafts", json={"document": {"name": "x"}})
    assert api.status_code == 403


def test_another_teams_objects_are_not_found(studio: LiveStudio) -> None:
    ours, theirs = studio.team(), studio.team()
    name = f"theirs.{uuid.uuid4().hex[:6]}"
    studio.publish(theirs, definition(name))
    other = studio.client(studio.user(theirs, Role.AUTHOR))
    draft_url = other.form("/drafts", {"name": "secret"}).headers["location"]
    client = studio.client(studio.user(ours, Role.ADMIN))
    for path in (
        f"/definitions/{name}",
        f"/definitions/{name}/versions/1",
        f"/definitions/{name}/versions/1/export",
        draft_url,
        f"/api/definitions/{name}",
        f"/api/definitions/{name}/versions/1",
        "/api" + draft_url,
    ):
        assert client.get(path).status_code == 404, path
    assert client.form(f"/definitions/{name}/versions/1/deprecate").status_code == 404
    assert client.form(draft_url + "/publish").status_code == 404
    taken = client.post(
        "/api/definitions",
        json={"document": definition(name, "2")},
        headers={"X-CSRF-Token": client.csrf},
    )
    assert taken.status_code == 409
    assert "belongs to another team" in taken.json()["error"]


def test_a_viewer_is_refused_every_change(studio: LiveStudio) -> None:
    team = studio.team()
    name = f"viewed.{uuid.uuid4().hex[:6]}"
    studio.publish(team, definition(name))
    client = studio.client(studio.user(team, Role.VIEWER))
    page = client.get(f"/definitions/{name}")
    assert page.status_code == 200 and "New draft" not in page.text and "Deprecate" not in page.text
    assert client.form(f"/definitions/{name}/versions/1/deprecate").status_code == 403
    assert client.form("/drafts", {"name": "nope"}).status_code == 403
    assert client.form("/settings/tokens", {"label": "x", "role": "admin"}).status_code == 403


def test_a_one_time_password_must_be_changed_first(studio: LiveStudio) -> None:
    team = studio.team()
    username = studio.user(team, Role.ADMIN, must_change=True)
    client = studio.client()
    assert client.sign_in(username).headers["location"] == "/account"
    client.csrf = re.search(r'"X-CSRF-Token": "([^"]+)"', client.get("/account").text).group(1)
    blocked = client.get("/definitions")
    assert blocked.status_code == 303 and blocked.headers["location"] == "/account"
    assert client.get("/api/definitions").status_code == 403
    new = "a much better password"
    changed = client.form("/account/password", {"current": PASSWORD, "new": new, "confirm": new})
    assert changed.status_code == 303
    assert client.get("/definitions").status_code == 200
    again = studio.client()
    assert again.sign_in(username, new).status_code == 303


def test_signing_out_ends_the_session(studio: LiveStudio) -> None:
    team = studio.team()
    client = studio.client(studio.user(team, Role.VIEWER))
    cookie = client.cookies.get("wayline_session")
    assert client.form("/logout").status_code == 303
    replay = studio.client()
    replay.cookies.set("wayline_session", cookie)
    assert replay.get("/definitions").headers["location"].startswith("/login")


def test_api_tokens_are_shown_once_scoped_and_revocable(studio: LiveStudio) -> None:
    team = studio.team()
    name = f"api.{uuid.uuid4().hex[:6]}"
    admin = studio.client(studio.user(team, Role.ADMIN))
    page = admin.form("/settings/tokens", {"label": "ci", "role": "author"})
    token = re.search(r'id="new-token">([^<]+)<', page.text).group(1)
    assert token.startswith("wl_")
    assert token not in admin.get("/settings").text  # never shown again
    api = studio.client()
    bearer = {"Authorization": f"Bearer {token}"}
    me = api.get("/api/me", headers=bearer).json()
    assert me == {"actor": me["actor"], "team": team, "role": "author", "via": "token"}
    created = api.post("/api/definitions", json={"document": definition(name)}, headers=bearer)
    assert created.status_code == 201 and created.json()["created"] is True
    assert api.get("/api/tokens", headers=bearer).status_code == 403  # author, not admin
    token_id = token.split("_")[1]
    assert admin.form(f"/settings/tokens/{token_id}/revoke").status_code == 303
    assert api.get("/api/me", headers=bearer).status_code == 401


def test_login_redirects_only_to_local_pages(studio: LiveStudio) -> None:
    team = studio.team()
    username = studio.user(team, Role.VIEWER)
    client = studio.client()
    token = login_token(client.get("/login"))
    response = client.post(
        "/login",
        data={"_login": token, "username": username, "password": PASSWORD, "next": "//evil.test/"},
    )
    assert response.headers["location"] == "/definitions"


def test_every_response_carries_the_security_headers(studio: LiveStudio) -> None:
    team = studio.team()
    client = studio.client(studio.user(team, Role.VIEWER))
    paths = (
        "/login",  # a page for anyone
        "/definitions",  # a signed-in page
        "/api/definitions",  # the API
        "/api/tokens",  # an API refusal (403)
        "/no-such-page",  # 404 page
        "/api/no-such-thing",  # 404 from the API
        "/static/studio.css",  # a static file
        "/static/no-such-file.css",  # a static 404
        "/schema/openapi.json",
    )
    for path in paths:
        response = client.get(path)
        for name, value in SECURITY_HEADERS.items():
            assert response.headers.get(name) == value, (path, response.status_code, name)
    anonymous = studio.client().get("/api/me")
    assert anonymous.status_code == 401
    assert anonymous.headers["x-content-type-options"] == "nosniff"


def test_the_content_security_policy_allows_no_inline_script_or_style() -> None:
    policy = dict(
        directive.strip().split(" ", 1) for directive in CONTENT_SECURITY_POLICY.split(";")
    )
    assert policy["script-src"] == "'self'" and policy["style-src"] == "'self'"
    assert policy["frame-ancestors"] == "'none'" and policy["object-src"] == "'none'"
