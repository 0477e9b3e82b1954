"""The Settings page as an admin uses it: a new token or invitation code is one click
to copy and the page stays Settings (a reload does not post again), removing a member
or revoking a token asks first, and a first own password leads on to the definitions."""

from __future__ import annotations

from playwright.sync_api import Dialog, Page, expect

from studio.roles import Role
from tests.browser.conftest import settled, sign_in
from tests.studio.live import PASSWORD, LiveStudio

CLIPBOARD = "() => navigator.clipboard.readText()"


def copied(page: Page, button: str, secret: str) -> None:
    """Clicking ``button`` puts the text of ``#secret`` on the clipboard."""
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    shown = page.locator(f"#{secret}").inner_text().strip()
    page.get_by_role("button", name=button).click()
    expect(page.get_by_role("button", name="Copied")).to_be_visible()
    assert page.evaluate(CLIPBOARD) == shown


def answer(page: Page, accept: bool, asked: list[str]) -> None:
    def reply(dialog: Dialog) -> None:
        asked.append(dialog.message)
        dialog.accept() if accept else dialog.dismiss()

    page.once("dialog", reply)


def test_a_new_token_and_code_copy_and_the_page_stays_settings(
    page: Page, studio: LiveStudio
) -> None:
    team = studio.team("settingsui")
    sign_in(page, studio.user(team, Role.ADMIN))
    page.goto("/settings")
    page.get_by_label("Label").fill("ci-publish")
    page.get_by_role("button", name="Create token").click()
    expect(page.locator("#token-created")).to_be_visible()
    expect(page).to_have_url(f"{studio.url}/settings")
    copied(page, "Copy token", "new-token")

    page.locator("#member-username").fill("newcomer")
    page.get_by_role("button", name="Invite").click()
    expect(page.locator("#member-invited")).to_be_visible()
    expect(page).to_have_url(f"{studio.url}/settings")
    copied(page, "Copy code", "invitation-code")
    page.reload()  # the page, not the POST again: the code was shown once
    expect(page.locator("#invitations-table")).to_contain_text("newcomer")
    expect(page.locator("#member-invited")).to_have_count(0)


def test_removing_a_member_and_revoking_a_token_ask_first(page: Page, studio: LiveStudio) -> None:
    team = studio.team("confirmui")
    member = studio.user(team, Role.VIEWER)
    sign_in(page, studio.user(team, Role.ADMIN))
    page.goto("/settings")
    page.get_by_label("Label").fill("to-revoke")
    page.get_by_role("button", name="Create token").click()
    tokens = page.locator("#tokens-table")
    members = page.locator("#members-table")
    asked: list[str] = []

    for accept in (False, True):
        settled(page)
        answer(page, accept, asked)
        tokens.get_by_role("button", name="Revoke").click()
        settled(page)
        answer(page, accept, asked)
        members.locator("tr", has_text=member).get_by_role("button", name="Remove").click()
        settled(page)
        if not accept:  # dismissed: nothing posted, both still there
            expect(tokens).to_contain_text("to-revoke")
            expect(members).to_contain_text(member)
    expect(page.locator("#members-table")).not_to_contain_text(member)
    revoked = tokens.locator("tr", has_text="to-revoke")  # kept: audit records name it
    expect(revoked).to_contain_text("revoked")
    expect(revoked.get_by_role("button", name="Revoke")).to_have_count(0)
    assert len(asked) == 4 and "Revoke the token to-revoke" in asked[0]
    assert f"Remove {member}" in asked[1]


def test_a_first_own_password_leads_on_to_the_definitions(page: Page, studio: LiveStudio) -> None:
    team = studio.team("firstpw")
    username = studio.user(team, Role.AUTHOR, must_change=True)
    page.goto("/login")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/account")
    page.locator("#current").fill(PASSWORD)
    page.locator("#new").fill("a much better password")
    page.locator("#confirm").fill("a much better password")
    page.get_by_role("button", name="Change password").click()
    page.wait_for_url("**/definitions")
    expect(page.get_by_role("heading", level=1)).to_contain_text("Definitions")


def test_a_refused_password_change_is_said_beside_its_field(page: Page, studio: LiveStudio) -> None:
    """A wrong current password, a new one failing a rule, a confirmation that differs:
    each is said beside the field it concerns, which is marked invalid, described by it
    and focused (it was one message above the page's columns, away from the field)."""
    team = studio.team("passwordui")
    username = studio.user(team, Role.VIEWER)
    sign_in(page, username)
    better = "a much better passphrase"
    cases = [
        ("current", "not the password", better, better, "the current password is wrong"),
        ("new", PASSWORD, "Password 1234", "Password 1234", "most common passwords"),
        ("new", PASSWORD, f"my {username} phrase", f"my {username} phrase", "username"),
        ("confirm", PASSWORD, better, "a much better passphrasf", "confirmation differ"),
    ]
    for field, current, new, confirm, said in cases:
        page.goto("/account")
        page.locator("#current").fill(current)
        page.locator("#new").fill(new)
        page.locator("#confirm").fill(confirm)
        page.get_by_role("button", name="Change password").click()
        refused = page.locator(f"#{field}")
        expect(refused).to_have_attribute("aria-invalid", "true")
        expect(refused).to_have_attribute("aria-describedby", f"{field}-error")
        expect(page.locator(f"#{field}-error")).to_contain_text(said)
        expect(refused).to_be_focused()
        others = [f for f in ("current", "new", "confirm") if f != field]
        for other in others:
            expect(page.locator(f"#{other}")).not_to_have_attribute("aria-invalid", "true")
        expect(page.locator(".alert.error")).to_have_count(0)
    assert studio.client().sign_in(username).status_code == 303, "the password is unchanged"
