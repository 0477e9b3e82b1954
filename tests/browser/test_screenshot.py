"""The editor as the README shows it: the example saga, one step selected, one mistake.

Run with ``WAYLINE_UPDATE_SCREENSHOTS=1`` to refresh ``docs/editor.png`` (and the
operations screenshots in ``test_operations.py``).
"""

from __future__ import annotations

import json
from pathlib import Path

from playwright.sync_api import Page, expect

from studio.definitions import drafts
from studio.roles import Role
from tests.browser.conftest import EXAMPLE, screenshot, sign_in
from tests.studio.live import LiveStudio


def test_editor_screenshot(page: Page, studio: LiveStudio, shop: str, tmp_path: Path) -> None:
    team = shop
    document = json.loads(EXAMPLE.read_text())
    document["version"] = "2"
    document["steps"][1]["timeout"] = "90 seconds"  # the mistake the editor points at
    draft = studio.run(
        lambda store: drafts.create_draft(store, team, document, "order.fulfillment@1", "ada")
    )
    sign_in(page, studio.user(team, Role.AUTHOR, display_name="Ada Lovelace"))
    page.goto(f"/drafts/{draft.draft_id}?step=charge")
    expect(page.locator("#step-charge")).to_have_class("node kind-activity invalid selected")
    expect(page.locator("#field-timeout-note")).to_contain_text("expected a duration")
    page.locator("#field-timeout").focus()
    screenshot(page, "editor.png", tmp_path)
