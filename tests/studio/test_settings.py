"""Team settings: members with one-time passwords, roles, switching teams; the CLI."""

from __future__ import annotations

import io
import json
import re
import uuid
from datetime import datetime

import httpx
import pytest

from engine.cli.main import main
from engine.decide.audit import COMMAND_LINE_ACTOR
from engine.store.store import Store
from studio.accounts import people
from studio.accounts.api_tokens import MAX_DAYS
from studio.accounts.people import MAX_DISPLAY_NAME
from studio.roles import Role
from tests.studio.live import (
    PASSWORD,
    WHEN_HTML,
    LiveStudio,
    SignedInClient,
    login_token,
)


def test_an_admin_invites_a_new_person_who_joins_by_choosing_a_password(
    studio: LiveStudio,
) -> None:
    team = studio.team("people")
    admin = studio.client(studio.user(team, Role.ADMIN))
    newcomer = f"grace-{uuid.uuid4().hex[:6]}"
    page = admin.form(
        "/settings/members", {"username": newcomer, "display_name": "Grace", "role": "author"}
    )
    assert page.status_code == 200
    assert f"{newcomer}</strong> is invited to" in page.text and "as author" in page.text
    code = _code(page)
    assert newcomer not in admin.get("/api/members").text  # a member once they join
    assert newcomer in admin.get("/settings").text  # pending

    grace = studio.client()
    weak = _join(grace, newcomer, code, "password1234")
    assert weak.status_code == 422 and "most common passwords" in weak.text
    joined = _join(grace, newcomer, code, PASSWORD)
    assert joined.status_code == 303 and joined.headers["location"] == "/definitions"
    me = grace.get("/api/me").json()
    assert (me["actor"], me["team"], me["role"]) == (newcomer, team, "author")
    assert _join(studio.client(), newcomer, code, PASSWORD).status_code == 422  # used up
    assert "Grace" in admin.get("/api/members").text

    user_id = _user_id(studio, newcomer)
    demoted = admin.form(f"/settings/members/{user_id}/role", {"role": "viewer"})
    assert demoted.status_code == 200  # the page says what changed, not only a redirect
    said = '<p class="alert ok" role="status" id="member-changed">'
    assert f"{said}{newcomer} is now viewer.</p>" in demoted.text
    assert "viewer" in admin.get("/api/members").text
    removed = admin.form(f"/settings/members/{user_id}/remove")
    assert removed.status_code == 200
    assert f"{said}{newcomer} is no longer a member of this team.</p>" in removed.text
    assert "member-changed" not in admin.get("/settings").text
    members = admin.get("/settings").text.split('id="members-table"')[1].split("</table>")[0]
    assert newcomer not in members  # (the audit below the table names them)


def test_inviting_an_existing_name_answers_exactly_as_for_an_unknown_one(
    studio: LiveStudio,
) -> None:
    elsewhere, team = studio.team("elsewhere"), studio.team("inviting")
    existing = studio.user(elsewhere, Role.VIEWER, display_name="Secret Name")
    unknown = f"viewer-{uuid.uuid4().hex[:8]}"  # shaped like the existing one
    admin = studio.client(studio.user(team, Role.ADMIN))
    answers = []
    for name in (existing, unknown):
        page = admin.form("/settings/members", {"username": name, "role": "operator"})
        answers.append((page.status_code, _invited_block(page, name)))
    assert answers[0] == answers[1]
    assert "Secret Name" not in admin.get("/settings").text
    assert existing not in admin.get("/api/members").text

    code = _code(admin.form("/settings/members", {"username": existing, "role": "operator"}))
    wrong = _join(studio.client(), existing, code, "not her password at all")
    assert wrong.status_code == 422 and "or the password is wrong" in wrong.text
    joined = studio.client()
    assert _join(joined, existing, code, PASSWORD).status_code == 303
    assert joined.get("/api/me").json()["team"] == team
    assert existing in admin.get("/api/members").text


def _code(page: httpx.Response) -> str:
    match = re.search(r'id="invitation-code">([^<]+)<', page.text)
    assert match, "no invitation code was shown"
    return match.group(1)


def _invited_block(page: httpx.Response, name: str) -> str:
    """The answer to an invitation, with what differs by nature (name, code, time) masked."""
    match = re.search(
        r'<div class="alert ok" role="status" id="member-invited">.*?</div>', page.text, re.S
    )
    assert match, "no invitation was answered"
    block = match.group(0).replace(name, "NAME").replace(_code(page), "CODE")
    return re.sub(WHEN_HTML, "TIME", block)


