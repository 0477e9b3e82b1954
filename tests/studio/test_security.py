"""People and security as a browser or a script meets them over HTTP."""

from __future__ import annotations

import re
import uuid
from dataclasses import replace
from datetime import timedelta

import httpx
import psycopg
import pytest

from engine.model.validation import parse_definition
from engine.store.store import Store
from studio.access import AUTHORIZATION_SHAPE, NO_TOKEN, TOKEN_REFUSED
from studio.accounts import people
from studio.accounts import service as accounts
from studio.accounts.signin import Attempt
from studio.accounts.signin_limits import SignInLimits
from studio.accounts.signin_pages import SESSION_ENDED
from studio.principal import from_session
from studio.roles import Role
from studio.security_headers import CONTENT_SECURITY_POLICY, SECURITY_HEADERS
from tests.studio.live import (
    PASSWORD,
    LiveStudio,
    SignedInClient,
    csrf_token,
    definition,
    login_token,
    serve_studio,
)

EXPIRY = "expires_in_days"
EXPIRE = "UPDATE studio_api_tokens SET expires_at = now() - interval '1 s' WHERE token_id = %s"


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


def test_guessing_the_current_password_on_the_account_page_is_rate_limited(
    studio: LiveStudio,
) -> None:
    """Someone holding a session (a browser left signed in) could try current passwords
    on the password change form without limit, and take the account over by the first
    right one: it is counted as a sign-in is, and stopped after as many failures; the
    right one forgives the failures before it, as a sign-in does."""
    username = studio.user(studio.team(), Role.VIEWER)
    client = studio.client(username)

    def change(current: str, new: str) -> httpx.Response:
        return client.form("/account/password", {"current": current, "new": new, "confirm": new})

    better, best = "a much better password", "the best password so far"
    for _ in range(4):
        assert change("not it", better).status_code == 422
    assert change(PASSWORD, better).status_code == 303  # the owner is never held up
    client.csrf = csrf_token(client.get("/account"))  # the change renewed the session
    for guess in range(5):
        wrong = change(f"guess {guess}", best)
        assert wrong.status_code == 422 and "the current password is wrong" in wrong.text
    throttled = change(better, best)  # even the right one waits now
    assert throttled.status_code == 429, throttled.text[-300:]
    assert "too many wrong current passwords" in throttled.text
    assert int(throttled.headers["retry-after"]) > 0
    assert studio.client().sign_in(username, better).status_code == 429  # the same limits


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
    name = studio.publish_new(theirs, "theirs")
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


def test_a_child_cannot_pin_another_teams_version(studio: LiveStudio) -> None:
    ours, theirs = studio.team(), studio.team()
    secret = definition(f"secret.{uuid.uuid4().hex[:6]}")
    fingerprint = parse_definition(secret).fingerprint
    client = studio.client(studio.user(ours, Role.AUTHOR))

    def publish_parent() -> httpx.Response:
        parent = definition(f"parent.{uuid.uuid4().hex[:6]}")
        pin = {"name": secret["name"], "version": "1", "fingerprint": fingerprint}
        retry = {"max_attempts": 1, "initial_delay": "1s", "max_delay": "1s"}
        child = {"name": "kid", "kind": "child", "target": secret["name"], "timeout": "1m"}
        child |= {"input_limit": 1024, "result_limit": 1024, "retry": retry}
        parent["steps"] = [child | {"child_definition": pin}]
        headers = {"X-CSRF-Token": client.csrf}
        return client.post("/api/definitions", json={"document": parent}, headers=headers)

    missing = publish_parent()
    studio.publish(theirs, secret)
    pinned = publish_parent()

    assert (missing.status_code, pinned.status_code) == (422, 422)
    assert pinned.json()["error"] == missing.json()["error"]  # nothing about theirs
    assert "not published in this team" in pinned.json()["error"]
    assert client.get("/api/definitions").json() == []


def test_a_viewer_is_refused_every_change(studio: LiveStudio) -> None:
    team = studio.team()
    name = studio.publish_new(team, "viewed")
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
    assert "wayline_session" not in client.cookies
    assert client.get("/definitions").headers["location"] == "/login?next=/definitions"
    replay = studio.client()
    replay.cookies.set("wayline_session", cookie)
    sent = replay.get("/definitions").headers["location"]
    assert sent == "/login?next=/definitions&ended=1"
    assert SESSION_ENDED in replay.get(sent).text, "a session that ended is said, not a bare form"
    assert SESSION_ENDED not in replay.get("/login?next=/definitions").text


