"""A date is never split at its hyphens: at widths where a table's columns are narrow
(the workers' heartbeat and start, an instance's attempts, the settings' tokens), the
line wrapped ``2026-12-`` away from ``07``. A line may still break before the time."""

from __future__ import annotations

from playwright.sync_api import Browser

from studio.roles import Role
from tests.browser.conftest import TIMEOUT_MS, settled, sign_in
from tests.studio.live import LiveStudio

WIDTHS = (640, 800)
"""Where the pages below split dates before they were kept whole (each split one)."""
LINES = "ds => ds.map(d => [d.textContent, d.getClientRects().length])"
"""Each date's text and how many line pieces it is drawn in."""


def test_a_date_stays_whole_in_a_narrow_column(browser: Browser, studio: LiveStudio) -> None:
    team, _, instance_id = studio.one_running("dates")
    for width in WIDTHS:
        context = browser.new_context(viewport={"width": width, "height": 900}, base_url=studio.url)
        context.set_default_timeout(TIMEOUT_MS)
        page = context.new_page()
        sign_in(page, studio.user(team, Role.ADMIN))
        page.goto("/settings")  # a token's row has its dates
        page.get_by_label("Label").fill(f"dates-{width}")
        page.get_by_role("button", name="Create token").click()
        for path in ("/workers", f"/instances/{instance_id}", "/settings"):
            page.goto(path)
            settled(page)
            dates = page.locator(".date")
            shown = dates.evaluate_all(
                "ds => ds.map(d => [d.textContent, d.getClientRects().length])"
            )
            assert shown, f"{path} shows no date"
            assert all(lines == 1 for _, lines in shown), (width, path, shown)
        context.close()
