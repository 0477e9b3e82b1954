"""An ended instance's page tells the truth about its waits.

A race's losing timer is cancelled when the other branch wins; a cancelled instance
never reaches its remaining waits. Neither is "pending" or "not yet" fired: the steps
table, the graph and the timers table say cancelled or not reached, with the reason.
"""

from __future__ import annotations

import re
import uuid

from playwright.sync_api import Page, expect

from engine.api.client import Client
from engine.decide.operator_actions import Action
from studio.roles import Role
from tests.browser.conftest import sign_in
from tests.studio.live import LiveStudio

WAIT = {"timeout": "1h", "input_limit": 1024}
STEPS = [
    {"name": "r", "kind": "race", "branches": ["sig", "tmo"], "fan_out_limit": 2},
    {"name": "sig", "kind": "signal", "target": "ended.sig", **WAIT},
    {"name": "tmo", "kind": "timer", "timeout": "1h"},
    {"name": "ap", "kind": "approval", "target": "ended.ap", **WAIT},
]


def ended_waits(studio: LiveStudio) -> tuple[str, str, str]:
    """A team and two cancelled instances of a race then an approval: one cancelled
    after its signal won the race, one while the race was still open."""
    team = studio.team("ended")
    name = f"ended.{uuid.uuid4().hex[:6]}"
    studio.publish(team, {"name": name, "version": "1", "mode": "orchestration", "steps": STEPS})
    won, open_race = studio.start(team, name), studio.start(team, name)
    studio.run(lambda store: Client(store).signal(won, "sig", "sig-1", {}))
    for instance_id in (won, open_race):
        studio.command(instance_id, Action.CANCEL, "the order was withdrawn")
    return team, won, open_race


def expect_state(page: Page, step: str, state: str, note: str) -> None:
    expect(page.locator(f"#step-{step}")).to_have_class(re.compile(rf"\bstate-{state}\b"))
    row = page.locator(f"#step-row-{step}")
    expect(row).to_have_class(re.compile(rf"\bstate-{state}\b"))
    expect(row).to_contain_text(note)


def expect_no_open_wait(page: Page) -> None:
    expect(page.locator("#instance-status")).to_have_text("cancelled")
    expect(page.locator("#steps-table")).not_to_contain_text("pending")
    expect(page.locator("#timers-table")).not_to_contain_text("not yet")
    expect(page.locator("#races-table")).not_to_contain_text("none yet")


def test_a_lost_race_timer_and_an_unreached_approval_say_why(
    page: Page, studio: LiveStudio
) -> None:
    team, won, open_race = ended_waits(studio)
    sign_in(page, studio.user(team, Role.VIEWER))

    page.goto(f"/instances/{won}")
    expect_no_open_wait(page)
    expect_state(page, "tmo", "cancelled", "race r was won by sig")
    expect_state(page, "ap", "not-reached", "the instance was cancelled")
    expect(page.locator("#timers-table")).to_contain_text("cancelled race r was won by sig")

    page.goto(f"/instances/{open_race}")
    expect_no_open_wait(page)
    expect_state(page, "tmo", "cancelled", "the instance was cancelled")
    expect_state(page, "sig", "not-reached", "the instance was cancelled")
    expect(page.locator("#timers-table")).to_contain_text("cancelled the instance was cancelled")
    expect(page.locator("#races-table")).to_contain_text("none: the instance was cancelled")