def test_a_form_sent_after_the_session_ended_signs_in_back_to_its_page(
    studio: LiveStudio,
) -> None:
    """A POST has no page of its own (most of its paths answer no GET): signing in
    again returns to the page it was sent from, with that page's query."""
    team = studio.team()
    client = studio.client(studio.user(team, Role.OPERATOR))
    cookie = client.cookies.get("wayline_session")
    assert client.form("/logout").status_code == 303
    replay = studio.client()
    replay.cookies.set("wayline_session", cookie)
    sent_from = f"{studio.url}/instances/i-1?tab=history"
    htmx = replay.post("/instances/i-1/signals/paid", headers={
        "HX-Request": "true", "HX-Current-URL": sent_from})  # fmt: skip
    assert htmx.headers["HX-Redirect"] == "/login?next=/instances/i-1%3Ftab%3Dhistory&ended=1"
    plain = replay.post("/dead-letters/resolve", headers={"Referer": f"{studio.url}/dead-letters"})
    assert plain.status_code == 401  # without JavaScript: a page whose link goes back
    assert 'href="/login?next=/dead-letters&amp;ended=1">Sign in' in plain.text
    panel = replay.get("/instances/i-1/state", headers={
        "HX-Request": "true", "HX-Current-URL": f"{studio.url}/instances/i-1"})  # fmt: skip
    assert panel.headers["HX-Redirect"] == "/login?next=/instances/i-1&ended=1"
    told = replay.post("/holds/h-1/release", headers={"HX-Request": "true"})
    assert told.headers["HX-Redirect"] == "/login?next=/holds/h-1/release&ended=1"
    back = studio.client().get("/login?next=/instances/i-1%3Ftab%3Dhistory")
    assert 'name="next" value="/instances/i-1?tab=history"' in back.text


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
    assert_token_refused(api, bearer)


def assert_token_refused(api: SignedInClient, bearer: dict[str, str]) -> None:
    """The token is refused in words a script can act on; without one, a person's."""
    refused = api.get("/api/me", headers=bearer)
    assert refused.status_code == 401
    assert refused.json()["error"] == TOKEN_REFUSED
    assert api.get("/api/me").json()["error"] == NO_TOKEN  # says what a script sends
    for shape in ("Basic YWRhOnB3", "Bearer", "wl_abc"):  # says what this studio reads
        wrong = api.get("/api/me", headers={"Authorization": shape})
        assert (wrong.status_code, wrong.json()["error"]) == (401, AUTHORIZATION_SHAPE)


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


def test_a_common_password_or_one_containing_the_username_is_refused(studio: LiveStudio) -> None:
    team = studio.team()
    username = studio.user(team, Role.VIEWER)
    client = studio.client(username)
    rules = "(at least 10 characters, not a common password, not containing your username)"
    assert rules in client.get("/account").text, "the rules are said before they refuse"
    for new, why in (
        ("Password 1234", "on the list of the most common passwords"),
        ("qwertyuiop", "on the list of the most common passwords"),
        (f"my {username.upper()} secret", "must not contain the username"),
    ):
        fields = {"current": PASSWORD, "new": new, "confirm": new}
        refused = client.form("/account/password", fields)
        assert refused.status_code == 422 and why in refused.text, new
    assert studio.client().sign_in(username).status_code == 303  # the password is unchanged


def _new_token(page: httpx.Response) -> dict[str, str]:
    match = re.search(r'id="new-token">([^<]+)<', page.text)
    assert match, "no token was created"
    return {"Authorization": f"Bearer {match.group(1)}"}


def test_an_api_token_stops_working_when_it_expires(studio: LiveStudio) -> None:
    team = studio.team()
    admin = studio.client(studio.user(team, Role.ADMIN))
    for days, said in (("0", "1 to 366 days"), ("soon", "whole number of days")):
        refused = admin.form("/settings/tokens", {"label": "ci", "role": "viewer", EXPIRY: days})
        assert refused.status_code == 422 and said in refused.text
    bearer = _new_token(
        admin.form("/settings/tokens", {"label": "ci", "role": "viewer", EXPIRY: "30"})
    )
    api = studio.client()
    assert api.get("/api/me", headers=bearer).status_code == 200
    token_id = bearer["Authorization"].split("_")[1]
    studio.run(lambda store: _expire(store, token_id))
    assert_token_refused(api, bearer)
    assert "inactive: expired" in admin.get("/settings").text


async def _expire(store: Store, token_id: str) -> None:
    async with store.connection() as conn:
        await conn.execute(EXPIRE, (token_id,))


