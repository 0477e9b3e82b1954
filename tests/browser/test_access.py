"""What each role sees and may do in the browser, and requests the studio refuses."""

from __future__ import annotations

import re
import uuid

from playwright.sync_api import Browser, Page, expect

from studio.definitions import drafts
from studio.roles import Role
from tests.browser.conftest import TIMEOUT_MS, settled, sign_in
from tests.studio.live import PASSWORD, LiveStudio, definition


def csrf_of(page: Page) -> str:
    headers = page.locator("body").get_attribute("hx-headers") or ""
    return re.search(r'"X-CSRF-Token": "([^"]+)"', headers).group(1)


def test_a_viewer_sees_no_editing_controls_and_a_forged_edit_is_refused(
    page: Page, studio: LiveStudio
) -> None:
    team = studio.team("viewers")
    name = f"watched.{uuid.uuid4().hex[:6]}"
    studio.publish(team, definition(name))
    draft = studio.run(
        lambda store: drafts.create_draft(store, team, definition(name, "2"), "", "x")
    )
    sign_in(page, studio.user(team, Role.VIEWER))

    expect(page.get_by_role("link", name=name, exact=True)).to_be_visible()
    expect(page.get_by_text("New definition")).to_have_count(0)
    expect(page.get_by_role("link", name="Import JSON")).to_have_count(0)

    page.goto(f"/definitions/{name}/versions/1")
    expect(page.locator("#fingerprint-full")).to_be_visible()
    expect(page.get_by_role("button", name="New draft from this version")).to_have_count(0)

    page.goto(f"/drafts/{draft.draft_id}?step=cool_off")
    expect(page.locator("#step-cool_off")).to_have_class(re.compile(r"\bselected\b"))
    expect(page.locator(".insert-handle")).to_have_count(0)
    expect(page.locator(".branch-handle")).to_have_count(0)
    expect(page.locator("#step-form")).to_have_count(0)
    expect(page.get_by_role("button", name="Publish")).to_have_count(0)
    expect(page.locator("#inspector dl.fields")).to_contain_text("5m")

    # The same edit an author's form would send, with a valid CSRF token: still refused.
    forged = page.request.post(
        f"/drafts/{draft.draft_id}/insert",
        form={"_csrf": csrf_of(page), "revision": "1", "at": "0", "kind": "timer"},
        max_redirects=0,
    )
    assert forged.status == 403
    assert "needs the author role" in forged.text()
    page.reload()
    expect(page.locator(".node.kind-timer")).to_have_count(1)  # nothing was inserted


def test_a_request_without_the_csrf_token_is_refused(page: Page, studio: LiveStudio) -> None:
    team = studio.team("csrf")
    name = f"guarded.{uuid.uuid4().hex[:6]}"
    studio.publish(team, definition(name))
    sign_in(page, studio.user(team, Role.AUTHOR))
    refused = page.request.post(
        f"/definitions/{name}/versions/1/deprecate", form={}, max_redirects=0
    )
    assert refused.status == 403
    assert "CSRF" in refused.text()
    page.goto(f"/definitions/{name}")
    expect(page.locator("#versions-table")).to_contain_text("active")


def test_another_teams_definition_is_not_found(page: Page, studio: LiveStudio) -> None:
    ours, theirs = studio.team("ours"), studio.team("theirs")
    name = f"private.{uuid.uuid4().hex[:6]}"
    studio.publish(theirs, definition(name))
    sign_in(page, studio.user(ours, Role.ADMIN))
    response = page.goto(f"/definitions/{name}")
    assert response is not None and response.status == 404
    expect(page.get_by_role("heading", name="Not found")).to_be_visible()
    expect(page.get_by_role("link", name=name)).to_have_count(0)


