"""A machine in the browser: its version page draws the state diagram, and an
execution's page highlights its current state and the edges it took, live.

The machine's worker side is not built yet, so the test writes the execution's
history itself, as the runtime will (``LiveStudio.start_machine`` and
``machine_event``, each event checked by replay on the way in).
"""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

from playwright.sync_api import Page, expect

from engine.model.events import EventKind
from studio.roles import Role
from tests.browser.conftest import settled, sign_in
from tests.studio.live import LiveStudio
from tests.unit.machines import approval_document

K = EventKind


def test_a_machine_version_and_an_execution_moving_through_its_states(
    page: Page, studio: LiveStudio, tmp_path: Path
) -> None:
    team = studio.team("machines")
    document = approval_document()
    document["name"] = "approval_browser"
    studio.publish(team, document)
    sign_in(page, studio.user(team, Role.OPERATOR))

    page.goto("/definitions/approval_browser/versions/1")
    diagram = page.locator("svg.state-diagram")
    expect(diagram.locator(".node")).to_have_count(5)
    expect(diagram.locator(".transition")).to_have_count(5)
    expect(page.locator("#state-Submitted")).to_have_class(re.compile(r"\binitial\b"))
    expect(page.locator("#state-entry")).to_be_visible()
    expect(page.locator("#state-InReview .timer-badge")).to_have_text("⏱ 1 min")
    expect(page.locator("#state-Expired .ring")).to_have_count(1)
    expect(page.locator("#edge-InReview--InReview")).to_have_class(re.compile(r"route-self"))
    page.screenshot(path=str(tmp_path / "version.png"))

    execution = studio.start_machine(team, "approval_browser", {"input": "doc", "parent": "p"})
    studio.machine_event(
        execution, K.STATE_ENTERED, step="InReview", attempt=1, data='{"reminders":0}'
    )
    page.goto(f"/instances/{execution}")
    settled(page)
    current = page.locator("#state-InReview")
    expect(current).to_have_class(re.compile(r"\bcurrent\b.*\bstate-waiting-timer\b"))
    expect(page.locator("#state-Submitted")).not_to_have_class(re.compile(r"\bcurrent\b"))
    expect(page.locator("#edge-Submitted--InReview")).to_have_class(re.compile(r"\btaken\b"))
    expect(page.locator("#edge-Submitted--InReview .count")).to_have_text("1")
    expect(page.locator("#machine-current")).to_have_text("InReview")
    expect(page.locator("#machine-fields")).to_contain_text("reminders")

    # The execution moves on while the page is open: the page follows without a reload.
    page.evaluate("window.__sameDocument = true")
    studio.machine_event(
        execution, K.TIMER_SCHEDULED, step="InReview", due_at=timedelta(seconds=60)
    )
    studio.machine_event(execution, K.TIMER_FIRED, step="InReview", later=timedelta(seconds=61))
    studio.machine_event(
        execution, K.STATE_ENTERED, step="Approved", attempt=1, data='{"by":"ann"}'
    )
    studio.machine_event(execution, K.COMPLETED)
    expect(page.locator("#state-Approved")).to_have_class(
        re.compile(r"\bcurrent\b.*\bstate-succeeded\b")
    )
    expect(page.locator("#edge-InReview--Approved")).to_have_class(re.compile(r"\btaken last\b"))
    expect(page.locator("#edge-InReview--Approved .count")).to_have_text("1")
    expect(current).not_to_have_class(re.compile(r"\bcurrent\b"))
    expect(page.locator("#machine-status")).to_have_text("completed")
    expect(page.locator("#live-badge")).to_have_text("ended")
    assert page.evaluate("window.__sameDocument") is True
    page.screenshot(path=str(tmp_path / "execution.png"), full_page=True)
