"""A page read from a lagging replica, in Chromium: it says so, and acting from it is
judged on the primary.

The studio reads a real standby whose replay is paused (``tests.studio.replica``); the
instance is terminated on the primary meanwhile. The page still shows it running and
offers Cancel, with the lag notice under the header; choosing Cancel opens its
confirmation, which is read on the primary and says it is no longer possible.
Live updates are off, so the stale view stays what the replica says.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from playwright.sync_api import Browser, Page, expect

from engine.api.client import Client
from engine.decide.operator_actions import Action
from studio.instance_urls import instance_url
from studio.roles import Role
from tests.browser.conftest import TIMEOUT_MS, VIEWPORT, settled, sign_in
from tests.studio.live import LiveStudio
from tests.studio.replica import catch_up, frozen, replica_studio
from verification.standby import StandbyPair


@pytest.fixture(scope="module")
def pair_and_studio(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[StandbyPair, LiveStudio]]:
    with replica_studio(tmp_path_factory.mktemp("replica"), live_interval=timedelta(0)) as both:
        yield both


@pytest.fixture
def replica_page(
    browser: Browser, pair_and_studio: tuple[StandbyPair, LiveStudio]
) -> Iterator[Page]:
    context = browser.new_context(viewport=VIEWPORT, base_url=pair_and_studio[1].url)
    context.set_default_timeout(TIMEOUT_MS)
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    yield opened
    context.close()
    assert not errors, "the page reported script errors"


def test_a_stale_page_says_how_far_behind_it_is_and_its_cancel_is_refused(
    pair_and_studio: tuple[StandbyPair, LiveStudio], replica_page: Page
) -> None:
    pair, live = pair_and_studio
    team, _, instance_id = live.one_running("replica")
    sign_in(replica_page, live.user(team, Role.OPERATOR))
    url = instance_url(instance_id)
    catch_up(pair)
    replica_page.goto(url)
    expect(replica_page.locator("#read-lag")).to_have_text(
        "Read from a replica, up to date with the primary."
    )

    with frozen(pair):
        live.command(instance_id, Action.TERMINATE, "ended on the primary")
        replica_page.goto(url)
        notice = replica_page.locator("#read-lag.behind")
        expect(notice).to_contain_text("behind the primary")
        expect(notice).to_contain_text("actions always act on the primary")
        settled(replica_page)
        replica_page.locator("[data-offer='cancel']").click()
        expect(
            replica_page.get_by_text("is not possible in the instance's state now")
        ).to_be_visible()

    state = live.run(lambda store: Client(store).inspect(instance_id))
    assert state.status.label == "terminated"
    assert [entry.action for entry in state.audit] == ["terminate"]
