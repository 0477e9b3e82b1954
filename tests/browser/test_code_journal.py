"""A code-first run in the browser (issue 20): started from the studio's form, its
signals sent from the page, its journal growing live without a reload, and a step whose
outcome is unknown resolved by an operator with a reason."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import APIResponse, Page, Request, Route, expect

from studio.roles import Role
from tests.browser.conftest import screenshot, settled, sign_in
from tests.browser.test_operations import SAME_DOCUMENT, WORK_SECONDS, still_same_document
from tests.studio import code_app
from tests.studio.live import LiveStudio


@pytest.fixture(scope="module")
def team(studio: LiveStudio) -> str:
    """A team that owns the code app's workflows (a name is one team's)."""
    team = studio.team("code")
    for flow in code_app.app.workflows:
        studio.publish(team, flow.document)
    return team


def start_from_the_form(page: Page, name: str, run: str, input: str = "") -> None:
    page.goto("/instances/new")
    page.get_by_label("Definition version").select_option(f"{name}@1")
    page.get_by_label("Instance id").fill(run)
    page.get_by_label("Input (JSON)").fill(input)
    page.get_by_role("button", name="Start").click()
    page.wait_for_url(re.compile(re.escape(f"/instances/{name}") + ".*" + re.escape(run)))
    page.evaluate(f"{SAME_DOCUMENT} = true")


def send(page: Page, signal: str, payload: str = "") -> None:
    settled(page)
    page.get_by_label(f"Payload for {signal}").fill(payload)
    page.get_by_label(f"Reason for {signal}").fill("the customer called")
    page.get_by_role("button", name=f"Send {signal}").click()


def test_start_a_run_send_its_signals_and_watch_the_journal_grow(
    page: Page, studio: LiveStudio, team: str, tmp_path: Path
) -> None:
    sign_in(page, studio.user(team, Role.OPERATOR))
    with studio.worker(code_app.app):
        page.set_viewport_size({"width": 1400, "height": 1000})
        start_from_the_form(page, "pages-saga", "b-1", '{"sku": "mug"}')
        journal = page.locator("#journal-table")
        expect(journal.locator("#journal-1")).to_contain_text("race.1", timeout=WORK_SECONDS)
        expect(journal.locator("#journal-0")).to_contain_text("pages-saga/b-1/reserve#1.1")
        expect(page.locator("#code-1")).to_have_class(re.compile(r"\bstate-waiting-signal\b"))

        send(page, "paid", '{"by": "ada"}')
        expect(journal.locator("#journal-2")).to_contain_text("pages-saga/b-1/charge#1.1")
        expect(journal.locator("#journal-3")).to_contain_text("await.shipped.1")
        expect(page.locator("#code-2")).to_have_class(re.compile(r"\bstate-succeeded\b"))
        page.get_by_role("button", name="Fit").click()
        screenshot(page, "code-run.png", tmp_path)

        send(page, "shipped")
        expect(page.locator("#instance-status")).to_have_text("completed", timeout=WORK_SECONDS)
        expect(page.locator("#live-badge")).to_have_text("ended")
        still_same_document(page)


HELD = "wayline-test: answer held"


def test_an_answer_that_arrives_after_a_newer_live_update_paints_nothing_older(
    page: Page, studio: LiveStudio, team: str
) -> None:
    """An action's answer is drawn when the action commits; the live stream may bring
    what the worker did next before that answer arrives. Here the answer to "send paid"
    is held until the page shows the charge done, then let through: the graph and the
    journal keep the newer state (before, the charge's node turned back to pending)."""
    sign_in(page, studio.user(team, Role.OPERATOR))
    with studio.worker(code_app.app):
        start_from_the_form(page, "pages-saga", "h-1", '{"sku": "mug"}')
        journal = page.locator("#journal-table")
        expect(journal.locator("#journal-1")).to_contain_text("race.1", timeout=WORK_SECONDS)
    held: list[tuple[Route, APIResponse]] = []

    def hold(route: Route, request: Request) -> None:
        if request.method != "POST":
            route.continue_()
            return
        held.append((route, route.fetch()))
        page.evaluate(f"console.log({HELD!r})")

    page.route("**/*", hold)
    with page.expect_console_message(lambda message: message.text == HELD):
        send(page, "paid", '{"by": "ada"}')
    with studio.worker(code_app.app):
        expect(journal.locator("#journal-3")).to_contain_text(
            "await.shipped.1", timeout=WORK_SECONDS
        )
        expect(page.locator("#code-2")).to_have_class(re.compile(r"\bstate-succeeded\b"))
    route, answer = held.pop()
    route.fulfill(response=answer)
    expect(page.locator("#action-panel")).to_contain_text("Signal paid delivered")
    settled(page)
    expect(page.locator("#code-2")).to_have_class(re.compile(r"\bstate-succeeded\b"))
    expect(journal.locator("#journal-3")).to_contain_text("await.shipped.1")
    page.unroute("**/*", hold)
    still_same_document(page)


def test_an_unknown_outcome_is_shown_as_such_and_resolved_with_a_reason(
    page: Page, studio: LiveStudio, team: str
) -> None:
    sign_in(page, studio.user(team, Role.OPERATOR))
    with studio.worker(code_app.app):
        start_from_the_form(page, "pages-unknown", "u-1")
        send(page, "go")
        charge = page.locator("#journal-table #journal-1")
        expect(charge).to_contain_text("UNKNOWN", timeout=WORK_SECONDS)
        expect(charge).to_contain_text("pages-unknown/u-1/charge#1.1")

        settled(page)
        page.locator("[data-offer='resolve_activity:charge.1']").click()
        expect(page.locator("#confirm-effect")).to_contain_text("has an unknown outcome")
        settled(page)
        page.get_by_role("radio", name="succeeded").check()
        page.get_by_label("Result (JSON, only for succeeded)").fill('{"charged": true}')
        page.get_by_label("Reason").fill("the gateway shows the charge went through")
        page.locator("#confirm-button").click()
        expect(charge).to_contain_text('{"charged": true}', timeout=WORK_SECONDS)
        expect(charge).to_have_class(re.compile(r"\bstate-succeeded\b"))
        expect(page.locator("#audit-table")).to_contain_text("the gateway shows the charge")
        expect(page.locator("#journal-table #journal-2")).to_contain_text("await.done.1")
        still_same_document(page)