def _join(client: SignedInClient, username: str, code: str, password: str) -> httpx.Response:
    token = login_token(client.get("/login/join"))
    fields = {"_login": token, "username": username, "code": code, "password": password}
    return client.post("/login/join", data=fields)


def _user_id(studio: LiveStudio, username: str) -> str:
    found = studio.run(lambda store: people.find_login(store, username))
    assert found is not None
    return found[0].user_id


def test_an_admin_cannot_demote_or_remove_themselves(studio: LiveStudio) -> None:
    team = studio.team("self")
    username = studio.user(team, Role.ADMIN)
    admin = studio.client(username)
    me = _user_id(studio, username)
    demoted = admin.form(f"/settings/members/{me}/role", {"role": "viewer"})
    assert demoted.status_code == 422 and "cannot change your own role" in demoted.text
    removed = admin.form(f"/settings/members/{me}/remove")
    assert removed.status_code == 422


def test_switching_teams_changes_what_is_visible(studio: LiveStudio) -> None:
    first, second = studio.team("first", "Alpha"), studio.team("second", "Beta")
    name = studio.publish_new(second, "beta.only")
    username = studio.user(first, Role.VIEWER)
    user_id = _user_id(studio, username)
    studio.run(lambda store: people.set_membership(store, user_id, second, Role.AUTHOR, "seed"))
    client = studio.client(username)
    assert name not in client.get("/definitions").text
    switched = client.form("/account/team", {"team": second, "next": "/definitions"})
    assert switched.status_code == 303
    page = client.get("/definitions")
    assert name in page.text and ">author<" in page.text
    stranger = studio.team("stranger")
    assert client.form("/account/team", {"team": stranger}).status_code == 404


def test_wayline_user_create_adds_an_account_with_a_one_time_password(
    studio: LiveStudio, capsys: pytest.CaptureFixture[str]
) -> None:
    team = f"cli-{uuid.uuid4().hex[:6]}"
    name = f"cli-{uuid.uuid4().hex[:6]}"
    database = ["--dsn", studio.dsn, "--schema", studio.schema]
    status = main(["user", "create", name, "--team", team, "--role", "operator", *database])
    out = capsys.readouterr().out
    assert status == 0 and f"created {name}: operator in team {team}" in out
    password = re.search(r"one-time password: (\S+)", out).group(1)
    assert studio.client().sign_in(name, password).status_code == 303
    again = main(["user", "create", name, *database])
    assert again == 1
    assert "is taken" in capsys.readouterr().err


def test_a_display_name_over_the_limit_is_refused_saying_the_limit(studio: LiveStudio) -> None:
    team = studio.team("names")
    admin = studio.client(studio.user(team, Role.ADMIN))
    newcomer = f"long-{uuid.uuid4().hex[:6]}"
    page = admin.form(
        "/settings/members",
        {"username": newcomer, "display_name": "x" * (MAX_DISPLAY_NAME + 1), "role": "viewer"},
    )
    assert page.status_code == 422
    assert f"a display name has at most {MAX_DISPLAY_NAME} characters" in page.text
    assert newcomer not in admin.get("/api/members").text


