"""Long step names in the editor (issue 24): the outline shows the whole name (wrapped,
not cut off) and a node's title stays inside its box."""

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

    node = page.locator("svg g.node", has=page.locator("text.title"))
    box = node.locator("rect.box").first.bounding_box()
    title = node.locator("text.title").first.bounding_box()
    assert box is not None and title is not None
    assert title["x"] + title["width"] <= box["x"] + box["width"], (title, box)
