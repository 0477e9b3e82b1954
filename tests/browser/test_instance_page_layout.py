"""The instance page brings the work into view: the graph opens scrolled to the step
the instance is at (not to its top), and long values in the steps table, the history
and the audit trail wrap instead of widening the page."""

from __future__ import annotations

import re
import uuid

from playwright.sync_api import Page, expect

from engine.api.client import Client
from engine.decide.audit import Action
from engine.model.limits import MAX_REASON_LENGTH
from studio.roles import Role
from tests.browser.conftest import sign_in
from tests.studio import code_app
from tests.studio.live import LiveStudio, definition

SIGNALS = 14
INSIDE = """([node, box]) => {
  const n = node.getBoundingClientRect(), v = box.getBoundingClientRect();
  return n.top >= v.top && n.bottom <= v.bottom && n.left >= v.left && n.right <= v.right;
}"""


def far_along(studio: LiveStudio, first_signal: str = "x0") -> tuple[str, str, str]:
    """An instance of a long chain of signal steps, signalled up to its last but one
    (the first signal's id is ``first_signal``)."""
    team = studio.team("farview")
    name = f"far.{uuid.uuid4().hex[:6]}"
    wait = {"kind": "signal", "timeout": "1h", "input_limit": 1024}
    steps = [{"name": f"s{n}", "target": f"far.s{n}", **wait} for n in range(SIGNALS)]
    studio.publish(team, {"name": name, "version": "1", "mode": "orchestration", "steps": steps})
    instance_id = studio.start(team, name)
    for n in range(SIGNALS - 1):
        signal_id = first_signal if n == 0 else f"x{n}"
        studio.run(
            lambda store, n=n, i=signal_id: Client(store).signal(instance_id, f"s{n}", i, {})
        )
    return team, instance_id, f"s{SIGNALS - 1}"


def test_the_graph_opens_at_the_current_step(page: Page, studio: LiveStudio) -> None:
    team, instance_id, current = far_along(studio)
    page.set_viewport_size({"width": 1000, "height": 700})
    sign_in(page, studio.user(team, Role.VIEWER))
    page.goto(f"/instances/{instance_id}")
    node = page.locator(f"#step-{current}")
    expect(node).to_have_class(re.compile(r"state-waiting-signal"))
    canvas = page.locator("#instance-canvas").element_handle()
    page.wait_for_function(INSIDE, arg=[node.element_handle(), canvas])


def test_a_long_value_wraps_in_the_steps_and_signals_tables(page: Page, studio: LiveStudio) -> None:
    """A signal id without separators (the 32 hex digits of the command id an approval
    gets) ran out of the signals card, which takes a third of the page's width."""
    team, instance_id, _ = far_along(studio, first_signal="k" * 150)
    sign_in(page, studio.user(team, Role.VIEWER))
    page.goto(f"/instances/{instance_id}")
    row = page.locator("#step-row-s0")
    expect(row).to_contain_text("k" * 150)
    expect(page.locator("#signals-table")).to_contain_text("k" * 150)
    fits = "t => t.getBoundingClientRect().width <= t.parentElement.clientWidth + 1"
    assert page.locator("#steps-table").evaluate(fits)
    assert page.locator("#signals-table").evaluate(fits)


def test_a_long_input_wraps_in_the_history(page: Page, studio: LiveStudio) -> None:
    team, name, _ = studio.one_running("wideinput")
    instance_id = studio.start(team, name, input={"note": "w" * 400})
    sign_in(page, studio.user(team, Role.VIEWER))
    page.goto(f"/instances/{instance_id}")
    expect(page.locator("#history-table")).to_contain_text("w" * 100)
    assert page.evaluate("document.scrollingElement.scrollWidth - window.innerWidth") <= 0


def test_a_long_reason_wraps_in_the_audit_trail(page: Page, studio: LiveStudio) -> None:
    """A reason of one long word (a URL) pushed the command id out of the card and
    squeezed the time into four lines."""
    team, name, _ = studio.one_running("widereason")
    instance_id = studio.start(team, name)
    studio.command(instance_id, Action.PAUSE, reason="r" * MAX_REASON_LENGTH)
    sign_in(page, studio.user(team, Role.VIEWER))
    page.goto(f"/instances/{instance_id}")
    table = page.locator("#audit-table")
    expect(table).to_contain_text("r" * 100)
    fits = "t => t.getBoundingClientRect().width <= t.parentElement.clientWidth + 1"
    assert table.evaluate(fits)


def test_the_start_form_input_limit_follows_the_chosen_version(
    page: Page, studio: LiveStudio
) -> None:
    team = studio.team("startlimit")
    name = f"limit.{uuid.uuid4().hex[:6]}"
    studio.publish(team, definition(name, "1"))
    wider = definition(name, "2")
    wider["steps"][0]["input_limit"] = 512  # reserve's limit is now the smallest
    studio.publish(team, wider)
    sign_in(page, studio.user(team, Role.OPERATOR))
    page.goto(f"/instances/new?definition={name}&version=1")
    hint = page.locator("#start-input-help")
    expect(hint).to_contain_text("at most 1024 bytes")
    page.get_by_label("Definition version").select_option(f"{name}@2")
    expect(hint).to_contain_text("at most 512 bytes (the limit of step reserve)")
    page.get_by_label("Definition version").select_option(f"{name}@1")
    expect(hint).to_contain_text("at most 1024 bytes")


def test_the_start_form_says_what_a_code_first_run_id_becomes(
    page: Page, studio: LiveStudio
) -> None:
    """The id field's hint follows the chosen version: a code-first run's id is stored
    as ``<name>/<id>``, and that is said before the run is started, not discovered after."""
    team = studio.team("startcode")
    steps = studio.publish_new(team, "startsteps")
    flow = code_app.app.workflows[0]
    name = f"startsaga-{uuid.uuid4().hex[:6]}"
    studio.publish(team, {**flow.document, "name": name})
    sign_in(page, studio.user(team, Role.OPERATOR))
    page.goto(f"/instances/new?definition={steps}&version=1")
    id_hint, input_hint = page.locator("#start-id-help"), page.locator("#start-input-help")
    expect(id_hint).to_contain_text("Leave empty for a new id.")
    page.get_by_label("Definition version").select_option(f"{name}@1")
    expect(id_hint).to_contain_text(f"its run id is stored as {name}/ID")
    expect(input_hint).to_contain_text(f"The workflow's code ({flow.module}.{flow.qualname})")
    page.get_by_label("Definition version").select_option(f"{steps}@1")
    expect(id_hint).not_to_contain_text("code-first")
    expect(input_hint).to_contain_text("at most 1024 bytes")


def test_a_step_kind_stays_on_one_line_in_the_steps_table(page: Page, studio: LiveStudio) -> None:
    """A long state note took the narrow steps card's width and broke the step's kind tag
    over two lines ("ACTIVIT" over "Y")."""
    team, instance_id, _ = far_along(studio, first_signal="k" * 150)
    sign_in(page, studio.user(team, Role.VIEWER))
    page.goto(f"/instances/{instance_id}")
    tag = page.locator("#step-row-s0 .kind-tag")
    expect(tag).to_be_visible()
    assert tag.evaluate("t => t.getClientRects().length") == 1, "the tag spans lines"