def test_wayline_user_create_refuses_a_common_password(
    studio: LiveStudio, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"cli-{uuid.uuid4().hex[:6]}"
    monkeypatch.setattr("sys.stdin", io.StringIO("password1234\n"))
    database = ["--dsn", studio.dsn, "--schema", studio.schema]
    assert main(["user", "create", name, "--password-stdin", *database]) == 1
    assert "on the list of the most common passwords" in capsys.readouterr().err
    assert studio.run(lambda store: people.find_login(store, name)) is None


def test_a_refused_invitation_or_token_comes_back_as_typed_beside_its_form(
    studio: LiveStudio,
) -> None:
    """Both forms came back empty, under an error at the top of the page."""
    team = studio.team("typed")
    admin = studio.client(studio.user(team, Role.ADMIN))
    typed = {"username": "Bad Name/..", "display_name": "Dana Scully", "role": "operator"}
    page = admin.form("/settings/members", typed)
    assert page.status_code == 422
    assert re.search(r'id="invite-error">Not invited: a username has 1 to 63', page.text)
    assert 'value="Bad Name/.."' in page.text and 'value="Dana Scully"' in page.text
    assert re.search(r'id="member-role".*?<option selected>operator</option>', page.text, re.S)
    token = {"label": "ci-publish", "role": "author", "expires_in_days": "400"}
    page = admin.form("/settings/tokens", token)
    assert page.status_code == 422
    assert f'id="token-error">Not created: a token expires in 1 to {MAX_DAYS} days' in page.text
    assert 'value="ci-publish"' in page.text and 'value="400"' in page.text
    assert re.search(r'id="token-role".*?<option selected>author</option>', page.text, re.S)
    assert 'value="Bad Name/.."' not in page.text  # only the refused form keeps its values


def test_a_refused_join_keeps_the_code_and_says_a_used_one_works_once(
    studio: LiveStudio,
) -> None:
    """The code field came back empty after every refusal (a weak password, a typo in
    the username), so the long code had to be pasted again; a used or lapsed code was
    told only that it 'does not fit', sending its holder to check their typing."""
    team = studio.team("joining")
    admin = studio.client(studio.user(team, Role.ADMIN))
    newcomer = f"hedy-{uuid.uuid4().hex[:6]}"
    code = _code(admin.form("/settings/members", {"username": newcomer, "role": "viewer"}))
    person = studio.client()
    for username, password in ((newcomer, "short"), (newcomer + "x", PASSWORD)):
        refused = _join(person, username, code, password)
        assert refused.status_code == 422
        assert f'name="code" required autocomplete="off" spellcheck="false" value="{code}"' in (
            refused.text
        )
    assert _join(person, newcomer, code, PASSWORD).status_code == 303
    used = _join(studio.client(), newcomer, code, PASSWORD)
    assert used.status_code == 422 and "a code works once, for 7 days" in used.text


def test_inviting_a_member_of_the_team_is_refused(studio: LiveStudio) -> None:
    """An admin could invite themselves as a viewer and redeem the code with their own
    password: the team was left without an admin (changing one's own role is refused)."""
    team = studio.team("own-invite")
    username = studio.user(team, Role.ADMIN)
    admin = studio.client(username)
    for typed in (username, username.upper()):
        refused = admin.form("/settings/members", {"username": typed, "role": "viewer"})
        assert refused.status_code == 422, refused.text
        assert f"{username} is already a member of this team, as admin" in refused.text
        assert 'id="invitation-code"' not in refused.text
    assert admin.get("/api/me").json()["role"] == "admin"


def test_an_invitation_redeemed_by_a_member_keeps_their_role(studio: LiveStudio) -> None:
    """Inviting a member is refused, but one made a member another way after their
    invitation could redeem it and change their own role (an admin to a viewer: a team
    left without an admin)."""
    team = studio.team("late-member")
    admin = studio.client(studio.user(team, Role.ADMIN))
    elsewhere = studio.user(studio.team("elsewhere"), Role.VIEWER)
    code = _code(admin.form("/settings/members", {"username": elsewhere, "role": "viewer"}))
    user_id = _user_id(studio, elsewhere)
    studio.run(lambda store: people.set_membership(store, user_id, team, Role.ADMIN, "seed"))
    person = studio.client()
    assert _join(person, elsewhere, code, PASSWORD).status_code == 303
    assert person.get("/api/me").json()["role"] == "admin"
    again = _join(studio.client(), elsewhere, code, PASSWORD)
    assert again.status_code == 422, "the code was used up all the same"


def test_a_first_password_change_says_the_current_one_is_the_one_time_password(
    studio: LiveStudio,
) -> None:
    """A bare "Current password" left a new member guessing: they never chose one."""
    team = studio.team("first-change")
    newcomer = studio.client(studio.user(team, Role.VIEWER, must_change=True))
    label = re.search(r'<label for="current">(.*?)</label>', newcomer.get("/account").text)
    assert label and "the one-time password you were given" in label.group(1)
    settled = studio.client(studio.user(team, Role.VIEWER))
    assert "one-time password you were given" not in settled.get("/account").text


def test_an_admins_own_row_says_it_is_theirs_and_why_it_has_no_controls(
    studio: LiveStudio,
) -> None:
    """Their row had no controls and nothing said whose it was or why."""
    team = studio.team("own-row")
    username = studio.user(team, Role.ADMIN)
    colleague = studio.user(team, Role.VIEWER)
    page = studio.client(username).get("/settings").text
    own = re.search(r'<tr id="member-you">(.*?)</tr>', page, re.S).group(1)
    assert f'{username} <span class="muted">(you)</span>' in own
    assert "You cannot change your own role or remove yourself; another admin can." in own
    assert page.count("(you)") == 1
    other = re.search(rf"<tr>\s*<td>{colleague}</td>(.*?)</tr>", page, re.S).group(1)
    assert "Remove" in other and "cannot change" not in other


def test_every_change_to_a_member_or_invitation_is_audited_with_who_and_when(
    studio: LiveStudio, capsys: pytest.CaptureFixture[str]
) -> None:
    """Changing a member's role, removing a member or inviting someone recorded nothing
    of who did it or when: a reviewer saw the members a team has, not how they came to
    have them. Each change is now an entry (who, what, to whom, from and to which role,
    when), on the Settings page and in GET /api/members/audit, for every member."""
    team = studio.team("audited")
    admin_name = studio.user(team, Role.ADMIN)
    admin = studio.client(admin_name)
    reviewer = studio.client(studio.user(team, Role.VIEWER))
    newcomer = f"rosa-{uuid.uuid4().hex[:6]}"
    code = _code(admin.form("/settings/members", {"username": newcomer, "role": "author"}))
    assert _join(studio.client(), newcomer, code, PASSWORD).status_code == 303
    user_id = _user_id(studio, newcomer)
    assert admin.form(f"/settings/members/{user_id}/role", {"role": "viewer"}).status_code == 200
    assert admin.form(f"/settings/members/{user_id}/role", {"role": "viewer"}).status_code == 200
    passer = f"passer-{uuid.uuid4().hex[:6]}"
    admin.form("/settings/members", {"username": passer, "role": "operator"})
    pending = admin.get("/settings").text
    (invitation,) = re.findall(r"/settings/invitations/([^/]+)/withdraw", pending)
    assert admin.form(f"/settings/invitations/{invitation}/withdraw").status_code in (200, 303)
    assert admin.form(f"/settings/members/{user_id}/remove").status_code == 200
    database = ["--dsn", studio.dsn, "--schema", studio.schema]
    added = f"cli-{uuid.uuid4().hex[:6]}"
    assert main(["user", "create", added, "--team", team, "--role", "author", *database]) == 0
    capsys.readouterr()

    answer = reviewer.get("/api/members/audit")
    assert answer.status_code == 200, answer.text
    entries = [
        (e["actor"], e["action"], e["username"], e["from_role"], e["to_role"])
        for e in answer.json()["items"]
        if e["actor"] != "seed"  # the test's own set-up
    ]
    assert entries == [
        ("cli", "added", added, None, "author"),  # as the command line's starts say
        (admin_name, "removed", newcomer, "viewer", None),
        (admin_name, "invitation_withdrawn", passer, "operator", None),
        (admin_name, "invited", passer, None, "operator"),
        (admin_name, "role_changed", newcomer, "author", "viewer"),  # once: then no change
        (newcomer, "joined", newcomer, None, "author"),
        (admin_name, "invited", newcomer, None, "author"),
    ]
    assert all(e["occurred_at"] for e in answer.json()["items"])
    assert answer.json()["next_cursor"] is None

    page = reviewer.get("/settings").text
    table = re.search(r'id="account-audit-table">(.*?)</table>', page, re.S).group(1)
    assert (
        f'<td data-label="Who">{admin_name}</td><td data-label="Action">removed</td>'
        f'<td data-label="Member">{newcomer}</td><td data-label="From role">viewer</td>'
    ) in table
    assert re.search(f"<td>{WHEN_HTML}</td>", table)
    stranger = studio.client(studio.user(studio.team("stranger"), Role.ADMIN))
    assert newcomer not in stranger.get("/api/members/audit").text
    assert newcomer not in stranger.get("/settings").text


LAPSE = "UPDATE studio_invitations SET expires_at = now() - interval '1 hour' WHERE username = %s"


def test_tokens_made_and_revoked_and_invitations_lapsed_are_in_the_members_audit(
    studio: LiveStudio,
) -> None:
    """The members audit said nothing of API tokens (which act for the team) nor of an
    invitation that lapsed unused. Each is an entry: who made or revoked which token (by
    id and label, never its secret; each token the revocation took with it too), and the
    lapse, dated when the invitation lapsed."""
    team = studio.team("audited-tokens")
    admin_name = studio.user(team, Role.ADMIN)
    admin = studio.client(admin_name)
    made = admin.form("/settings/tokens", {"label": "ci deploys", "role": "admin"})
    secret = re.search(r'id="new-token">([^<]+)<', made.text).group(1)
    token_id = secret.split("_")[1]
    bearer = {"Authorization": f"Bearer {secret}", "Content-Type": "application/json"}
    minted = studio.client().post("/api/tokens", headers=bearer, content=json.dumps(
        {"label": "minted", "role": "viewer"}))  # fmt: skip
    assert minted.status_code == 201, minted.text
    minted_id = minted.json()["record"]["id"]
    assert admin.form(f"/settings/tokens/{token_id}/revoke").status_code == 303
    lapsing = f"late-{uuid.uuid4().hex[:6]}"
    admin.form("/settings/members", {"username": lapsing, "role": "author"})
    studio.run(lambda store: _execute(store, LAPSE, lapsing))

    answer = studio.client(studio.user(team, Role.VIEWER)).get("/api/members/audit")
    items = [e for e in answer.json()["items"] if e["actor"] != "seed"]
    entries = [
        (e["actor"], e["action"], e["username"], e["from_role"], e["to_role"], e["token_id"],
         e["token_label"])
        for e in items
    ]  # fmt: skip
    revoked = {
        (admin_name, "token_revoked", admin_name, "admin", None, token_id, "ci deploys"),
        (admin_name, "token_revoked", admin_name, "viewer", None, minted_id, "minted"),
    }
    assert entries[0] == ("time limit", "invitation_expired", lapsing, "author", None, None, None)
    assert entries[1] == (admin_name, "invited", lapsing, None, "author", None, None)
    assert set(entries[2:4]) == revoked
    assert entries[4:] == [
        (f"token:{token_id}", "token_created", admin_name, None, "viewer", minted_id, "minted"),
        (admin_name, "token_created", admin_name, None, "admin", token_id, "ci deploys"),
    ]
    assert items[0]["occurred_at"] < items[1]["occurred_at"], "dated when it lapsed"
    page = admin.get("/settings").text
    table = re.search(r'id="account-audit-table">(.*?)</table>', page, re.S).group(1)
    assert f"token created <code>wl_{token_id}_…</code> ci deploys" in table
    assert "invitation expired" in table and lapsing not in _pending(page)
    assert _random_part(secret) not in answer.text + page, "never the secret"
    again = admin.get("/api/members/audit").json()["items"]
    assert [e["action"] for e in again].count("invitation_expired") == 1, "recorded once"


EXPIRE = "UPDATE studio_api_tokens SET expires_at = now() - interval '1 hour' WHERE token_id = %s"
REVOKED_BEFORE = """
UPDATE studio_api_tokens
SET expires_at = now() - interval '1 hour', revoked_at = now() - interval '2 hours'
WHERE token_id = %s
"""
"""A token revoked, and then its expiry passed."""


def test_a_token_that_expired_is_in_the_members_audit_dated_when_it_expired(
    studio: LiveStudio,
) -> None:
    """A token made or revoked is an entry of the members audit, an invitation that
    lapsed too, but a token that expired stopped acting for the team without one. Its
    expiry is an entry now, recorded as a lapse is, by the first read after it: by
    ``time limit``, dated when it expired, by id and label (never the secret), once. A
    token revoked before it expired has its revocation and no expiry."""
    team = studio.team("audited-expiry")
    admin_name = studio.user(team, Role.ADMIN)
    admin = studio.client(admin_name)
    made = {"role": "viewer", "expires_in_days": "30"}
    expiring = admin.form("/settings/tokens", {"label": "nightly", **made})
    secret = re.search(r'id="new-token">([^<]+)<', expiring.text).group(1)
    expiring_id = secret.split("_")[1]
    retired = admin.form("/settings/tokens", {"label": "retired", **made})
    retired_id = re.search(r'id="new-token">wl_([^_]+)_', retired.text).group(1)
    assert admin.form(f"/settings/tokens/{retired_id}/revoke").status_code == 303
    studio.run(lambda store: _execute(store, EXPIRE, expiring_id))
    studio.run(lambda store: _execute(store, REVOKED_BEFORE, retired_id))

    answer = studio.client(studio.user(team, Role.VIEWER)).get("/api/members/audit")
    items = [e for e in answer.json()["items"] if e["actor"] != "seed"]
    expired = [e for e in items if e["action"] == "token_expired"]
    assert [
        (e["actor"], e["username"], e["from_role"], e["to_role"], e["token_id"], e["token_label"])
        for e in expired
    ] == [("time limit", admin_name, "viewer", None, expiring_id, "nightly")]
    listed = {t["id"]: t for t in admin.get("/api/tokens").json()}
    expired_at = datetime.fromisoformat(listed[expiring_id]["expires_at"])
    assert datetime.fromisoformat(expired[0]["occurred_at"]) == expired_at, "dated so"
    assert [e["action"] for e in items if e["token_id"] == retired_id] == [
        "token_revoked", "token_created",
    ]  # fmt: skip
    page = admin.get("/settings").text
    table = re.search(r'id="account-audit-table">(.*?)</table>', page, re.S).group(1)
    assert f"token expired <code>wl_{expiring_id}_…</code> nightly" in table
    assert _random_part(secret) not in answer.text + page, "never the secret"
    again = admin.get("/api/members/audit").json()["items"]
    assert [e["action"] for e in again].count("token_expired") == 1, "recorded once"


def _random_part(secret: str) -> str:
    """What follows ``wl_<id>_`` in a token: all of it, since it may hold ``_`` itself
    (the last ``_``'s tail alone can be a letter any page holds)."""
    return secret.split("_", 2)[2]


async def _execute(store: Store, statement: str, key: str) -> None:
    """Run ``statement`` for one invitation's username or one token's id."""
    async with store.connection() as conn:
        await conn.execute(statement, (key,))


def _pending(page: str) -> str:
    """The Settings page's list of pending invitations (empty when there is none)."""
    found = re.search(r'id="invitations-table">(.*?)</table>', page, re.S)
    return found.group(1) if found else ""


def test_the_command_line_is_one_actor_and_nobody_may_take_its_name(
    studio: LiveStudio, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command line started instances as ``cli`` and added members as ``command
    line``: one actor under two names. It is ``cli`` in both, and a person may not be
    called ``cli`` (an invitation, a join, ``wayline user create``), or the audit would
    name them and the command line alike."""
    team = studio.team("cli-actor")
    database = ["--dsn", studio.dsn, "--schema", studio.schema]
    added = f"cli-{uuid.uuid4().hex[:6]}"
    assert main(["user", "create", added, "--team", team, "--role", "viewer", *database]) == 0
    assert main(["user", "create", "CLI", "--team", team, *database]) == 1
    assert "the username cli is reserved" in capsys.readouterr().err
    admin = studio.client(studio.user(team, Role.ADMIN))
    audit = admin.get("/api/members/audit").json()["items"]
    assert [e["actor"] for e in audit if e["username"] == added] == [COMMAND_LINE_ACTOR]
    refused = admin.form("/settings/members", {"username": "cli", "role": "viewer"})
    assert refused.status_code == 422 and "the username cli is reserved" in refused.text


def test_the_account_audit_pages_newest_first(studio: LiveStudio) -> None:
    team = studio.team("audit-pages")
    admin = studio.client(studio.user(team, Role.ADMIN))
    names = [f"p{i}-{uuid.uuid4().hex[:6]}" for i in range(3)]
    for name in names:
        admin.form("/settings/members", {"username": name, "role": "viewer"})
    first = admin.get("/api/members/audit", params={"limit": 2}).json()
    assert [e["username"] for e in first["items"]] == names[:0:-1]
    rest = admin.get("/api/members/audit", params={"limit": 2, "before": first["next_cursor"]})
    assert rest.json()["items"][0]["username"] == names[0]
    assert admin.get("/api/members/audit", params={"limit": 0}).status_code == 422
    page = admin.get("/settings", params={"audit_before": first["next_cursor"]}).text
    assert names[0] in page and names[2] not in page.split('id="account-audit-table"')[1]


def test_an_audit_cursor_past_any_entry_id_is_refused_not_a_server_error(
    studio: LiveStudio,
) -> None:
    """A ``before`` beyond PostgreSQL's bigint reached the query and answered 500."""
    viewer = studio.client(studio.user(studio.team("audit-cursor"), Role.VIEWER))
    huge = str(2**63)
    refused = viewer.get("/api/members/audit", params={"before": huge})
    assert refused.status_code == 422, refused.text
    assert "from 1 to 9223372036854775807" in refused.json()["error"]
    assert viewer.get("/settings", params={"audit_before": huge}).status_code == 422
