"""A drill plan in the browser, as an operator makes one: click a step on a published
version's graph, pin a fault on it, save the plan, run it, watch the marker fire and
read the verdict on the node, then open the coverage heatmap."""

from __future__ import annotations

import re
import uuid

from playwright.sync_api import Page, expect

from studio.roles import Role
from tests.browser.conftest import sign_in
from tests.browser.plan_pins import RUN_MS, pin_on_a_node
from tests.studio.live import LiveStudio
from tests.studio.plan_workspace import plans_of
from tests.studio.test_plan_api import api, payments, plan, run_under_way


def test_pin_save_run_and_see_the_verdict_on_the_node(page: Page, studio: LiveStudio) -> None:
    name = f"pay.{uuid.uuid4().hex[:6]}"
    pin = "charge:after_handler:kill"
    marker = pin_on_a_node(page, studio, "pins", payments(name), "step-charge", pin)
    expect(page.locator("#plan-pins")).to_contain_text("charge:after_handler:kill")
    _stubs_fit_their_pane(page)

    page.get_by_label("Save as").fill("in doubt")
    page.get_by_role("button", name="Save plan").click()
    expect(page.locator("#plan-notice")).to_have_text("Saved in doubt v1.")
    expect(marker).to_have_count(1)  # the saved plan shows its pin again

    page.locator("tr[data-plan='in doubt']").get_by_role("button", name="Run").click()
    fired = page.locator("#step-charge .pin-marker.pin-fired")
    expect(fired).to_have_count(1, timeout=RUN_MS)
    expect(page.locator("#plan-verdict")).to_have_text("passed", timeout=RUN_MS)
    expect(page.locator("#step-charge .node-note")).to_contain_text("UNKNOWN (in doubt)")
    expect(page.locator("#outcome-charge")).to_contain_text(
        "charge: UNKNOWN (in doubt), waiting for an operator"
    )
    expect(page.locator("#outcome-charge")).to_contain_text("pin charge:after_handler:kill: fired")

    expect(page.locator("#plan-run")).to_have_attribute("data-status", "finished")  # recorded
    coverage = page.get_by_role("link", name="Coverage heatmap").get_attribute("href")
    page.locator("#drilled-instance").click()  # its history, captured before the drop
    expect(page.get_by_role("heading", level=1)).to_have_text("Drill instance plan-1")
    expect(page.locator("tr", has_text="attempt_unknown")).to_contain_text("charge")

    page.goto(str(coverage))
    cell = page.locator("#coverage-charge td[data-cell='after_handler:kill']")
    expect(cell).to_have_class("cell cell-passed")
    expect(page.locator("#coverage-reserve td[data-cell='after_handler:kill']")).to_have_class(
        "cell cell-none"
    )
    expect(page.locator("#step-charge")).to_have_class("node kind-activity heat heat-1")


def _stubs_fit_their_pane(page: Page) -> None:
    """At desktop width every column of "How activities behave" is inside the side
    pane (its last column, "Ignores keys", was cut off), and a result has room to read."""
    pane = page.locator(".plan-pane").first.bounding_box()
    table = page.locator("table.plan-stubs").bounding_box()
    result = page.get_by_label("charge result").bounding_box()
    assert pane and table and result
    assert table["x"] + table["width"] <= pane["x"] + pane["width"]
    assert result["width"] >= 60


def test_a_run_while_another_runs_says_why_above_the_plans(page: Page, studio: LiveStudio) -> None:
    """Run clicked while another drill job runs: the plans page again (not an error page),
    the reason above it, the job under way linked, and the address the plan's own, so a
    reload shows the plan rather than posting the Run again."""
    team = studio.team("busyrun")
    url = plans_of(studio.publish_new(team, "pay", payments))
    operator = studio.user(team, Role.OPERATOR)
    client = api(studio.client(operator))
    client.post(f"/api{url}", json={"document": plan("second", "charge:after_handler:kill")})
    sign_in(page, operator)
    page.goto(url)
    with run_under_way(client, f"/api{url}"):
        page.locator("tr[data-plan='second']").get_by_role("button", name="Run").click()
        refused = page.locator("#run-error")
        expect(refused).to_contain_text("second v1 not started: a drill is running")
        expect(page.locator("#run-under-way")).to_be_visible()
    expect(page).to_have_url(re.compile(r"/plans\?plan=second&v=1$"))
    expect(page.locator("#plan-pins")).to_contain_text("charge:after_handler:kill")
