"""A version's graph and the versions page's graphs (one, or the two compared) have the
editor's zoom and fit controls, and a compensated step's node shows what undoes it
(issue 24)."""

from __future__ import annotations

import uuid

from playwright.sync_api import Page, expect

from studio.roles import Role
from tests.browser.conftest import sign_in
from tests.studio.live import LiveStudio, definition


def width_of(page: Page, canvas: str) -> float:
    return page.locator(f"#{canvas} svg").first.evaluate("e => e.getBoundingClientRect().width")


def zooms_in(page: Page, canvas: str) -> None:
    before = width_of(page, canvas)
    page.locator(f'[data-zoom-for="{canvas}"] [data-zoom="in"]').click()
    page.wait_for_function(
        "([canvas, before]) => document.querySelector(`#${canvas} svg`)"
        ".getBoundingClientRect().width > before",
        arg=[canvas, before],
    )


def test_version_and_versions_pages_zoom(page: Page, studio: LiveStudio) -> None:
    team = studio.team("zoom")
    name = f"zoom.{uuid.uuid4().hex[:6]}"
    studio.publish(team, definition(name))
    sign_in(page, studio.user(team, Role.VIEWER))

    page.goto(f"/definitions/{name}/versions/1")
    zooms_in(page, "version-canvas")
    page.goto(f"/definitions/{name}")
    zooms_in(page, "only-canvas")

    studio.publish(team, {**definition(name), "version": "2"})
    page.goto(f"/definitions/{name}")
    zooms_in(page, "left-canvas")
    zooms_in(page, "right-canvas")


def test_a_compensated_step_shows_what_undoes_it(page: Page, studio: LiveStudio) -> None:
    team = studio.team("undo")
    name = f"undo.{uuid.uuid4().hex[:6]}"
    charge = {"name": "charge", "kind": "activity", "target": "pay.charge", "timeout": "30s"}
    undone = {**charge, "compensation": {"target": "pay.refund", "timeout": "30s"}}
    plain = {**charge, "name": "notify", "target": "mail.send"}
    studio.publish(team, {"name": name, "version": "1", "steps": [undone, plain]})
    sign_in(page, studio.user(team, Role.VIEWER))
    page.goto(f"/definitions/{name}/versions/1")
    graph = page.locator("#version-canvas")
    marked = graph.locator("g.node", has=page.locator("text.compensation"))
    expect(marked).to_have_count(1)
    expect(marked.locator("text.compensation")).to_have_text("↺ pay.refund")
    expect(marked.locator("title")).to_contain_text("undone by pay.refund")
    expect(marked.locator("text.title")).to_have_text("charge")
