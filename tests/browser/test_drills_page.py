"""The Drills page as an operator meets it: a run with nothing chosen is refused beside
the form (not on an error page), the families read in order, each saying what it
tests, and a scorecard's figures carry their units."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import Page, expect

from studio.drills.families import GROUPS
from studio.roles import Role
from tests.browser.conftest import sign_in
from tests.studio.live import LiveStudio
from tests.studio.test_drill_pages import DRILL, record

FAMILY = re.compile(r"([A-Z]+)(\d*)")


def reading_order(family: str) -> tuple[int, int]:
    letters, number = FAMILY.fullmatch(family).groups()  # type: ignore[union-attr]
    return GROUPS.index(letters), int(number or 0)


def test_an_empty_run_is_refused_beside_the_form(page: Page, studio: LiveStudio) -> None:
    sign_in(page, studio.user(studio.team("drillform"), Role.OPERATOR))
    page.goto("/drills")
    page.get_by_role("button", name="Run the chosen drills").click()
    expect(page.locator("#drill-error")).to_contain_text("choose at least one drill")
    expect(page.get_by_role("heading", level=1)).to_have_text("Drills")
    expect(page.locator("#drill-form fieldset.family").first).to_be_visible()
    expect(page).to_have_url(re.compile(r"/drills\?profile=ci$"))


def test_families_are_in_order_and_each_is_described(page: Page, studio: LiveStudio) -> None:
    sign_in(page, studio.user(studio.team("drillfam"), Role.OPERATOR))
    page.goto("/drills")
    families = page.locator("#drill-form fieldset.family")
    expect(families.first).to_be_visible()
    ids: list[str] = families.locator("legend input").evaluate_all("l => l.map(i => i.value)")
    assert ids == sorted(ids, key=reading_order) and ids[:4] == ["D1", "D2", "D3", "D4"]
    abouts = families.locator(".family-about")
    expect(abouts).to_have_count(len(ids))
    texts = abouts.all_inner_texts()
    assert all(len(t.strip()) > 20 for t in texts), dict(zip(ids, texts, strict=True))
    legends = families.locator("legend").all_inner_texts()
    said_twice = {
        family: legend
        for family, legend, about in zip(ids, legends, texts, strict=True)
        if about.strip()[:20].lower() in legend.lower()
    }
    assert not said_twice, "a family's heading restates what it tests"
    first = families.first.locator("legend input")
    expect(first).to_have_accessible_description(texts[0].strip())


def test_scorecard_figures_carry_units(page: Page, studio: LiveStudio, tmp_path: Path) -> None:
    team = studio.team("drillunits")
    run_id = record(studio, team, tmp_path, failed=False)
    sign_in(page, studio.user(team, Role.VIEWER))
    page.goto(f"/drills/runs/{run_id}")
    expect(page.locator(f"#drill-results tr[data-drill='{DRILL}']")).to_contain_text("2.50 s")
    recovery = page.locator("section.card", has_text="Recovery")
    expect(recovery.locator("dd").first).to_have_text("2.0 s")
