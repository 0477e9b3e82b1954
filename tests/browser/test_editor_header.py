"""The draft editor's header: the status pill and the publish controls stand on the row
of the name field, centred on it, at desktop width (they sat lower, each at its own
height: the checkbox above Publish, the pill between), and below it on a phone."""

from __future__ import annotations

import json

from playwright.sync_api import Browser, Page

from tests.browser.conftest import EXAMPLE, open_new_draft
from tests.browser.test_phone_width import WIDER_THAN_SCREEN, phone
from tests.studio.live import LiveStudio

CONTROLS = ("#draft-status .pill", "#require-compatible", "#publish-button", "#discard-button")
TOLERANCE_PX = 1.0
"""Sub-pixel rounding; the misalignment seen was 19 to 55 pixels."""


def centre(page: Page, selector: str) -> float:
    """The vertical centre of the element, in CSS pixels from the page's top."""
    box = page.locator(selector).bounding_box()
    assert box is not None, f"{selector} is not shown"
    return box["y"] + box["height"] / 2


def test_the_publish_controls_are_centred_on_the_name_row(page: Page, studio: LiveStudio) -> None:
    open_new_draft(page, studio, "header", json.loads(EXAMPLE.read_text()))
    name = centre(page, "#draft-name")
    off = {c: round(centre(page, c) - name, 1) for c in CONTROLS}
    assert all(abs(px) <= TOLERANCE_PX for px in off.values()), off


def test_on_a_phone_the_publish_controls_follow_the_name(
    browser: Browser, studio: LiveStudio
) -> None:
    page = phone(browser, studio)
    open_new_draft(page, studio, "header-phone", json.loads(EXAMPLE.read_text()))
    name = page.locator("#draft-name").bounding_box()
    assert name is not None
    below = {c: centre(page, c) > name["y"] + name["height"] for c in CONTROLS}
    assert all(below.values()), below
    assert page.evaluate(WIDER_THAN_SCREEN) <= 0, "the editor scrolls sideways"
