"""The signal and approval steps' fields say what to enter (issue 24): the name senders
use or what an approver is asked, with an example and the allowed characters."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.browser.conftest import open_new_draft, settled
from tests.studio.live import LiveStudio

DOCUMENT = {
    "name": "waits.fields",
    "version": "1",
    "steps": [
        {"name": "paid", "kind": "signal", "target": "payment.confirmed", "timeout": "1h"},
        {"name": "ok", "kind": "approval", "target": "order.refund", "timeout": "1d"},
    ],
}


def test_signal_and_approval_fields_say_what_to_enter(page: Page, studio: LiveStudio) -> None:
    open_new_draft(page, studio, "waits", DOCUMENT)
    outline = page.get_by_role("navigation", name="Steps outline")
    for step, label, example in (
        ("paid", "Signal", "e.g. payment.confirmed"),
        ("ok", "Approval", "e.g. order.refund"),
    ):
        outline.get_by_role("link", name=re.compile(rf"^{step}\b")).click()
        settled(page)
        field = page.get_by_label(label, exact=True)
        expect(field).to_have_accessible_description(re.compile(re.escape(example)))
        expect(field).to_have_accessible_description(re.compile("letters, digits"))


def test_a_new_wait_step_says_what_to_enter_beside_what_is_missing(
    page: Page, studio: LiveStudio
) -> None:
    open_new_draft(page, studio, "waits", {**DOCUMENT, "name": "waits.new"})
    for kind, example in (("Signal", "e.g. payment.confirmed"), ("Approval", "e.g. order.refund")):
        page.get_by_role("link", name="Insert a step at the end", exact=True).click()
        settled(page)
        page.locator("#inspector button.kind-button", has_text=kind).click()
        settled(page)
        field = page.get_by_label(kind, exact=True)
        expect(field).to_be_empty()
        expect(field).to_have_accessible_description(re.compile("is required"))
        expect(field).to_have_accessible_description(re.compile(re.escape(example)))
