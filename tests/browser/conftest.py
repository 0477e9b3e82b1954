"""Browser tests: Debian's Chromium driven by Playwright against a live studio.

Chromium comes from apt (``/usr/bin/chromium``), never from ``playwright install``; the
flags keep it from calling out to the network, which these machines refuse. The
studio runs in a thread on a free port (see ``tests/studio/live.py``) with an
in-process worker for the example activities (``examples/orders.py``), as ``wayline
studio`` runs one, so instances started in the browser really run; it also advertises
a few more targets, so target suggestions and warnings are real.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, expect, sync_playwright

from examples.orders import app as example_activities
from studio.definitions import drafts
from studio.roles import Role
from tests.integration.conftest import pg_dsn  # noqa: F401  (the session's PostgreSQL)
from tests.studio.live import PASSWORD, LiveStudio, serve_studio

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "order_fulfillment.json"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

CHROMIUM = os.environ.get("WAYLINE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
VIEWPORT = {"width": 1280, "height": 800}
TIMEOUT_MS = 20_000
"""Generous: these machines are shared, and a loaded one is slow, not broken."""
expect.set_options(timeout=TIMEOUT_MS)


_served = contextlib.ExitStack()
"""The live studio and Chromium: closed after the last browser test
(``pytest_runtest_teardown``), not at the session's end. The studio's in-process worker
runs the engine's own functions, which tests after this directory patch for a worker of
theirs: left running, it once handed a studio instance's due timer to such a test's
patched processor. While Playwright's sync API is active its event loop counts as
running, and the async tests after this directory need theirs."""


@pytest.fixture(scope="session")
def studio(pg_dsn: str) -> Iterator[LiveStudio]:  # noqa: F811
    live = _served.enter_context(serve_studio(pg_dsn, worker_activities=example_activities))
    live.advertise()
    yield live
    _served.close()


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Close the studio and Chromium once the next test is not a browser test (pytest runs a
    directory's tests together, so none of them needs it again): last, after the test's
    own fixtures (its page's context) are torn down."""
    if nextitem is None or nextitem.path.parent != Path(__file__).parent:
        _served.close()


@pytest.fixture(scope="session")
def shop(studio: LiveStudio) -> str:
    """The team that owns the example order-fulfillment definition (a name belongs to
    the team that first published it, so every test that needs it shares this one)."""
    team = studio.team("shop", "Shop")
    studio.publish(team, json.loads(EXAMPLE.read_text()))
    return team


@pytest.fixture(scope="session")
def browser() -> Browser:
    """One Chromium for every browser test (each test opens a context of its own):
    started once, not once a module, as it takes a second or more on a loaded host."""
    if not os.path.exists(CHROMIUM):
        pytest.fail(
            f"Chromium is missing at {CHROMIUM}: run WAYLINE_NEEDS_CHROMIUM=1 scripts/bootstrap.sh"
        )
    playwright = _served.enter_context(sync_playwright())
    launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    _served.callback(launched.close)
    return launched


@pytest.fixture
def page(browser: Browser, studio: LiveStudio) -> Iterator[Page]:
    context = browser.new_context(viewport=VIEWPORT, base_url=studio.url, accept_downloads=True)
    context.set_default_timeout(TIMEOUT_MS)
    opened = context.new_page()
    problems: list[str] = []
    opened.on("pageerror", lambda error: problems.append(f"page error: {error}"))

    def console(message: ConsoleMessage) -> None:
        # HTTP error statuses are the tests' own business; scripts and CSP are not.
        if message.type == "error" and not message.text.startswith("Failed to load resource"):
            problems.append(f"console: {message.text}")

    opened.on("console", console)
    yield opened
    context.close()
    assert not problems, "the page reported errors (script failures, CSP violations)"


HTMX_IDLE = """() => document.readyState === "complete"
    && !document.querySelector(".htmx-request, .htmx-swapping, .htmx-settling, .htmx-added")"""
"""The page has loaded (htmx wires it at DOMContentLoaded) and htmx has no request, swap
or settle under way (its documented classes mark each phase)."""


def settled(page: Page) -> None:
    """Wait until htmx has wired everything on the page before acting on it.

    htmx wires content it swapped in only when that content settles, a moment after it
    appears: a key or click that lands in between makes a native request instead of an
    htmx one. After a click that htmx serves, this also waits for its answer.
    """
    page.wait_for_function(HTMX_IDLE)


def sign_in(page: Page, username: str, password: str = PASSWORD) -> None:
    """Sign in through the form, as a person would."""
    page.goto("/login")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/definitions")


def open_new_draft(page: Page, studio: LiveStudio, team: str, document: dict[str, Any]) -> str:
    """Sign in as an author of a new team named after ``team`` and open a new draft
    holding ``document``; returns the draft's id."""
    team_id = studio.team(team)
    draft = studio.run(lambda store: drafts.create_draft(store, team_id, document, "", "x"))
    sign_in(page, studio.user(team_id, Role.AUTHOR))
    page.goto(f"/drafts/{draft.draft_id}")
    settled(page)
    return draft.draft_id


def screenshot(page: Page, name: str, tmp_path: Path) -> Path:
    """A PNG of the page for the README (``docs/<name>``) when
    ``WAYLINE_UPDATE_SCREENSHOTS=1``, else in the test's temporary directory, so a test
    run never changes the repository."""
    update = os.environ.get("WAYLINE_UPDATE_SCREENSHOTS") == "1"
    target = ROOT / "docs" / name if update else tmp_path / name
    target.parent.mkdir(exist_ok=True)
    page.screenshot(path=str(target))
    assert target.read_bytes().startswith(PNG_SIGNATURE)
    if not update and not (ROOT / "docs" / name).exists():
        pytest.fail(f"docs/{name} is missing: run with WAYLINE_UPDATE_SCREENSHOTS=1")
    return target
