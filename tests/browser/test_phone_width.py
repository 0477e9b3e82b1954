"""At a phone's width (390 px) no page scrolls sideways: wide tables, code and forms
scroll inside their own box or wrap, and the page itself is never wider than the
screen."""

from __future__ import annotations

from playwright.sync_api import Browser, Page, expect

from studio.roles import Role
from tests.browser.conftest import TIMEOUT_MS, settled, sign_in
from tests.studio.live import LiveStudio, definition

PHONE = {"width": 390, "height": 844}
WIDER_THAN_SCREEN = "document.scrollingElement.scrollWidth - window.innerWidth"


def phone(browser: Browser, studio: LiveStudio) -> Page:
    """A page in a new context at a phone's width."""
    context = browser.new_context(viewport=PHONE, base_url=studio.url)
    context.set_default_timeout(TIMEOUT_MS)
    return context.new_page()


def wider_than_screen(page: Page, paths: list[str]) -> dict[str, int]:
    """The paths whose page is wider than the screen, and by how many pixels."""
    overflow = {}
    for path in paths:
        page.goto(path)
        settled(page)
        overflow[path] = page.evaluate(WIDER_THAN_SCREEN)
    return {path: px for path, px in overflow.items() if px > 0}


def test_no_main_page_scrolls_sideways_at_390_px(browser: Browser, studio: LiveStudio) -> None:
    team, name, instance_id = studio.one_running("phone")
    page = phone(browser, studio)
    page.goto("/login")
    assert page.evaluate(WIDER_THAN_SCREEN) <= 0, "the sign-in page scrolls sideways"
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
    assert wider_than_screen(page, pages) == {}
    page.context.close()


def test_long_names_and_values_wrap_at_390_px(browser: Browser, studio: LiveStudio) -> None:
    team = studio.team("phonelong")
    name = "orders.fulfilment.with.a.name.far.longer.than.a.phone.screen.is.wide"
    studio.publish(team, definition(name))
    instance_id = studio.start(team, name, input={"note": "n" * 300})
    page = phone(browser, studio)
    sign_in(page, studio.user(team, Role.ADMIN))
    pages = [
        f"/definitions/{name}",
        f"/definitions/{name}/versions/1",
        "/instances?view=all",
        "/instances/new",
        f"/instances/{instance_id}",
        "/holds",
    ]
    assert wider_than_screen(page, pages) == {}
    page.context.close()


def test_a_settings_label_stays_beside_its_field_at_390_px(
    browser: Browser, studio: LiveStudio
) -> None:
    """The invite and token forms wrapped between a label and its field ("Role" at the
    end of one line, its menu on the next)."""
    team, _, _ = studio.one_running("phone-labels")
    page = phone(browser, studio)
    sign_in(page, studio.user(team, Role.ADMIN))
    page.goto("/settings")
    settled(page)
    for field in ("member-username", "member-name", "member-role", "token-label", "token-role"):
        label = page.locator(f"label[for='{field}']").bounding_box()
        control = page.locator(f"#{field}").bounding_box()
        assert label and control
        middle = label["y"] + label["height"] / 2
        assert control["y"] <= middle <= control["y"] + control["height"], field
    page.context.close()
