"""A bulk cancel in the browser: filter the instances, preview, confirm, read results.

The instances run a target no worker runs, so they wait at their first activity while
the test looks at them; one is terminated first, so the preview has one to refuse.
"""

from __future__ import annotations

import uuid
from typing import Any

from playwright.sync_api import Page, expect

from engine.decide.operator_actions import Action
from studio.roles import Role
from tests.browser.conftest import sign_in
from tests.studio.live import LiveStudio

ACTIVITY = {
    "kind": "activity",
    "timeout": "30s",
    "input_limit": 1024,
    "result_limit": 1024,
    "retry": {"max_attempts": 3, "initial_delay": "1s", "max_delay": "1m"},
}


def waiting_document(name: str, version: str = "1") -> dict[str, Any]:
    """A definition whose first activity no worker runs."""
    steps = [{"name": "hold", "target": "bulkui.nobody", **ACTIVITY}]
    return {"name": name, "version": version, "mode": "orchestration", "steps": steps}


def waiting_instances(studio: LiveStudio, team: str, count: int) -> tuple[str, list[str]]:
    """A fresh definition whose first activity no worker runs, and ``count`` instances."""
    name = f"bulkui.{uuid.uuid4().hex[:6]}"
    studio.publish(team, waiting_document(name))
    return name, [studio.start(team, name, f"{name}-{n}") for n in range(count)]


def test_bulk_cancel_with_a_preview_a_reason_and_kept_results(
    page: Page, studio: LiveStudio
) -> None:
    team = studio.team("bulkui")
    name, ids = waiting_instances(studio, team, 3)
    ended = ids[2]
    studio.command(ended, Action.TERMINATE)
    sign_in(page, studio.user(team, Role.OPERATOR))

    page.goto("/instances?view=all")
    page.get_by_label("Definition", exact=True).select_option(name)
    page.get_by_role("button", name="Filter", exact=True).click()
    expect(page.locator("#instances-table tbody tr")).to_have_count(3)
    page.locator("#bulk-action").select_option("cancel")
    page.get_by_role("button", name="Preview for all matching the filters").click()

    page.wait_for_url("**/instances/bulk?*")
    expect(page.locator("#bulk-applies")).to_have_text("2")
    expect(page.locator("#bulk-refused")).to_have_text("1")
    expect(page.locator("#bulk-refusals")).to_contain_text(ended)
    expect(page.locator(f"#bulk-instances tr[data-instance='{ended}'] .verdict")).to_have_text(
        "refused"
    )
    expect(page.locator("#bulk-versions")).to_contain_text(f"{name}@1")
    expect(page.locator("#bulk-selection")).to_contain_text("at most 100 instances per request")

    page.get_by_label("Reason").fill("incident 9: the supplier is down")
    page.locator("#bulk-confirm-button").click()
    page.wait_for_url("**/instances/bulk/*")
    expect(page.locator("#bulk-done")).to_have_text("2")
    expect(page.locator("#bulk-refused")).to_have_text("1")
    expect(page.locator("#bulk-reason-shown")).to_have_text("incident 9: the supplier is down")
    for instance_id in ids[:2]:
        row = page.locator(f"#bulk-results tr[data-instance='{instance_id}']")
        expect(row.locator(".outcome")).to_have_text("done")
    results_url = page.url

    page.locator(f"#bulk-results tr[data-instance='{ids[0]}'] a").click()
    expect(page.locator("#audit-table")).to_contain_text("incident 9: the supplier is down")
    page.goto(f"/instances?view=all&definition={name}")
    page.locator("#recent-bulks a").first.click()
    expect(page).to_have_url(results_url)


def test_bulk_pause_of_checked_instances(page: Page, studio: LiveStudio) -> None:
    team = studio.team("bulkpick")
    name, ids = waiting_instances(studio, team, 3)
    sign_in(page, studio.user(team, Role.OPERATOR))
    page.goto(f"/instances?definition={name}")
    for instance_id in ids[:2]:
        page.get_by_label(f"Choose {instance_id}").check()
    page.locator("#bulk-action").select_option("pause")
    page.get_by_role("button", name="Preview for checked").click()
    expect(page.locator("#bulk-applies")).to_have_text("2")
    expect(page.locator("#bulk-instances tbody tr")).to_have_count(2)
    page.get_by_label("Reason").fill("hold two")
    page.locator("#bulk-confirm-button").click()
    page.wait_for_url("**/instances/bulk/*")
    expect(page.locator("#bulk-done")).to_have_text("2")