def test_an_api_token_works_only_while_its_creator_is_an_admin_of_the_team(
    studio: LiveStudio,
) -> None:
    team = studio.team()
    creator = studio.user(team, Role.ADMIN)
    other = studio.client(studio.user(team, Role.ADMIN))
    first = _new_token(
        studio.client(creator).form("/settings/tokens", {"label": "a", "role": "admin"})
    )
    api = studio.client()
    made = api.post("/api/tokens", json={"label": "b", "role": "viewer"}, headers=first)
    assert made.status_code == 201 and made.json()["record"]["expires_at"] is None
    second = {"Authorization": f"Bearer {made.json()['token']}"}  # stands for the creator too
    found = studio.run(lambda store: people.find_login(store, creator))
    creator_id = found[0].user_id

    demoted = other.form(f"/settings/members/{creator_id}/role", {"role": "operator"})
    assert demoted.status_code == 200 and "is now operator." in demoted.text
    assert [api.get("/api/me", headers=t).status_code for t in (first, second)] == [401, 401]
    assert "its creator is no longer an admin of this team" in other.get("/settings").text
    other.form(f"/settings/members/{creator_id}/role", {"role": "admin"})
    assert [api.get("/api/me", headers=t).status_code for t in (first, second)] == [200, 200]
    removed = other.form(f"/settings/members/{creator_id}/remove")
    assert removed.status_code == 200 and "is no longer a member of this team." in removed.text
    assert [api.get("/api/me", headers=t).status_code for t in (first, second)] == [401, 401]


def test_a_token_made_with_a_token_lives_no_longer_than_its_maker(studio: LiveStudio) -> None:
    """A leaked admin token, once revoked, left behind whatever tokens were minted with
    it, and those could be made to outlive its expiry."""
    team = studio.team()
    admin = studio.client(studio.user(team, Role.ADMIN))
    page = admin.form("/settings/tokens", {"label": "ci", "role": "admin", "expires_in_days": "7"})
    first = _new_token(page)
    api = studio.client()
    made = api.post("/api/tokens", json={"label": "minted", "role": "admin"}, headers=first)
    assert made.status_code == 201
    assert made.json()["record"]["expires_at"] is not None  # never, asked; the maker's, given
    second = {"Authorization": f"Bearer {made.json()['token']}"}
    third = api.post("/api/tokens", json={"label": "again", "role": "viewer"}, headers=second)
    chain = (first, second, {"Authorization": f"Bearer {third.json()['token']}"})
    other = _new_token(admin.form("/settings/tokens", {"label": "other", "role": "viewer"}))
    assert [api.get("/api/me", headers=t).status_code for t in (*chain, other)] == [200] * 4
    first_id = first["Authorization"].split("_")[1]
    assert admin.form(f"/settings/tokens/{first_id}/revoke").status_code == 303
    assert [api.get("/api/me", headers=t).status_code for t in chain] == [401] * 3
    assert api.get("/api/me", headers=other).status_code == 200  # made by a person


def test_a_revoked_token_stays_listed_with_when_and_by_whom(studio: LiveStudio) -> None:
    """Audit records name a token as their actor (``token:<id>``), yet a revoked token
    vanished from the team's list, and nothing kept who revoked it: a reviewer could not
    tell what the actor had been, nor who stopped it."""
    team = studio.team()
    admin_name = studio.user(team, Role.ADMIN)
    admin = studio.client(admin_name)
    first = _new_token(admin.form("/settings/tokens", {"label": "ci", "role": "admin"}))
    api = studio.client()
    made = api.post("/api/tokens", json={"label": "minted", "role": "viewer"}, headers=first)
    other = _new_token(admin.form("/settings/tokens", {"label": "other", "role": "viewer"}))
    first_id, other_id = (t["Authorization"].split("_")[1] for t in (first, other))
    minted_id = made.json()["record"]["id"]
    assert api.delete(f"/api/tokens/{other_id}", headers=first).status_code == 204
    assert admin.form(f"/settings/tokens/{first_id}/revoke").status_code == 303

    listed = {t["id"]: t for t in admin.get("/api/tokens").json()}
    revokers = {i: (t["revoked_by"], t["inactive"]) for i, t in listed.items()}
    assert revokers == {
        first_id: (admin_name, "revoked"),
        minted_id: (admin_name, "revoked"),  # with the token that made it
        other_id: (f"token:{first_id}", "revoked"),
    }
    assert all(t["revoked_at"] is not None for t in listed.values())
    page = admin.get("/settings").text
    assert page.count("revoked ") >= 3 and f"by token:{first_id}" in page
    assert f"/settings/tokens/{first_id}/revoke" not in page  # nothing left to revoke
    assert admin.form(f"/settings/tokens/{first_id}/revoke").status_code == 404


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
        stored = path.startswith("/static/")  # only the studio's own files may be kept
        assert (response.headers.get("cache-control") == "no-store") is not stored, path
        assert "strict-transport-security" not in response.headers, "not served over HTTPS"
    anonymous = studio.client().get("/api/me")
    assert anonymous.status_code == 401
    assert anonymous.headers["x-content-type-options"] == "nosniff"


