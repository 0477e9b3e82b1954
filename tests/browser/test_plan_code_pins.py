"""A drill plan on a code-first workflow in the browser: click a step on the published
code's outline, pin a fault on its second call, see the marker on the node, name the
app and save, read the command that runs the export, then open the heatmap."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from studio.roles import Role
from tests.browser.conftest import settled, sign_in
from tests.studio import plan_code_app
from tests.studio.live import LiveStudio

APP = "tests.studio.plan_code_app:app"


def test_pin_a_later_call_on_the_outline_save_and_see_how_to_run_it(
    page: Page, studio: LiveStudio
) -> None:
    team = studio.team("codepins")
    studio.publish(team, plan_code_app.app.workflows[0].document)
    sign_in(page, studio.user(team, Role.OPERATOR))
    page.goto(f"/definitions/{plan_code_app.NAME}/versions/1")
    page.locator("#drill-plans-link").click()
    settled(page)
    page.locator("#code-2 a").click()  # the first node that calls charge
    settled(page)
    expect(page.locator("#picked-step")).to_have_text("charge")
    page.get_by_label("Call number").fill("2")
    page.get_by_label("Boundary", exact=True).select_option("before_commit")
    page.get_by_label("Fault", exact=True).select_option("kill")
    page.get_by_role("button", name="Pin fault").click()
    settled(page)
    pin = "charge.2:before_commit:kill"
    expect(page.locator(f"#code-2 .pin-marker[data-pin='{pin}']")).to_have_count(1)
    expect(page.locator(f"#code-3 .pin-marker[data-pin='{pin}']")).to_have_count(1)

    page.get_by_label("App (MODULE:APP)").fill(APP)
    page.get_by_label("Input (JSON)").fill('{"sku": "mug"}')
    page.get_by_label("Save as").fill("second charge")
    page.get_by_role("button", name="Save plan").click()
    expect(page.locator("#plan-notice")).to_have_text("Saved second charge v1.")
    row = page.locator("tr[data-plan='second charge']")
    expect(row.get_by_role("button", name="Run")).to_have_count(0)
    expect(row).to_contain_text("wayline drill run --plan 'second charge.v1.json'")

    page.get_by_role("link", name="Coverage heatmap").click()
    expect(page.locator("#coverage-charge\\.2 td[data-cell='before_commit:kill']")).to_have_class(
        "cell cell-planned"
    )
    expect(page.locator("#code-2")).to_contain_text("0 of")
