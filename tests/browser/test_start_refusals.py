"""A refused start says why at the field it concerns, and puts the cursor there: the
reason sat above the form, linked to no field, so a person had to find which one."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from studio.roles import Role
from tests.browser.conftest import sign_in
from tests.studio.live import LiveStudio


def test_a_refused_instance_id_is_focused_and_described_by_the_reason(
    page: Page, studio: LiveStudio
) -> None:
    team = studio.team("startrefused")
    name = studio.publish_new(team, "startrefused")
    sign_in(page, studio.user(team, Role.OPERATOR))
    page.goto(f"/instances/new?definition={name}&version=1")
    page.get_by_label("Instance id").fill("two words")
    page.get_by_role("button", name="Start").click()
    field = page.get_by_label("Instance id")
    expect(field).to_be_focused()
    expect(field).to_have_value("two words")
    expect(field).to_have_attribute("aria-invalid", "true")
    expect(field).to_have_accessible_description(
        re.compile(r"^the instance id .+ Leave empty for a new id\.")
    )
    expect(page.locator("#start-id-error")).to_be_visible()
    expect(page.locator("#start-error")).to_have_count(0)
