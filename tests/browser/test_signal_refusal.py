"""A refused signal is said in its own form, beside the field: the page's action panel,
where other answers go, is scrolled far out of sight when the Signals card is in view,
so a refusal said there looked like a button that did nothing."""

from __future__ import annotations

import uuid

from playwright.sync_api import Page, expect

from studio.roles import Role
from tests.browser.conftest import settled, sign_in
from tests.studio.live import LiveStudio

STEPS = [{"name": "paid", "kind": "signal", "target": "paid", "timeout": "1h", "input_limit": 64}]


def test_a_refused_signal_is_said_beside_its_field_with_what_was_typed(
    page: Page, studio: LiveStudio
) -> None:
    team = studio.team("signal-refusal")
    name = f"refused.{uuid.uuid4().hex[:6]}"
    studio.publish(team, {"name": name, "version": "1", "mode": "orchestration", "steps": STEPS})
    instance_id = studio.start(team, name)
    sign_in(page, studio.user(team, Role.OPERATOR))
    page.goto(f"/instances/{instance_id}")
    settled(page)

    payload = page.get_by_label("Payload for paid")
    reason = page.get_by_label("Reason for paid")
    payload.fill("{oops")
    reason.fill("the bank called")
    page.get_by_role("button", name="Send paid").click()
    expect(payload).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#signal-payload-error-paid")).to_contain_text("not valid JSON")
    expect(page.locator("#signal-payload-error-paid")).to_be_in_viewport()
    expect(payload).to_have_value("{oops")
    expect(reason).to_have_value("the bank called")
    expect(payload).to_be_focused()

    settled(page)
    payload.fill('{"ok": true}')
    page.get_by_role("button", name="Send paid").click()
    expect(page.locator("#action-panel")).to_contain_text("Signal paid delivered")
