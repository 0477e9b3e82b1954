"""Migrate selected instances from the instances list, in the browser (issue 21): the
bulk preview says per instance whether it can move to the chosen version and why not,
an incompatible one is refused and never migrated, one that moved on after the preview
is judged again when the operator confirms, and the migrated ones name the new version."""

from __future__ import annotations

import uuid

from playwright.sync_api import Page, expect

from engine.api.client import Client
from studio.roles import Role
from tests.browser.conftest import sign_in
from tests.browser.test_bulk_cancel import waiting_document, waiting_instances
from tests.browser.test_compatibility import PAID, activity, document
from tests.studio.live import LiveStudio


def test_migrate_selected_instances_from_the_list(page: Page, studio: LiveStudio) -> None:
    team = studio.team("bulkmigrate")
    name = f"shifting.{uuid.uuid4().hex[:6]}"
    v1 = {**document(name, "1", "charge"), "steps": [PAID, activity("charge")]}
    studio.publish_judged(team, v1)
    waiting, moves_on, charging = (f"{n}-{uuid.uuid4().hex[:6]}" for n in "abc")
    for instance_id in (waiting, moves_on, charging):
        studio.start(team, name, instance_id)
    pay = Client.signal
    studio.run(lambda store: pay(Client(store), charging, "paid", "pay-c", {"by": "card"}))
    studio.publish_judged(team, {**v1, "version": "2", "steps": [PAID, activity("ship")]})
    studio.declare_migration(name, "v2 ships")
    sign_in(page, studio.user(team, Role.OPERATOR))

    page.goto(f"/instances?definition={name}")
    for instance_id in (waiting, moves_on, charging):
        page.get_by_label(f"Choose {instance_id}").check()
    page.locator("#bulk-action").select_option("migrate")
    page.get_by_label("To version").fill("2")
    page.get_by_role("button", name="Preview for checked").click()

    page.wait_for_url("**/instances/bulk?*")
    expect(page.locator("#bulk-applies")).to_have_text("2")
    expect(page.locator("#bulk-refused")).to_have_text("1")
    refused = page.locator(f"#bulk-instances tr[data-instance='{charging}']")
    expect(refused).to_contain_text("incompatible: step charge is in flight and was removed")
    moving = page.locator(f"#bulk-instances tr[data-instance='{waiting}'] .moves-to")
    expect(moving).to_contain_text(f"{name}@1")
    expect(moving).to_contain_text(f"→ {name}@2")
    expect(page.locator("#bulk-versions")).to_contain_text(f"{name}@1")
    expect(page.locator("#bulk-migrate-how")).to_contain_text("never migrated")

    # Between the preview and the confirmation one instance is paid: its charge is now
    # in flight, which v2 does not have. It is judged again and refused.
    studio.run(lambda store: pay(Client(store), moves_on, "paid", "pay-b", {"by": "card"}))
    page.get_by_label("Reason").fill("v2 ships instead of charging")
    page.locator("#bulk-confirm-button").click()
    page.wait_for_url("**/instances/bulk/*")
    expect(page.locator("#bulk-done")).to_have_text("1")
    expect(page.locator("#bulk-refused")).to_have_text("2")  # the incompatible one too
    done = page.locator(f"#bulk-results tr[data-instance='{waiting}']")
    expect(done).to_contain_text(f"migrated from {name}@1 to {name}@2")
    late = page.locator(f"#bulk-results tr[data-instance='{moves_on}']")
    expect(late.locator(".outcome")).to_have_text("refused")
    expect(late).to_contain_text("step charge is in flight and was removed")

    done.locator("a").click()
    expect(page.locator("#audit-table")).to_contain_text("v2 ships instead of charging")
    page.goto(f"/instances?view=all&definition={name}")
    expect(page.locator("#instances-table")).to_contain_text(f"{name}@2")


def test_a_refused_migration_preview_keeps_what_was_chosen_and_says_what_is_allowed(
    page: Page, studio: LiveStudio
) -> None:
    """Nothing ticked, or no version: the list again with the action, the version and the
    ticks as they were, each reason beside its field, naming the versions there are."""
    team = studio.team("bulkrefused")
    name, ids = waiting_instances(studio, team, 3)
    studio.publish(team, waiting_document(name, "2"))
    studio.declare_migration(name, "v2")
    sign_in(page, studio.user(team, Role.OPERATOR))

    page.goto(f"/instances?definition={name}")
    page.locator("#bulk-action").select_option("migrate")
    page.get_by_role("button", name="Preview for checked").click()
    chosen = page.locator("#bulk-chosen-error")
    expect(chosen).to_have_text(
        "no instance was ticked: tick 1 to 100 in the list below, or preview for all "
        "matching the filters"
    )
    version = page.get_by_label("To version")
    expect(version).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#bulk-version-error")).to_have_text(
        "choose the version to migrate to; a migration is declared from this team's "
        f"versions to 2 (from {name}@1)"
    )
    expect(page.locator("#bulk-action")).to_have_value("migrate")

    for instance_id in ids[:2]:
        page.get_by_label(f"Choose {instance_id}").check()
    page.get_by_role("button", name="Preview for checked").click()
    expect(chosen).to_have_count(0)
    expect(page.locator("#bulk-version-error")).to_contain_text(
        f"declared from the chosen instances' versions to 2 (from {name}@1)"
    )
    for instance_id, ticked in zip(ids, (True, True, False), strict=True):
        expect(page.get_by_label(f"Choose {instance_id}")).to_be_checked(checked=ticked)
    expect(page.locator("#bulk-action")).to_have_value("migrate")

    version.fill("2")
    page.get_by_role("button", name="Preview for checked").click()
    expect(page.locator("#bulk-applies")).to_have_text("2")
    expect(page.locator("#bulk-instances tbody tr")).to_have_count(2)
