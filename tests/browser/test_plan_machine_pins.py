"""A drill plan on a state machine in the browser: click a state on the published
machine's diagram, pin a fault on its advance, save and run the plan, watch the marker
fire on that state and read where the execution ended, then open the heatmap."""

from __future__ import annotations

import uuid

from playwright.sync_api import Page, expect

from tests.browser.plan_pins import RUN_MS, pin_on_a_node
from tests.studio.live import LiveStudio
from tests.studio.test_plan_machines import approval


def test_pin_a_state_run_and_see_the_verdict_on_the_diagram(page: Page, studio: LiveStudio) -> None:
    name = f"approval.{uuid.uuid4().hex[:6]}"
    pin_on_a_node(
        page, studio, "machinepins", approval(name), "state-InReview", "InReview:before_commit:kill"
    )
    page.get_by_label("Input (JSON)").fill('"v1"')
    page.get_by_label("InReview result").fill('"Rejected"')
    page.get_by_label("Save as").fill("review killed")
    page.get_by_role("button", name="Save plan").click()
    expect(page.locator("#plan-notice")).to_have_text("Saved review killed v1.")

    page.locator("tr[data-plan='review killed']").get_by_role("button", name="Run").click()
    expect(page.locator("#state-InReview .pin-marker.pin-fired")).to_have_count(1, timeout=RUN_MS)
    expect(page.locator("#plan-verdict")).to_have_text("passed", timeout=RUN_MS)
    expect(page.locator("#plan-instance-state")).to_contain_text("instance: COMPLETED")
    expect(page.locator("#state-Rejected .node-note")).to_contain_text("CURRENT STATE")
    expect(page.locator("#outcome-InReview")).to_contain_text(
        "pin InReview:before_commit:kill: fired"
    )

    page.goto(f"/definitions/{name}/versions/1/plans/coverage")
    cell = page.locator("#coverage-InReview td[data-cell='before_commit:kill']")
    expect(cell).to_have_class("cell cell-passed")
    expect(page.locator("#state-InReview")).to_have_class("node kind-state timer-state heat heat-1")
