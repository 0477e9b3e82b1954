"""Making a drill plan in the browser, as the plan tests share it: publish a definition,
open its version's drill plans, pick a node and pin a fault on it."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Locator, Page, expect

from studio.roles import Role
from tests.browser.conftest import settled, sign_in
from tests.studio.live import LiveStudio

RUN_MS = 150_000
"""A whole drill run: a fresh schema, a worker killed and replaced, the checker."""


def pin_on_a_node(
    page: Page, studio: LiveStudio, team_name: str, document: dict[str, Any], node: str, pin: str
) -> Locator:
    """Publish the definition ``document`` in a team of its own, sign in as its
    operator, open version 1's drill plans, click the node ``#NODE`` and pin
    ``STEP:BOUNDARY:FAULT`` on it; returns the pin's marker on the node, checked to be
    there."""
    team = studio.team(team_name)
    studio.publish(team, document)
    sign_in(page, studio.user(team, Role.OPERATOR))
    page.goto(f"/definitions/{document['name']}/versions/1")
    page.locator("#drill-plans-link").click()
    settled(page)
    step, boundary, fault = pin.split(":")
    page.locator(f"#{node} a").click()
    settled(page)
    expect(page.locator("#picked-step")).to_have_text(step)
    page.get_by_label("Boundary", exact=True).select_option(boundary)
    page.get_by_label("Fault", exact=True).select_option(fault)
    page.get_by_role("button", name="Pin fault").click()
    settled(page)
    marker = page.locator(f"#{node} .pin-marker[data-pin='{pin}']")
    expect(marker).to_have_count(1)
    return marker
