"""No edit is lost while another is saving: the editor says it is saving, queues an edit
made meanwhile and applies it on the fresh revision, and keeps what is being typed."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from playwright.sync_api import Page, Route, expect

from tests.browser.conftest import open_new_draft, settled
from tests.studio.live import LiveStudio, definition

PUMP_SECONDS = 20.0
PUMP_MS = 20


def save_held(
    page: Page, studio: LiveStudio, name: str, value: str, field: str = "timeout"
) -> list[Route]:
    """Open a draft of ``name`` at its first step, change one of its fields (the timeout
    unless told) and hold that save in the network until the test lets it go
    (``held[0]``)."""
    draft_id = open_new_draft(page, studio, "saving", definition(name))
    page.goto(f"/drafts/{draft_id}?step=reserve")
    settled(page)
    held: list[Route] = []

    def route(route: Route, _: Any) -> None:
        if held:
            route.continue_()
        else:
            held.append(route)

    page.route("**/update", route)
    box = page.locator(f"#step-form #field-{field}")
    box.fill(value)
    box.press("Tab")
    expect(page.locator("#save-state")).to_have_text("Saving…")
    # "Saving…" shows when the request starts; the route handler runs once Playwright
    # dispatches the intercepted request, which happens only while the test waits on it.
    pump_until(page, lambda: len(held) == 1, "the save to reach the network")
    return held


def pump_until(page: Page, condition: Callable[[], bool], what: str) -> None:
    """Let Playwright dispatch its events (route handlers run then) until ``condition``
    holds; the deadline only bounds how long a failure takes."""
    deadline = time.monotonic() + PUMP_SECONDS
    while not condition():
        assert time.monotonic() < deadline, f"{what} did not happen within {PUMP_SECONDS} s"
        page.wait_for_timeout(PUMP_MS)


def assert_saved_then_reload(page: Page, step: str, target: str) -> None:
    """Every held and queued save has landed: ``step``'s node shows ``target``, nothing
    is saving and no error shows. Then reload, so the fields read what was stored."""
    expect(page.locator(f"#step-{step}")).to_contain_text(target)
    expect(page.locator("#save-state")).to_have_text("")
    expect(page.locator("#editor-error")).to_have_count(0)
    page.reload()


def test_an_edit_made_while_saving_is_queued_and_applied(page: Page, studio: LiveStudio) -> None:
    held = save_held(page, studio, "queue.flow", "45s")
    target = page.locator("#step-form #field-target")
    target.fill("inventory.hold")
    target.press("Tab")  # made on the revision being replaced: queued, not dropped
    expect(page.locator("#save-state")).to_have_text("Saving…")
    held[0].continue_()

    assert_saved_then_reload(page, "reserve", "inventory.hold")
    expect(page.locator("#field-timeout")).to_have_value("45s")
    expect(page.locator("#field-target")).to_have_value("inventory.hold")


def test_typing_survives_the_answer_of_an_earlier_save(page: Page, studio: LiveStudio) -> None:
    held = save_held(page, studio, "typing.flow", "50s")
    timeout = page.locator("#step-form #field-timeout")
    target = page.locator("#step-form #field-target")
    target.fill("inventory.keep")  # still typing when the first save answers
    held[0].continue_()
    expect(page.locator("#save-state")).to_have_text("")
    expect(timeout).to_have_value("50s")
    expect(target).to_have_value("inventory.keep")
    expect(target).to_be_focused()
    settled(page)
    target.press("Tab")
    expect(page.locator("#step-reserve")).to_contain_text("inventory.keep")
    page.reload()
    expect(page.locator("#field-timeout")).to_have_value("50s")
    expect(page.locator("#field-target")).to_have_value("inventory.keep")


def test_an_edit_queued_behind_a_rename_reaches_the_renamed_step(
    page: Page, studio: LiveStudio
) -> None:
    held = save_held(page, studio, "rename.flow", "hold_stock", field="name")
    target = page.locator("#step-form #field-target")
    target.fill("inventory.hold")
    target.press("Tab")  # names the step by its old name: queued behind the rename
    held[0].continue_()

    assert_saved_then_reload(page, "hold_stock", "inventory.hold")
    expect(page.locator("#field-name")).to_have_value("hold_stock")
    expect(page.locator("#field-target")).to_have_value("inventory.hold")


def test_a_field_tabbed_into_stays_selected_across_the_answer(
    page: Page, studio: LiveStudio
) -> None:
    """Tab selects the next field's value, so what is typed replaces it; the answer of
    the save that Tab set off redraws that field, and typing after it still replaces
    the value (it once kept the old one and added the typing to it: "30s2m")."""
    held = save_held(page, studio, "select.flow", "inventory.hold", field="target")
    timeout = page.locator("#step-form #field-timeout")
    expect(timeout).to_be_focused()
    held[0].continue_()
    expect(page.locator("#step-reserve")).to_contain_text("inventory.hold")
    expect(page.locator("#save-state")).to_have_text("")
    settled(page)
    page.keyboard.type("2m")
    expect(timeout).to_have_value("2m")
