"""The editor never loses or confuses work: duplicate names are refused at the field,
every element id is unique whatever the draft holds, a delete removes exactly the step
it names, and the last edits can be undone and redone."""

from __future__ import annotations

import copy
import re
from typing import Any

from playwright.sync_api import Page, expect

from tests.browser.conftest import open_new_draft, settled
from tests.studio.live import LiveStudio, definition

DUPLICATE_IDS = """() => {
    const seen = new Set(), twice = [];
    document.querySelectorAll("[id]").forEach((e) => {
        if (seen.has(e.id)) twice.push(e.id);
        seen.add(e.id);
    });
    return twice;
}"""


def open_document(page: Page, studio: LiveStudio, document: dict[str, Any]) -> str:
    return open_new_draft(page, studio, "integrity", document)


def select(page: Page, step: str) -> None:
    """Choose the first step called ``step`` in the outline."""
    settled(page)
    name = page.locator(".outline-name", has_text=re.compile(f"^{re.escape(step)}$"))
    page.locator(".outline-pane .outline-item", has=name).first.click()
    expect(page.locator("#selected-step")).to_have_text(step)
    settled(page)


def edit_field(page: Page, field: str, value: str) -> None:
    """Type into a field of the selected step's form and leave it (the change saves)."""
    box = page.locator(f"#step-form #field-{field}")
    box.fill(value)
    box.press("Tab")
    settled(page)


def outline_names(page: Page) -> Any:
    return page.get_by_role("navigation", name="Steps outline").locator(".outline-name")


def test_renaming_to_a_taken_name_is_refused_at_the_field(page: Page, studio: LiveStudio) -> None:
    open_document(page, studio, definition("rename.twice"))
    select(page, "reserve")
    edit_field(page, "name", "fraud")
    note = page.locator("#field-name-note")
    expect(note).to_contain_text("fraud")
    expect(note).to_contain_text("step 3")
    expect(page.locator("#field-name")).to_have_attribute("aria-invalid", "true")
    page.reload()
    expect(outline_names(page)).to_have_text(
        ["reserve", "checks", "fraud", "stock", "checks_done", "cool_off"]
    )


def test_duplicates_get_their_own_ids_and_deletes_act_on_what_they_name(
    page: Page, studio: LiveStudio
) -> None:
    document = definition("dup.flow")
    document["steps"][0]["name"] = "fraud"  # a top-level step shares a branch's name
    open_document(page, studio, document)
    assert page.evaluate(DUPLICATE_IDS) == []
    nodes = page.locator("g.node[data-step=fraud]")
    expect(nodes).to_have_count(2)

    # Choosing the branch (the second "fraud") shows the branch, not the first step.
    settled(page)
    nodes.nth(1).locator("a").click()
    expect(page.locator("#field-target")).to_have_value("fraud.check")
    expect(nodes.nth(1)).to_have_class(re.compile(r"\bselected\b"))
    expect(nodes.nth(0)).not_to_have_class(re.compile(r"\bselected\b"))
    assert page.evaluate(DUPLICATE_IDS) == []

    # The branch list's delete removes that branch; the top-level step stays.
    select(page, "checks")
    branches = page.locator(".branch-list li > a")
    expect(branches).to_have_text(["fraud", "stock"])
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete fraud").click()
    expect(branches).to_have_text(["stock"])
    expect(outline_names(page)).to_have_text(
        ["fraud", "checks", "stock", "checks_done", "cool_off"]
    )
    select(page, "fraud")
    expect(page.locator("#field-target")).to_have_value("inventory.reserve")


def test_the_last_edits_are_undone_and_redone(page: Page, studio: LiveStudio) -> None:
    open_document(page, studio, copy.deepcopy(definition("undo.flow")))
    cool_off = page.locator("#step-cool_off")
    select(page, "cool_off")
    for timeout in ("6m", "7m", "8m"):
        edit_field(page, "timeout", timeout)
        expect(cool_off).to_contain_text(f"wait {timeout}")
    undo, redo = page.locator("#undo-button"), page.locator("#redo-button")
    for timeout in ("7m", "6m", "5m"):
        settled(page)
        undo.click()
        expect(cool_off).to_contain_text(f"wait {timeout}")
    expect(undo).to_be_disabled()
    settled(page)
    redo.click()
    expect(cool_off).to_contain_text("wait 6m")
    settled(page)
    page.keyboard.press("Control+Shift+Z")  # the keyboard does the same, outside fields
    expect(cool_off).to_contain_text("wait 7m")
    settled(page)
    page.keyboard.press("Control+Z")
    expect(cool_off).to_contain_text("wait 6m")
    # A new edit after undoing starts a new future: nothing is left to redo.
    select(page, "cool_off")
    edit_field(page, "timeout", "9m")
    expect(cool_off).to_contain_text("wait 9m")
    expect(redo).to_be_disabled()
    page.reload()
    expect(cool_off).to_contain_text("wait 9m")


def test_every_problem_of_the_draft_is_listed_at_once(page: Page, studio: LiveStudio) -> None:
    document = definition("problems.flow")
    document["steps"][0]["timeout"] = "soon"  # a field error
    document["steps"][3]["name"] = "fraud"  # a duplicate name
    document["steps"][1]["branches"] = ["fraud", "gone"]  # a branch naming no step
    open_document(page, studio, document)
    problems = page.locator("#problems")
    expect(problems).to_contain_text("expected a duration")
    expect(problems).to_contain_text("duplicates step 2")
    expect(problems).to_contain_text("names no step: 'gone'")
    select(page, "reserve")
    expect(page.locator("#field-timeout-note")).to_contain_text("expected a duration")
    pill = page.locator("#draft-problems")  # with a step chosen, the header's pill lists them
    pill.locator("summary").click()
    expect(pill.locator(".problem-list")).to_contain_text("names no step: 'gone'")
