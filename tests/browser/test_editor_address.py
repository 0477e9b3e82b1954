"""The editor's address and what a draft says of itself: the URL follows the selection
(a reload shows what an edit showed), a new empty draft opens without an error banner,
and a published draft says so and becomes the next version in one click."""

from __future__ import annotations

import re
import uuid

from playwright.sync_api import Page, expect

from studio.roles import Role
from tests.browser.conftest import open_new_draft, settled, sign_in
from tests.studio.live import LiveStudio, definition


def new_definition(page: Page, studio: LiveStudio) -> None:
    """Create a new definition through the definitions page, as a person does."""
    sign_in(page, studio.user(studio.team("address"), Role.AUTHOR))
    if not page.get_by_label("Name").is_visible():
        page.get_by_text("New definition").click()
    page.get_by_label("Name").fill(f"address.{uuid.uuid4().hex[:6]}")
    page.get_by_role("button", name="Create draft").click()
    page.wait_for_url(re.compile(r"/drafts/[0-9a-f]+$"))
    settled(page)


def test_a_new_draft_opens_without_an_error_banner(page: Page, studio: LiveStudio) -> None:
    new_definition(page, studio)
    expect(page.get_by_role("link", name="Add the first step")).to_be_visible()
    expect(page.locator(".doc-problems")).to_have_count(0)
    expect(page.get_by_role("alert")).to_have_count(0)
    expect(page.locator("#publish-button")).to_be_disabled()


def test_the_address_follows_the_selection(page: Page, studio: LiveStudio) -> None:
    new_definition(page, studio)
    page.get_by_role("link", name="Add the first step").click()
    settled(page)
    page.locator("#inspector").get_by_role("button", name="Timer", exact=True).click()
    expect(page.locator("#selected-step")).to_have_text("timer_1")
    expect(page).to_have_url(re.compile(r"\?step=timer_1$"))
    settled(page)
    name = page.locator("#step-form #field-name")
    name.fill("cool_off")
    name.press("Tab")
    expect(page.locator("#selected-step")).to_have_text("cool_off")
    expect(page).to_have_url(re.compile(r"\?step=cool_off$"))
    page.reload()
    expect(page.locator("#selected-step")).to_have_text("cool_off")
    expect(page.locator("#field-name")).to_have_value("cool_off")


def test_a_published_draft_says_so_and_offers_a_new_version(page: Page, studio: LiveStudio) -> None:
    name = f"released.{uuid.uuid4().hex[:6]}"
    draft_id = open_new_draft(page, studio, "published", definition(name))
    expect(page.locator("#published-note")).to_have_count(0)
    page.get_by_role("button", name="Publish").click()
    page.wait_for_url(f"**/definitions/{name}/versions/1?published=new")

    page.goto("/definitions")
    row = page.locator("#drafts-table tr", has_text=name)
    expect(row.locator(".pill")).to_have_text("published")
    row.get_by_role("link", name=f"{name}@1").click()
    expect(page.locator("#published-note")).to_contain_text(f"published as {name}@1")
    settled(page)
    page.get_by_role("button", name="New version").click()
    expect(page.locator("#draft-version")).to_have_value("2")
    expect(page.locator("#published-note")).to_have_count(0)
    page.goto("/definitions")
    expect(row.locator(".pill")).to_have_count(0)
    assert draft_id in page.locator("#drafts-table").inner_html()


def test_back_shows_the_draft_as_the_server_has_it_and_the_next_edit_takes(
    page: Page, studio: LiveStudio
) -> None:
    """A copy of the page as first loaded (the browser's cache) or as htmx kept it
    would show an older revision, and the next edit from it would be refused as if
    made in another window."""
    draft_id = open_new_draft(page, studio, "back", definition(f"back.{uuid.uuid4().hex[:6]}"))
    page.goto(f"/drafts/{draft_id}?step=cool_off")
    settled(page)
    for value in ("8s", "9s"):
        timeout = page.locator("#step-form #field-timeout")
        timeout.fill(value)
        timeout.press("Tab")
        expect(page.locator("#step-form #field-timeout")).to_have_value(value)
        settled(page)
    revision = page.locator("#workspace").get_attribute("data-revision")
    page.goto(f"/drafts/{draft_id}?step=reserve")  # away by address, not by a click
    settled(page)

    page.go_back()
    expect(page.locator("#selected-step")).to_have_text("cool_off")
    settled(page)
    expect(page.locator("#workspace")).to_have_attribute("data-revision", revision or "")
    expect(page.locator("#step-form #field-timeout")).to_have_value("9s")
    timeout = page.locator("#step-form #field-timeout")
    timeout.fill("10s")
    timeout.press("Tab")
    expect(page.locator("#workspace")).to_have_attribute("data-revision", str(int(revision) + 1))
    expect(page.get_by_role("alert")).to_have_count(0)
