"""An incident hold in the browser: place it on the Holds page, see the banner where the
held instances are, release one instance, and watch the backlog shrink.

The instances run a target no worker runs, so their first activity is all they have:
placing the hold parks it, and the backlog counts them."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from studio.roles import Role
from tests.browser.conftest import sign_in
from tests.browser.test_bulk_cancel import waiting_instances
from tests.studio.live import LiveStudio

REASON = "INC-12: the supplier API returns garbage"


def test_hold_and_gradual_release(page: Page, studio: LiveStudio) -> None:
    team = studio.team("holdui")
    name, _ = waiting_instances(studio, team, 3)
    operator = studio.user(team, Role.OPERATOR)
    sign_in(page, operator)

    page.goto("/holds")
    page.get_by_label("Hold", exact=True).select_option("definition")
    page.get_by_label("Definition (NAME or NAME@VERSION)").fill(name)
    page.get_by_label("Reason").fill(REASON)
    page.get_by_role("button", name="Place hold").click()
    expect(page.locator("#hold-notice")).to_contain_text("placed")
    row = page.locator("#holds tbody tr").first
    expect(row.locator(".hold-backlog")).to_have_text("3")

    page.goto(f"/instances?view=all&definition={name}")
    banner = page.locator("#hold-banner")
    expect(banner).to_contain_text(f"On hold: {name}")
    expect(banner).to_contain_text(operator)
    expect(banner).to_contain_text(REASON)
    expect(banner.locator(".hold-backlog")).to_have_text("3")
    page.locator("#instances-table tbody tr a").first.click()
    expect(page.locator("#hold-banner")).to_contain_text(REASON)

    page.goto("/holds")
    form = page.locator("form.release-hold").first
    form.get_by_label("How", exact=True).select_option("count")
    form.get_by_label("How many").fill("1")
    form.get_by_label("Reason").fill("try one order first")
    form.get_by_role("button", name="Release").click()
    expect(page.locator("#hold-notice")).to_contain_text("1 work item due again")
    row = page.locator("#holds tbody tr").first
    expect(row.locator(".hold-backlog")).to_have_text("2")
    expect(row).to_contain_text("try one order first")
    expect(row.locator(".pill")).to_have_text("in force")
    page.goto(f"/definitions/{name}")
    expect(page.locator("#hold-banner .hold-backlog")).to_have_text("2")


ONE_LINE = (
    "e => e.getBoundingClientRect().height < 2 * 1.2 * parseFloat(getComputedStyle(e).fontSize)"
)
"""Whether an element's text stands on one line (two would be at least twice its size)."""


def test_a_long_reason_wraps_on_the_holds_page(page: Page, studio: LiveStudio) -> None:
    """A reason of one long word (an incident URL) made the holds table, and the page,
    three times the window's width."""
    team = studio.team("holdwide")
    name = studio.publish_new(team, "holdwide")
    sign_in(page, studio.user(team, Role.OPERATOR))
    page.goto("/holds")
    page.get_by_label("Definition (NAME or NAME@VERSION)").fill(name)
    long_reason = "https://incidents.example.com/" + "a" * 300
    page.get_by_label("Reason").fill(long_reason)
    page.get_by_role("button", name="Place hold").click()
    expect(page.locator("#holds tbody tr").first).to_contain_text(long_reason)
    badge = page.locator("#holds tbody tr").first.locator(".pill")
    expect(badge).to_have_text("in force")
    assert badge.evaluate(ONE_LINE), "the badge wraps to a second line"
    form = page.locator("form.release-hold").first
    form.get_by_label("How", exact=True).select_option("all")
    form.get_by_label("Reason").fill(long_reason)
    form.get_by_role("button", name="Release").click()
    expect(page.locator("#hold-notice")).to_contain_text("due again")
    expect(page.locator("#holds tbody tr").first).to_contain_text("all — https")
    assert page.evaluate("document.scrollingElement.scrollWidth - window.innerWidth") <= 0
