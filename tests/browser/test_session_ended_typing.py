"""What an operator typed survives a session that ended while they typed it: sending
the form leads to the sign-in page, which says the session ended; signing in again
returns to the page the form was on (not to the form's POST-only address), with the
typed text back in the form, and sending it then works."""

from __future__ import annotations

import uuid

import psycopg
from playwright.sync_api import Page, expect

from studio.roles import Role
from tests.browser.conftest import settled, sign_in
from tests.studio.live import PASSWORD, LiveStudio

STEPS = [{"name": "paid", "kind": "signal", "target": "paid", "timeout": "1h", "input_limit": 64}]


def end_sessions(studio: LiveStudio) -> None:
    """Every studio session ends at once (as one expires or is revoked)."""
    with psycopg.connect(studio.dsn, autocommit=True) as conn:
        conn.execute(f"DELETE FROM {studio.schema}.studio_sessions")


def sign_in_again(page: Page, username: str) -> None:
    expect(page.locator("main")).to_contain_text("Your session has ended")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()


def waiting_instance(studio: LiveStudio, prefix: str) -> tuple[str, str]:
    """An instance waiting for signal ``paid``, and an operator of its team."""
    team = studio.team(prefix)
    name = f"{prefix}.{uuid.uuid4().hex[:6]}"
    studio.publish(team, {"name": name, "version": "1", "mode": "orchestration", "steps": STEPS})
    return studio.start(team, name), studio.user(team, Role.OPERATOR)


def test_a_signal_typed_as_the_session_ended_is_back_after_signing_in(
    page: Page, studio: LiveStudio
) -> None:
    instance_id, operator = waiting_instance(studio, "ended-signal")
    sign_in(page, operator)
    page.goto(f"/instances/{instance_id}")
    settled(page)
    page.get_by_label("Payload for paid").fill('{"ok": true}')
    page.get_by_label("Reason for paid").fill("the bank called")
    end_sessions(studio)
    page.get_by_role("button", name="Send paid").click()

    sign_in_again(page, operator)
    page.wait_for_url(f"**/instances/{instance_id}")
    settled(page)
    expect(page.get_by_label("Payload for paid")).to_have_value('{"ok": true}')
    expect(page.get_by_label("Reason for paid")).to_have_value("the bank called")
    page.get_by_role("button", name="Send paid").click()
    expect(page.locator("#action-panel")).to_contain_text("Signal paid delivered")


def test_a_reason_typed_as_the_session_ended_is_back_in_its_confirmation(
    page: Page, studio: LiveStudio
) -> None:
    instance_id, operator = waiting_instance(studio, "ended-pause")
    sign_in(page, operator)
    page.goto(f"/instances/{instance_id}")
    settled(page)
    page.locator("[data-offer='pause']").click()
    settled(page)
    page.locator("#confirm-form").get_by_label("Reason").fill("the customer asked us to wait")
    end_sessions(studio)
    page.locator("#confirm-button").click()

    sign_in_again(page, operator)
    page.wait_for_url(f"**/instances/{instance_id}")
    settled(page)
    page.locator("[data-offer='pause']").click()
    reason = page.locator("#confirm-form").get_by_label("Reason")
    expect(reason).to_have_value("the customer asked us to wait")
    page.locator("#confirm-button").click()
    expect(page.locator("#instance-status")).to_have_text("paused")

    kept = "Object.keys(sessionStorage).filter(k => k.startsWith('wayline.typed')).length"
    assert page.evaluate(kept) == 0, "typed text is kept only for the way back"
