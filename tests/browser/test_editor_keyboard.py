"""The editor by keyboard: after each action focus lands where the work continues (the
insert menu's first choice, the new step's first field, the chosen outline item),
Escape closes the insert menu and the chosen step, and the arrow keys move through the
outline."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.browser.conftest import open_new_draft, settled
from tests.studio.live import LiveStudio, definition


def open_draft(page: Page, studio: LiveStudio, name: str) -> None:
    open_new_draft(page, studio, "keyboard", definition(name))


def test_focus_follows_the_work_and_escape_closes_the_menu(page: Page, studio: LiveStudio) -> None:
    open_draft(page, studio, "keys.flow")
    inspector = page.locator("#inspector")
    menu = inspector.get_by_role("heading", name="Insert a step")

    page.get_by_role("link", name="Insert a step at the end", exact=True).focus()
    page.keyboard.press("Enter")
    expect(menu).to_be_visible()
    expect(inspector.get_by_role("button", name="Activity", exact=True)).to_be_focused()
    settled(page)
    page.keyboard.press("Escape")
    expect(menu).to_have_count(0)
    expect(page.locator("#draft-canvas")).to_be_focused()

    settled(page)
    page.get_by_role("link", name="Insert a step at the end", exact=True).focus()
    page.keyboard.press("Enter")
    expect(inspector.get_by_role("button", name="Activity", exact=True)).to_be_focused()
    settled(page)
    page.keyboard.press("Tab")  # the second choice
    page.keyboard.press("Enter")
    name = page.locator("#step-form #field-name")
    expect(name).to_have_value("signal_1")
    expect(name).to_be_focused()


def test_arrow_keys_move_through_the_outline(page: Page, studio: LiveStudio) -> None:
    open_draft(page, studio, "arrows.flow")
    items = page.locator(".outline-pane .outline-item")
    items.first.focus()
    page.keyboard.press("Enter")
    expect(page.locator("#selected-step")).to_have_text("reserve")
    expect(items.first).to_be_focused()  # the chosen item keeps the focus
    settled(page)
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    expect(items.nth(2)).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("#selected-step")).to_have_text("fraud")
    expect(items.nth(2)).to_be_focused()
    settled(page)
    page.keyboard.press("End")
    expect(items.last).to_be_focused()
    page.keyboard.press("ArrowUp")
    expect(items.nth(4)).to_be_focused()
    page.keyboard.press("Home")
    expect(items.first).to_be_focused()


def test_escape_closes_the_chosen_step_but_not_from_its_fields(
    page: Page, studio: LiveStudio
) -> None:
    open_draft(page, studio, "close.flow")
    items = page.locator(".outline-pane .outline-item")
    items.first.focus()
    page.keyboard.press("Enter")
    chosen = page.locator("#selected-step")
    expect(chosen).to_have_text("reserve")
    settled(page)
    page.locator("#step-form #field-name").focus()
    page.keyboard.press("Escape")  # in a field, Escape is the field's
    expect(chosen).to_have_text("reserve")
    items.first.focus()
    page.keyboard.press("Escape")
    expect(chosen).to_have_count(0)
    expect(page.locator("#draft-canvas")).to_be_focused()


def test_a_move_keeps_the_focus_on_its_button(page: Page, studio: LiveStudio) -> None:
    """Enter on Move up, then Enter again: the step moves twice (the redrawn editor
    gave the focus back to the button, not to the page)."""
    open_draft(page, studio, "move.flow")
    items = page.locator(".outline-pane .outline-item")
    items.last.focus()
    page.keyboard.press("Enter")
    expect(page.locator("#selected-step")).to_have_text("cool_off")
    settled(page)
    up = page.locator("#inspector").get_by_role("button", name="Move up")
    up.focus()
    page.keyboard.press("Enter")
    expect(items.first).not_to_contain_text("cool_off")
    expect(items.last).not_to_contain_text("cool_off")
    expect(up).to_be_focused()
    settled(page)
    page.keyboard.press("Enter")
    expect(items.first).to_contain_text("cool_off")


def test_a_branch_move_keeps_the_focus_with_the_branch(page: Page, studio: LiveStudio) -> None:
    """↑ on the second branch makes it the first, where ↑ is disabled: the focus went to
    the page; it now stays with the branch, on its ↓, so Enter moves it back."""
    open_draft(page, studio, "branch.flow")
    page.locator(".outline-pane .outline-item", has_text="checks").first.focus()
    page.keyboard.press("Enter")
    expect(page.locator("#selected-step")).to_have_text("checks")
    settled(page)
    branches = page.locator("#inspector .branch-list li")
    expect(branches.first).to_contain_text("fraud")
    page.locator("#branch-stock-up").focus()
    page.keyboard.press("Enter")
    expect(branches.first).to_contain_text("stock")
    expect(page.locator("#branch-stock-down")).to_be_focused()
    settled(page)
    page.keyboard.press("Enter")
    expect(branches.first).to_contain_text("fraud")
    expect(page.locator("#branch-stock-up")).to_be_focused()
