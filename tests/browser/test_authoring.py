"""Authoring a definition from scratch, only through the UI, to its second version.

A person signs in, creates a definition, inserts an activity, a parallel of two
activities with its join, a timer and a signal by clicking the graph, sees a validation
error on the right node and fixes it, publishes and sees the fingerprint, makes
version 2 from version 1 and reads the diff, then exports version 2 and imports it.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

from playwright.sync_api import Page, expect

from studio.roles import Role
from tests.browser.conftest import settled, sign_in
from tests.studio.live import LiveStudio

FINGERPRINT = re.compile(r"^[0-9a-f]{64}$")


def insert(page: Page, where: str, kind: str) -> None:
    """Click the + on a connection of the graph, then choose the kind of step."""
    settled(page)
    page.get_by_role("link", name=f"Insert a step {where}", exact=True).click()
    inspector = page.locator("#inspector")
    expect(inspector.get_by_role("heading", name="Insert a step")).to_be_visible()
    settled(page)
    inspector.get_by_role("button", name=kind, exact=True).click()
    expect(page.locator("#step-form")).to_be_visible()


def select(page: Page, step: str) -> None:
    settled(page)
    page.locator(f"#step-{step} a").click()
    expect(page.locator("#selected-step")).to_have_text(step)


ARM_SAVED = """() => {
    window.__saved = false;
    const saved = (event) => {
        if (!event.detail.pathInfo.requestPath.endsWith("/update")) return;
        document.removeEventListener("htmx:afterSettle", saved);
        window.__saved = true;
    };
    document.addEventListener("htmx:afterSettle", saved);
}"""


def set_fields(page: Page, **values: str) -> None:
    """Type into the selected step's form; each change is saved and re-validated.

    Each field is typed only once htmx has wired the form (a change before that would
    save nothing) and waits until htmx has settled the workspace its save returned (an
    earlier swap settling late does not count), so each step of the test sees its own
    save (a change made while one is in flight waits its turn: test_editor_saving).
    """
    for field, value in values.items():
        settled(page)
        page.evaluate(ARM_SAVED)
        box = page.locator(f"#step-form #field-{field.replace('__', '-')}")
        box.fill(value)
        box.press("Tab")
        page.wait_for_function("() => window.__saved")
        expect(box).to_have_value(value)  # the locator now finds the swapped-in form


def test_author_publish_version_two_diff_export_and_import(page: Page, studio: LiveStudio) -> None:
    team = studio.team("authors")
    sign_in(page, studio.user(team, Role.AUTHOR))
    name = f"orders.express-{uuid.uuid4().hex[:6]}"

    # A new definition starts as an empty draft, and the editor invites the first step.
    expect(page.get_by_text("Nothing published in this team yet")).to_be_visible()
    if not page.get_by_label("Name").is_visible():  # open by default in an empty team
        page.get_by_text("New definition").click()
    page.get_by_label("Name").fill(name)
    page.get_by_role("button", name="Create draft").click()
    expect(page.locator("#inspector")).to_contain_text("No steps yet")

    # An activity: inserted on the only connection, then given a name and a target.
    insert(page, "at the end", "Activity")
    expect(page.locator("#step-activity_1")).to_have_class(re.compile(r"\binvalid\b"))
    expect(page.locator("#field-target-note")).to_contain_text("is required")
    set_fields(page, name="reserve", target="inventory.reserve")
    expect(page.locator("#step-reserve")).not_to_have_class(re.compile(r"\binvalid\b"))
    expect(page.locator("#step-reserve")).to_contain_text("inventory.reserve")

    # A timer with a mistake: the error shows on the timer's node and beside its field.
    insert(page, "at the end", "Timer")
    set_fields(page, timeout="soon")
    expect(page.locator("#step-timer_1")).to_have_class(re.compile(r"\binvalid\b"))
    expect(page.locator("#step-timer_1 .badge.error")).to_have_text("1")
    expect(page.locator("#field-timeout-note")).to_contain_text("expected a duration")
    expect(page.locator("#step-reserve")).not_to_have_class(re.compile(r"\binvalid\b"))
    expect(page.locator("#publish-button")).to_be_disabled()
    set_fields(page, name="cool_off", timeout="5m")
    expect(page.locator("#step-cool_off")).not_to_have_class(re.compile(r"\binvalid\b"))

    # A parallel of two activities with its join, inserted on the edge before the timer.
    insert(page, "before cool_off", "Parallel")
    for node in ("parallel_1", "parallel_1_branch_1", "parallel_1_branch_2", "parallel_1_join"):
        expect(page.locator(f"#step-{node}")).to_be_visible()
    select(page, "parallel_1_branch_1")
    set_fields(page, name="fraud", target="fraud.check")
    select(page, "parallel_1_branch_2")
    set_fields(page, name="charge", target="payments.charge")
    expect(page.locator("#step-parallel_1_join")).to_contain_text("waits for 2")

    # A signal at the end.
    insert(page, "at the end", "Signal")
    set_fields(page, name="shipped", target="order.shipped")
    expect(page.locator("#draft-status")).to_contain_text("Valid")
    outline = page.get_by_role("navigation", name="Steps outline")
    expect(outline).to_contain_text("reserve")
    expect(outline.locator(".outline-name")).to_have_text(
        ["reserve", "parallel_1", "fraud", "charge", "parallel_1_join", "cool_off", "shipped"]
    )

    # Publish: an immutable version with its fingerprint, in full and short.
    page.get_by_role("button", name="Publish").click()
    page.wait_for_url(f"**/definitions/{name}/versions/1?published=new")
    expect(page.locator("#publish-notice")).to_contain_text("Published")
    full = page.locator("#fingerprint-full").inner_text()
    assert FINGERPRINT.match(full)
    expect(page.locator("#fingerprint-short")).to_have_text(full[:12])

    # Version 2 from version 1: a longer cool-off and a notification at the end.
    page.get_by_role("button", name="New draft from this version").click()
    expect(page.locator("#draft-version")).to_have_value("2")
    select(page, "cool_off")
    set_fields(page, timeout="10m")
    insert(page, "at the end", "Activity")
    set_fields(page, name="notify", target="notifications.send")
    page.get_by_role("button", name="Publish").click()
    page.wait_for_url(f"**/definitions/{name}/versions/2?published=new")
    assert page.locator("#fingerprint-full").inner_text() != full

    # The versions page compares 1 with 2: what was added, what changed and how.
    page.get_by_role("link", name=name).click()
    expect(page.locator("#versions-table tbody tr")).to_have_count(2)
    expect(page.locator("#diff-summary")).to_contain_text("1 added, 0 removed, 1 changed")
    expect(page.locator("#right-step-notify")).to_have_class(re.compile(r"\bdiff-added\b"))
    expect(page.locator("#left-step-cool_off")).to_have_class(re.compile(r"\bdiff-changed\b"))
    change = page.locator("#diff-table tr", has_text="timeout")
    expect(change).to_contain_text("5m")
    expect(change).to_contain_text("10m")

    # Export version 2, then import the file: validated, previewed, saved as a draft.
    page.get_by_role("link", name="2", exact=True).click()
    with page.expect_download() as download:
        page.get_by_role("link", name="Export JSON").click()
    exported = json.loads(Path(download.value.path()).read_text())
    assert exported["version"] == "2" and exported["steps"][-1]["name"] == "notify"
    page.goto("/definitions/import")
    page.get_by_label("Choose an exported file").set_input_files(download.value.path())
    page.get_by_role("button", name="Preview").click()
    expect(page.locator("#import-preview")).to_contain_text(f"Valid: {name}@2")
    expect(page.locator("#preview-step-notify")).to_be_visible()
    page.get_by_role("button", name="Publish").click()
    expect(page.locator("#publish-notice")).to_contain_text(
        "Identical content was already published"
    )
    page.goto("/definitions/import")
    page.get_by_label("or paste it here").fill(json.dumps(exported))
    page.get_by_role("button", name="Preview").click()
    page.get_by_role("button", name="Save as draft").click()
    expect(page.locator("#draft-version")).to_have_value("2")
    expect(page.locator("#step-notify")).to_be_visible()
