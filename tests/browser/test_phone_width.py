"""At a phone's width (390 px) no page scrolls sideways: wide tables, code and forms
scroll inside their own box or wrap, and the page itself is never wider than the
screen."""

from __future__ import annotations

from playwright.sync_api import Browser, expect

from studio.roles import Role
from tests.browser.conftest import TIMEOUT_MS, settled, sign_in
from tests.studio.live import LiveStudio

PHONE = {"width": 390, "height": 844}
WIDER_THAN_SCREEN = "document.scrollingElement.scrollWidth - window.innerWidth"


def test_no_main_page_scrolls_sideways_at_390_px(browser: Browser, studio: LiveStudio) -> None:
    team, name, instance_id = studio.one_running("phone")
    context = browser.new_context(viewport=PHONE, base_url=studio.url)
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    page.goto("/login")
    overflow = {"/login": page.evaluate(WIDER_THAN_SCREEN)}
    sign_in(page, studio.user(team, Role.ADMIN))
    page.goto("/settings")  # a token and an invitation fill the Settings page's tables
    page.get_by_label("Label").fill("ci-publish")
    page.get_by_role("button", name="Create token").click()
    page.goto("/settings")
    page.locator("#member-username").fill("phone.member")
    page.get_by_role("button", name="Invite").click()
    expect(page.locator("#invitation-code")).to_be_visible()
    pages = [
        "/definitions",
        f"/definitions/{name}",
        f"/definitions/{name}/versions/1",
        "/instances",
        "/instances/new",
        f"/instances/{instance_id}",
        "/dead-letters",
        "/drills",
        "/workers",
        "/settings",
        "/account",
    ]
    for path in pages:
        page.goto(path)
        settled(page)
        overflow[path] = page.evaluate(WIDER_THAN_SCREEN)
    context.close()
    assert {path: px for path, px in overflow.items() if px > 0} == {}
