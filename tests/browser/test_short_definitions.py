"""Definitions with less ceremony, in the browser (issue 24): a document that leaves out
``mode``, the payload limits and ``retry`` imports without a problem and publishes with
the defaults written out, so its fingerprint is that of the fully written document."""

from __future__ import annotations

import json
import uuid

from playwright.sync_api import Page, expect

from engine.model.validation import parse_definition
from studio.roles import Role
from tests.browser.conftest import settled, sign_in
from tests.studio.live import LiveStudio

RETRY = {"max_attempts": 3, "initial_delay": "1s", "max_delay": "1m"}


def test_a_short_document_publishes_with_the_defaults(page: Page, studio: LiveStudio) -> None:
    team = studio.team("short")
    name = f"short.{uuid.uuid4().hex[:6]}"
    step = {"name": "charge", "kind": "activity", "target": "pay.charge", "timeout": "30s"}
    written = {"input_limit": 65536, "result_limit": 65536, "retry": RETRY}
    full = {"name": name, "version": "1", "mode": "orchestration", "steps": [step | written]}
    sign_in(page, studio.user(team, Role.AUTHOR))

    page.goto("/definitions/import")
    page.get_by_label("or paste it here").fill(
        json.dumps({"name": name, "version": "1", "steps": [step]})
    )
    page.get_by_role("button", name="Preview").click()
    expect(page.locator("#import-preview")).to_be_visible()
    settled(page)
    expect(page.locator("#import-preview .problems, #import-preview .alert.error")).to_have_count(0)
    page.get_by_role("button", name="Publish").click()
    page.wait_for_url(f"**/definitions/{name}/versions/1?published=new")
    expect(page.locator("main")).to_contain_text(parse_definition(full).fingerprint[:12])
