"""The JSON view of a draft, branch editing, and a version's deprecation, in the browser."""

from __future__ import annotations

import json
import re
import uuid

from playwright.sync_api import Page, expect

from studio.definitions import drafts
from studio.roles import Role
from tests.browser.conftest import settled, sign_in
from tests.studio.live import LiveStudio, definition


def open_draft(page: Page, studio: LiveStudio, name: str) -> str:
    team = studio.team("drafts")
    draft = studio.run(lambda store: drafts.create_draft(store, team, definition(name), "", "x"))
    sign_in(page, studio.user(team, Role.AUTHOR))
    page.goto(f"/drafts/{draft.draft_id}")
    return team


def test_the_json_view_edits_the_same_draft_as_the_graph(page: Page, studio: LiveStudio) -> None:
    open_draft(page, studio, "json.flow")
    page.get_by_role("link", name="JSON", exact=True).click()
    settled(page)
    box = page.get_by_label("The draft as JSON: edit and apply; the graph follows")
    document = json.loads(box.input_value())
    assert document["steps"][5] == {"name": "cool_off", "kind": "timer", "timeout": "5m"}

    box.fill("{ not json")
    page.get_by_role("button", name="Apply JSON").click()
    expect(page.locator("#json-error")).to_contain_text("not valid JSON")
    expect(box).to_have_value("{ not json")  # what was typed is kept to fix
    settled(page)

    document["steps"][5]["timeout"] = "2h"
    box.fill(json.dumps(document))
    page.get_by_role("button", name="Apply JSON").click()
    expect(page.locator("#json-error")).to_have_count(0)
    settled(page)
    page.get_by_role("link", name="Graph", exact=True).click()
    expect(page.locator("#step-cool_off")).to_contain_text("wait 2h")


def test_branches_are_added_reordered_and_removed(page: Page, studio: LiveStudio) -> None:
    open_draft(page, studio, "branchy.flow")
    page.get_by_role("link", name="Add a branch to checks").click()
    settled(page)
    page.get_by_role("button", name="Activity branch").click()
    expect(page.locator("#selected-step")).to_have_text("checks_branch_1")
    expect(page.locator("#step-checks")).to_contain_text("all of 3 branches")
    expect(page.locator("#step-checks_done")).to_contain_text("waits for 3")

    settled(page)
    page.locator("#step-checks a").click()
    branches = page.locator(".branch-list li > a")
    expect(branches).to_have_text(["fraud", "stock", "checks_branch_1"])
    settled(page)
    page.get_by_role("button", name="Move checks_branch_1 up").click()
    expect(branches).to_have_text(["fraud", "checks_branch_1", "stock"])
    settled(page)
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete fraud").click()
    expect(branches).to_have_text(["checks_branch_1", "stock"])
    expect(page.locator("#step-fraud")).to_have_count(0)
    expect(page.locator("#step-checks_done")).to_contain_text("waits for 2")


def test_deprecating_a_version_keeps_it_listed(page: Page, studio: LiveStudio) -> None:
    team = studio.team("deprecate")
    name = f"old.{uuid.uuid4().hex[:6]}"
    studio.publish(team, definition(name))
    studio.publish(team, definition(name, "2", timeout="45s"))
    sign_in(page, studio.user(team, Role.AUTHOR))
    page.goto(f"/definitions/{name}")
    row = page.locator("#versions-table tr", has_text=re.compile(r"^\s*1\b"))
    page.once("dialog", lambda dialog: dialog.accept())
    row.get_by_role("button", name="Deprecate").click()
    expect(row.locator(".pill")).to_have_text("deprecated")
    expect(page.locator("#diff-summary")).to_contain_text("0 added, 0 removed, 3 changed")


def test_two_drafts_of_one_name_and_version_are_told_apart(page: Page, studio: LiveStudio) -> None:
    team = studio.team("twins")
    name = f"twin.{uuid.uuid4().hex[:6]}"
    made = [
        studio.run(lambda store, w=who: drafts.create_draft(store, team, definition(name), "", w))
        for who in ("ada", "bob")
    ]
    sign_in(page, studio.user(team, Role.AUTHOR))
    rows = page.locator("#drafts-table tbody tr", has_text=f"{name}@1")
    expect(rows).to_have_count(2)
    for draft in made:
        tell = rows.filter(has=page.locator(f'a[href="/drafts/{draft.draft_id}"]'))
        expect(tell.locator(".draft-tell")).to_contain_text(f"draft {draft.draft_id[:8]}, started ")
        expect(tell.locator(".draft-tell")).to_contain_text(f"by {draft.created_by}")