def test_a_studio_served_over_https_tells_browsers_to_keep_to_https(pg_dsn: str) -> None:
    """``--secure-cookies`` says the studio is behind HTTPS: every response (a page, the
    API, a 404, a static file) asks the browser to come back over HTTPS only, for a
    year and for this host alone (the domain's other hosts are not the studio's)."""
    with serve_studio(pg_dsn, secure_cookies=True) as secure:
        client = secure.client()
        for path in ("/login", "/api/me", "/no-such-page", "/static/studio.css"):
            response = client.get(path)
            assert response.headers.get("strict-transport-security") == "max-age=31536000", path
            assert response.headers["x-frame-options"] == "DENY", "beside the others"


def test_the_content_security_policy_allows_no_inline_script_or_style() -> None:
    policy = dict(
        directive.strip().split(" ", 1) for directive in CONTENT_SECURITY_POLICY.split(";")
    )
    assert policy["script-src"] == "'self'" and policy["style-src"] == "'self'"
    assert policy["frame-ancestors"] == "'none'" and policy["object-src"] == "'none'"


def test_a_password_change_ends_every_session_and_renews_the_one_it_was_made_in(
    studio: LiveStudio,
) -> None:
    """Someone who learnt the old password and signed in elsewhere, or who copied the
    cookie of the very browser the owner changes it in, is signed out by the change;
    that browser goes on with a new session."""
    username = studio.user(studio.team(), Role.VIEWER)
    changer, elsewhere = studio.client(username), studio.client(username)
    bystander = studio.client(studio.user(studio.team(), Role.VIEWER))
    copied = changer.cookies.get("wayline_session")
    new = "a much better password"
    changed = changer.form("/account/password", {"current": PASSWORD, "new": new, "confirm": new})
    assert changed.status_code == 303
    assert changer.cookies.get("wayline_session") != copied
    assert "other sessions were signed out" in changer.get(changed.headers["location"]).text
    for ended in (elsewhere, _with_cookie(studio, copied)):
        sent = ended.get("/definitions").headers["location"]
        assert sent == "/login?next=/definitions&ended=1"
    assert bystander.get("/definitions").status_code == 200, "only that person's sessions end"


def test_a_password_change_that_cannot_open_the_new_session_changes_nothing(
    studio: LiveStudio,
) -> None:
    """The new password was committed on its own, and the person's sessions ended in a
    second transaction: had that one failed (the database lost between them), the new
    password stood while every session opened before it, an attacker's too, still
    worked. Both are one transaction now. Here the new session cannot be opened (the
    team its browser worked in is gone: the insert breaks a foreign key), so nothing
    changes: the old password still signs in, the new one does not, and the sessions
    opened before go on."""
    username = studio.user(studio.team(), Role.VIEWER)
    changer, elsewhere = studio.client(username), studio.client(username)
    cookie = changer.cookies.get("wayline_session") or ""
    new = "a much better password"
    with pytest.raises(psycopg.errors.ForeignKeyViolation):
        studio.run(lambda store: _change_from_a_gone_team(store, cookie, new))
    for before in (changer, elsewhere):
        assert before.get("/definitions").status_code == 200, "its session still works"
    assert studio.client().sign_in(username, new).status_code == 401
    assert studio.client().sign_in(username).status_code == 303


async def _change_from_a_gone_team(store: Store, cookie: str, new: str) -> None:
    """Change the password from the session ``cookie`` names, as the account page does,
    but with that session working in a team that does not exist."""
    principal = await from_session(store, cookie)
    assert principal is not None and principal.session is not None
    gone = replace(principal.session, team_id=f"gone-{uuid.uuid4().hex[:8]}")
    attempt = Attempt(store, SignInLimits(), timedelta(hours=1), "192.0.2.1")
    changing = replace(principal, session=gone)
    await accounts.change_password(attempt, changing, PASSWORD, new, new)


def test_signing_in_issues_a_fresh_session_and_ends_the_one_the_browser_had(
    studio: LiveStudio,
) -> None:
    """A session id known before the sign-in (planted in the browser, or left from an
    earlier sign-in) names nobody after it: signing in never keeps a cookie value."""
    username = studio.user(studio.team(), Role.VIEWER)
    known = studio.client(username).cookies.get("wayline_session")
    browser = studio.client()
    token = login_token(browser.get("/login"))
    browser.cookies.set("wayline_session", known)
    signed_in = browser.post(
        "/login", data={"_login": token, "username": username, "password": PASSWORD}
    )
    assert signed_in.status_code == 303
    fresh = signed_in.cookies.get("wayline_session")
    assert fresh and fresh != known
    assert _with_cookie(studio, fresh).get("/definitions").status_code == 200
    sent = _with_cookie(studio, known).get("/definitions").headers["location"]
    assert sent == "/login?next=/definitions&ended=1"


def _with_cookie(studio: LiveStudio, cookie: str | None) -> SignedInClient:
    """A browser holding nothing but the session cookie ``cookie``."""
    client = studio.client()
    client.cookies.set("wayline_session", cookie or "")
    return client
