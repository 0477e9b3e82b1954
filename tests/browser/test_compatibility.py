"""Publishing with a compatibility report, in the browser (issue 21): a version's page
shows its verdict on each instance of another version that was running, and the
"only if every running instance is compatible" box refuses a version one cannot take."""

from __future__ import annotations

import json
import uuid
from typing import Any

from playwright.sync_api import Page, expect

from engine.api.client import Client
from studio.roles import Role
from tests.browser.conftest import settled, sign_in
from tests.studio.live import LiveStudio

UNRUN_TARGET = "notifications.late"
"""A target the studio's worker does not run, so the charge stays in flight."""


def activity(name: str) -> dict[str, Any]:
    retry = {"max_attempts": 3, "initial_delay": "1s", "max_delay": "1m"}
    return {
        "name": name,
        "kind": "activity",
        "target": UNRUN_TARGET,
        "timeout": "30s",
        "input_limit": 1024,
        "result_limit": 1024,
        "retry": retry,
    }


def document(name: str, version: str, *steps: str) -> dict[str, Any]:
    return {
        "name": name,
        "version": version,
        "mode": "orchestration",
        "steps": [activity(s) for s in steps],
    }


def import_and_publish(page: Page, doc: dict[str, Any], require_compatible: bool) -> None:
    page.goto("/definitions/import")
    page.get_by_label("or paste it here").fill(json.dumps(doc))
    page.get_by_role("button", name="Preview").click()
    expect(page.locator("#import-preview")).to_be_visible()
    settled(page)
    if require_compatible:
        page.get_by_label("Only if every running instance is compatible").check()
    page.get_by_role("button", name="Publish").click()


def running_v1(page: Page, studio: LiveStudio) -> tuple[str, str]:
    """A name whose v1 has an instance with its charge in flight; signed in as author."""
    team = studio.team("gate")
    name = f"gated.{uuid.uuid4().hex[:6]}"
    studio.publish(team, document(name, "1", "charge"))
    instance_id = studio.start(team, name, f"order-{uuid.uuid4().hex[:6]}")
    sign_in(page, studio.user(team, Role.AUTHOR))
    return name, instance_id


def test_the_version_page_shows_the_report_and_the_box_refuses_an_incompatible_version(
    page: Page, studio: LiveStudio
) -> None:
    name, instance_id = running_v1(page, studio)
    import_and_publish(page, document(name, "2", "charge", "ship"), require_compatible=True)
    page.wait_for_url(f"**/definitions/{name}/versions/2?published=new")
    expect(page.locator("#compatibility-summary")).to_contain_text(
        "1 running checked, 1 compatible, 0 incompatible"
    )
    row = page.locator(f'#compatibility-verdicts tr[data-instance="{instance_id}"]')
    expect(row).to_contain_text("v1")
    expect(row).to_contain_text("compatible")

    import_and_publish(page, document(name, "3", "ship"), require_compatible=True)
    expect(page.locator("#import-error")).to_contain_text(
        f"{instance_id}: step charge is in flight and was removed"
    )
    missing = page.goto(f"/definitions/{name}/versions/3")
    assert missing is not None and missing.status == 404, "nothing was published"

    import_and_publish(page, document(name, "3", "ship"), require_compatible=False)
    page.wait_for_url(f"**/definitions/{name}/versions/3?published=new")
    expect(page.locator("#compatibility-summary")).to_contain_text("0 compatible, 1 incompatible")
    refused = page.locator(f'#compatibility-verdicts tr[data-instance="{instance_id}"]')
    expect(refused.locator(".verdict-reason")).to_have_text(
        "step charge is in flight and was removed"
    )


PAID = {"name": "paid", "kind": "signal", "target": "on.paid", "timeout": "1h", "input_limit": 100}


def test_an_operator_declares_an_edge_previews_and_migrates_compatible_instances(
    page: Page, studio: LiveStudio
) -> None:
    team = studio.team("migrate")
    name = f"moving.{uuid.uuid4().hex[:6]}"
    v1 = {**document(name, "1", "charge"), "steps": [PAID, activity("charge")]}
    old = studio.publish_judged(team, v1)
    waiting, moves_on, charging = (f"{n}-{uuid.uuid4().hex[:6]}" for n in "abc")
    for instance_id in (waiting, moves_on, charging):
        studio.start(team, name, instance_id)
    pay = Client.signal
    studio.run(lambda store: pay(Client(store), charging, "paid", "pay-c", {"by": "card"}))
    new = studio.publish_judged(team, {**v1, "version": "2", "steps": [PAID, activity("ship")]})
    operator = studio.user(team, Role.OPERATOR)
    sign_in(page, operator)
    page.goto(f"/definitions/{name}/versions/2")
    expect(page.locator("#compatibility-summary")).to_contain_text("2 compatible, 1 incompatible")
    expect(page.get_by_label(f"Migrate {waiting}")).to_have_count(0)  # no edge yet

    page.get_by_label("Why may instances of v1 move to v2?").fill("v2 ships instead of charging")
    page.get_by_role("button", name="Declare edge v1 → v2").click()
    expect(page.locator("#edge-1")).to_contain_text("v2 ships instead of charging")
    expect(page.get_by_label(f"Migrate {charging}")).to_have_count(0)  # incompatible
    page.get_by_label(f"Migrate {waiting}").check()
    page.get_by_label(f"Migrate {moves_on}").check()
    page.get_by_role("button", name="Preview migration").click()
    preview = page.locator("#migration-preview")
    expect(preview.locator(f'tr[data-instance="{waiting}"]')).to_contain_text(
        "paused, migrated, resumed"
    )
    expect(page.locator("#preview-summary")).to_contain_text("2 of 2 would be migrated")

    # Between the preview and the confirmation, one instance is paid: its charge is now
    # in flight, which v2 does not have. It is judged again and refused.
    studio.run(lambda store: pay(Client(store), moves_on, "paid", "pay-b", {"by": "card"}))
    page.get_by_label("Reason (recorded in each instance's audit trail)").fill("ship in v2")
    page.get_by_role("button", name="Migrate 2 instances").click()
    expect(page.locator("#migration-summary")).to_have_text("1 migrated, 1 refused.")
    results = page.locator("#migration-results")
    expect(results.locator(f'tr[data-instance="{waiting}"]')).to_contain_text("migrated")
    expect(results.locator(f'tr[data-instance="{moves_on}"] .refusal')).to_have_text(
        f"step charge is in flight and was removed; it was not migrated to {name}@2"
    )  # its row names it: the reason does not again

    results.get_by_role("link", name=waiting).click()
    audit = page.locator("#audit-table")
    how = f"ship in v2 ({name}@1 {old[:12]}… -> {name}@2 {new[:12]}…)"
    expect(audit.locator("td.reason")).to_have_text([how, how, how])
    expect(audit.locator("tr[data-command] td:nth-child(3)")).to_have_text(
        ["resume", "migrate", "pause"]  # newest first
    )
    expect(audit.locator("tr[data-command] td:nth-child(2)")).to_have_text([operator] * 3)
    assert studio.run(lambda store: Client(store).inspect(moves_on)).definition.version == "1"
