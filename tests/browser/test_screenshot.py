"""The editor as the README shows it: the example saga, one step selected, one mistake.

Run with ``WAYLINE_UPDATE_SCREENSHOTS=1`` to refresh ``docs/editor.png``; otherwise the
picture goes to the test's temporary directory, so a test run never changes the repo.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from studio import drafts
from studio.roles import Role
from tests.browser.conftest import sign_in
from tests.studio.live import LiveStudio

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "order_fulfillment.json"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_editor_screenshot(page: Page, studio: LiveStudio, tmp_path: Path) -> None:
    team = studio.team("shop", "Shop")
    document = json.loads(EXAMPLE.read_text())
    studio.publish(team, document)
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
    update = os.environ.get("WAYLINE_UPDATE_SCREENSHOTS") == "1"
    target = ROOT / "docs" / "editor.png" if update else tmp_path / "editor.png"
    target.parent.mkdir(exist_ok=True)
    page.screenshot(path=str(target))
    assert target.read_bytes().startswith(PNG_SIGNATURE)
    if not update and not (ROOT / "docs" / "editor.png").exists():
        pytest.fail("docs/editor.png is missing: run with WAYLINE_UPDATE_SCREENSHOTS=1")
