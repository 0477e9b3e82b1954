"""Long step names in the editor (issue 24): the outline shows the whole name (wrapped,
not cut off) and a node's title stays inside its box; a name far beyond any allowed
length is cut short, so the step's form and its error stay on the screen."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.browser.conftest import open_new_draft
from tests.studio.live import LiveStudio

LONG = "WWWWWWWWWWWWMMMMMMMMMMMMMM.reconcile_the_ledger_entries"
DOCUMENT = {
    "name": "long.names",
    "version": "1",
    "steps": [{"name": LONG, "kind": "timer", "timeout": "1m"}],
}


def test_a_long_name_is_whole_in_the_outline_and_inside_its_node(
    page: Page, studio: LiveStudio
) -> None:
    open_new_draft(page, studio, "longnames", DOCUMENT)
    outline = page.get_by_role("navigation", name="Steps outline")
    name = outline.locator(".outline-name", has_text="WWWW")
    expect(name).to_have_text(LONG)
    assert name.evaluate("e => e.scrollWidth <= e.clientWidth"), "the name is cut off"
    assert name.evaluate("e => e.scrollHeight <= e.clientHeight"), "the name is cut short"

    node = page.locator("svg g.node", has=page.locator("text.title"))
    box = node.locator("rect.box").first.bounding_box()
    title = node.locator("text.title").first.bounding_box()
    assert box is not None and title is not None
    assert title["x"] + title["width"] <= box["x"] + box["width"], (title, box)


def test_a_name_of_ten_thousand_characters_leaves_the_form_and_its_error_in_view(
    page: Page, studio: LiveStudio
) -> None:
    """It filled the outline and the step's heading line after line, and the name field
    with "must be 1 to 200 characters" sat hundreds of lines below."""
    huge = "x" * 10_000
    document = {**DOCUMENT, "steps": [{**DOCUMENT["steps"][0], "name": huge}]}
    open_new_draft(page, studio, "hugename", document)
    outline = page.get_by_role("navigation", name="Steps outline")
    item = outline.locator(".outline-item").first
    item.click()
    error = page.locator("#field-name-note .field-error")
    expect(error).to_contain_text("1 to 200 characters")
    expect(error).to_be_in_viewport()
    expect(page.locator("#field-name")).to_have_value(huge)
    box = item.bounding_box()
    assert box is not None and box["height"] < 150, box