def test_the_editor_works_from_the_keyboard(page: Page, studio: LiveStudio) -> None:
    team = studio.team("keys")
    draft = studio.run(
        lambda store: drafts.create_draft(store, team, definition("keys.flow"), "", "x")
    )
    sign_in(page, studio.user(team, Role.AUTHOR))
    page.goto(f"/drafts/{draft.draft_id}")
    page.get_by_role("link", name="Insert a step at the end").focus()
    page.keyboard.press("Enter")
    settled(page)
    page.get_by_role("button", name="Approval", exact=True).focus()
    page.keyboard.press("Enter")
    expect(page.locator("#selected-step")).to_have_text("approval_1")
    settled(page)
    page.locator("#step-reserve a").focus()
    page.keyboard.press("Enter")
    expect(page.locator("#selected-step")).to_have_text("reserve")
    settled(page)
    page.get_by_role("button", name="Move down").focus()
    page.keyboard.press("Enter")
    outline = page.get_by_role("navigation", name="Steps outline")
    expect(outline.locator(".outline-name").first).to_have_text("checks")


def test_forms_work_without_htmx(page: Page, studio: LiveStudio) -> None:
    """A form posted natively (before htmx has wired it, or without htmx at all) carries
    the CSRF token in its own fields, so the edit is saved rather than refused."""
    team = studio.team("native")
    draft = studio.run(
        lambda store: drafts.create_draft(store, team, definition("native.flow"), "", "x")
    )
    sign_in(page, studio.user(team, Role.AUTHOR))
    page.route("**/static/htmx-*.js", lambda route: route.abort())
    page.goto(f"/drafts/{draft.draft_id}?step=reserve")
    with page.expect_navigation() as posted:
        page.get_by_role("button", name="Move down").click()
    assert posted.value is not None and posted.value.status == 200
    assert page.evaluate("typeof window.htmx") == "undefined"  # no htmx: a native post
    outline = page.get_by_role("navigation", name="Steps outline")
    expect(outline.locator(".outline-name").first).to_have_text("checks")
    expect(page.locator("#selected-step")).to_have_text("reserve")


def test_narrow_windows_stack_the_editor(page: Page, studio: LiveStudio) -> None:
    team = studio.team("narrow")
    draft = studio.run(
        lambda store: drafts.create_draft(store, team, definition("narrow.flow"), "", "x")
    )
    sign_in(page, studio.user(team, Role.AUTHOR))
    page.set_viewport_size({"width": 420, "height": 800})
    page.goto(f"/drafts/{draft.draft_id}?step=reserve")
    canvas = page.get_by_role("region", name="Definition").bounding_box()
    inspector = page.get_by_role("complementary", name="Inspector").bounding_box()
    assert canvas and inspector and inspector["y"] >= canvas["y"] + canvas["height"] - 1
    assert page.evaluate("document.documentElement.scrollWidth") <= 420


def test_an_invited_person_joins_the_team_with_the_code(
    page: Page, browser: Browser, studio: LiveStudio
) -> None:
    team = studio.team("invites", "Invited Team")
    sign_in(page, studio.user(team, Role.ADMIN))
    page.goto("/settings")
    newcomer = f"ada-{uuid.uuid4().hex[:6]}"
    page.locator("#member-username").fill(newcomer)
    page.locator("#member-role").select_option("author")
    page.get_by_role("button", name="Invite").click()
    expect(page.locator("#member-invited")).to_contain_text(f"{newcomer} is invited to")
    code = page.locator("#invitation-code").inner_text()
    expect(page.locator("#invitations-table")).to_contain_text(newcomer)

    context = browser.new_context(base_url=studio.url)
    context.set_default_timeout(TIMEOUT_MS)
    joining = context.new_page()
    joining.goto("/login")
    joining.get_by_role("link", name="Join with your invitation code").click()
    joining.get_by_label("Username").fill(newcomer)
    joining.get_by_label("Invitation code").fill(code)
    joining.get_by_label("Password").fill(PASSWORD)
    joining.get_by_role("button", name="Join").click()
    joining.wait_for_url("**/definitions")
    expect(joining.get_by_text("Invited Team").first).to_be_visible()
    context.close()
    page.goto("/settings")
    expect(page.locator("#members-table")).to_contain_text(newcomer)
    expect(page.locator("#invitations-table")).to_have_count(0)
