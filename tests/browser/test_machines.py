"""A machine in the browser: its version page draws the state diagram, an execution's
page highlights its current state and the edges it took, live, and an execution
started from the studio can be cancelled with a reason.

No worker here runs the machine's code: the tests write an execution's history
themselves, as the runtime does (``LiveStudio.start_machine`` and ``machine_event``,
each event checked by replay on the way in).
"""

from __future__ import annotations

import base64
import re
from datetime import timedelta
from pathlib import Path

from playwright.sync_api import Page, expect

from engine.model.events import EventKind
from studio.roles import Role
from tests.browser.conftest import settled, sign_in
from tests.studio.live import LiveStudio
from tests.unit.machines import approval_document

K = EventKind


def operator_with_approval(page: Page, studio: LiveStudio, team_prefix: str, name: str) -> str:
    """A new team with the approval machine published as ``name``, and its operator
    signed in: the team."""
    team = studio.team(team_prefix)
    studio.publish(team, {**approval_document(), "name": name})
    sign_in(page, studio.user(team, Role.OPERATOR))
    return team


WHOLE_GRAPH_SHOWN = """graph => {
    const svg = document.querySelector(graph);
    const box = svg.closest(".viewport").getBoundingClientRect();
    return [...svg.querySelectorAll(".node")].every(node => {
        const at = node.getBoundingClientRect();
        return at.left >= box.left && at.right <= box.right
            && at.top >= box.top && at.bottom <= box.bottom;
    });
}"""
"""Whether every node of the graph lies inside its canvas (none cut off at an edge)."""

BADGE_FITS = """badge => {
    const pill = badge.querySelector("rect").getBBox();
    const text = badge.querySelector("text").getBBox();
    return text.x >= pill.x && text.x + text.width <= pill.x + pill.width;
}"""
"""Whether a timer badge's duration lies inside its pill (none spilling past its ends)."""


def test_a_machine_version_and_an_execution_moving_through_its_states(
    page: Page, studio: LiveStudio, tmp_path: Path
) -> None:
    team = operator_with_approval(page, studio, "machines", "approval_browser")

    page.goto("/definitions/approval_browser/versions/1")
    diagram = page.locator("svg.state-diagram")
    expect(diagram.locator(".node")).to_have_count(5)
    expect(diagram.locator(".transition")).to_have_count(5)
    expect(page.locator("#state-Submitted")).to_have_class(re.compile(r"\binitial\b"))
    expect(page.locator("#state-entry")).to_be_visible()
    badge = page.locator("#state-InReview .timer-badge")
    expect(badge).to_have_text("1 min")
    assert badge.evaluate(BADGE_FITS)
    expect(page.locator("#state-InReview > title")).to_contain_text(", timer 1 min")
    expect(page.locator("#state-Expired .ring")).to_have_count(1)
    expect(page.locator("#edge-InReview--InReview")).to_have_class(re.compile(r"route-self"))
    page.screenshot(path=str(tmp_path / "version.png"))

    execution = studio.start_machine(team, "approval_browser", {"input": "doc", "parent": "p"})
    studio.machine_event(
        execution, K.STATE_ENTERED, step="InReview", attempt=1, data='{"reminders":0}'
    )
    page.set_viewport_size({"width": 700, "height": 800})  # narrower than the diagram
    page.goto(f"/instances/{execution}")
    settled(page)
    assert page.evaluate(WHOLE_GRAPH_SHOWN, "svg.state-diagram"), "a small diagram opens whole"
    page.set_viewport_size({"width": 1280, "height": 720})
    current = page.locator("#state-InReview")
    expect(current).to_have_class(re.compile(r"\bcurrent\b.*\bstate-waiting-timer\b"))
    expect(page.locator("#state-Submitted")).not_to_have_class(re.compile(r"\bcurrent\b"))
    expect(page.locator("#edge-Submitted--InReview")).to_have_class(re.compile(r"\btaken\b"))
    expect(page.locator("#edge-Submitted--InReview .count")).to_have_text("1")
    expect(page.locator("#machine-current")).to_have_text("InReview")
    expect(page.locator("#machine-fields")).to_contain_text("reminders")
    expect(page.locator("#instance-actions").get_by_role("link", name="Cancel")).to_be_visible()

    # The execution moves on while the page is open: the page follows without a reload.
    page.evaluate("window.__sameDocument = true")
    studio.machine_event(
        execution, K.TIMER_SCHEDULED, step="InReview", due_at=timedelta(seconds=60)
    )
    studio.machine_event(execution, K.TIMER_FIRED, step="InReview", later=timedelta(seconds=61))
    studio.machine_event(
        execution, K.STATE_ENTERED, step="Approved", attempt=1, data='{"by":"ann"}'
    )
    studio.machine_event(execution, K.COMPLETED)
    expect(page.locator("#state-Approved")).to_have_class(
        re.compile(r"\bcurrent\b.*\bstate-succeeded\b")
    )
    expect(page.locator("#edge-InReview--Approved")).to_have_class(re.compile(r"\btaken last\b"))
    expect(page.locator("#edge-InReview--Approved .count")).to_have_text("1")
    expect(current).not_to_have_class(re.compile(r"\bcurrent\b"))
    expect(page.locator("#machine-status")).to_have_text("completed")
    expect(page.locator("#live-badge")).to_have_text("ended")
    assert page.evaluate("window.__sameDocument") is True
    page.screenshot(path=str(tmp_path / "execution.png"), full_page=True)


def test_author_a_machine_graphically_and_publish_it(page: Page, studio: LiveStudio) -> None:
    team = studio.team("machine-authors")
    sign_in(page, studio.user(team, Role.AUTHOR))
    expect(page.locator("details.new-definition")).to_have_attribute("open", "")  # a new team
    page.get_by_label("Name", exact=True).fill("drawn.approval")
    page.get_by_label("Kind").select_option("machine")
    page.get_by_role("button", name="Create draft").click()
    expect(page.locator("#draft-status")).to_contain_text("Valid")
    expect(page.locator("svg.state-diagram .node")).to_have_count(2)

    page.get_by_label("Name", exact=True).nth(1).fill("Review")
    page.locator("#new-state-fields").fill("reminders: integer")
    page.get_by_role("button", name="Add state").click()
    review = page.locator("#state-Review")
    expect(review).to_have_class(re.compile(r"\binvalid\b.*\bselected\b"))
    expect(review.locator(".badge")).to_have_text("1")
    expect(page.locator("#state-problems")).to_contain_text("Review is unreachable from Start")
    expect(page.locator("#publish-button")).to_be_disabled()
    page.get_by_role("button", name="Undo").click()  # the state was a mistake...
    expect(page.locator("svg.state-diagram .node")).to_have_count(2)
    expect(page.locator("#redo-button")).to_be_enabled()
    page.keyboard.press("Control+Shift+Z")  # ...or not: redo, as in the step-list editor
    expect(page.locator("#state-Review")).to_have_count(1)
    expect(page.locator("#redo-button")).to_be_disabled()
    page.get_by_role("link", name="Select state Start").click()
    problems = page.locator("#draft-problems .problem-list")
    expect(problems).to_be_hidden()  # the pill's count first; it opens to the list
    page.get_by_text("1 problem", exact=True).click()
    expect(problems).to_contain_text("Review is unreachable from Start")
    problems.get_by_role("link", name="Review").click()  # to the state it concerns
    expect(page.locator("#state-problems")).to_contain_text("Review is unreachable")

    page.get_by_role("link", name="Select state Start").click()
    page.get_by_label("Add an edge to").select_option("Review")
    page.get_by_role("button", name="Add edge").click()
    page.get_by_role("link", name="Select state Review").click()
    page.get_by_label("Add an edge to").select_option("Done")
    page.get_by_role("button", name="Add edge").click()
    page.get_by_label("Timer (seconds; empty for none)").fill("120")
    page.get_by_role("button", name="Save state").click()
    expect(page.locator("#draft-status")).to_contain_text("Valid")
    expect(page.locator("#state-Review")).not_to_have_class(re.compile(r"\binvalid\b"))
    expect(page.locator("#state-Review .timer-badge")).to_have_text("2 min")
    assert page.locator("#state-Review .timer-badge").evaluate(BADGE_FITS)
    expect(page.locator("#edge-Start--Review")).to_have_count(1)

    page.get_by_role("button", name="Publish").click()
    page.wait_for_url("**/definitions/drawn.approval/versions/1?published=new")
    expect(page.locator("svg.state-diagram .node")).to_have_count(3)
    expect(page.locator("#state-Review .timer-badge")).to_have_text("2 min")


def test_the_states_panel_of_a_version_fits_its_text_at_1280_and_390_px(
    page: Page, studio: LiveStudio
) -> None:
    """Each state's fields and edges wrap inside the States panel: the edges of a state
    with many ("→ InReview, Approved, Rejected, Expired") once ran past its right edge
    and were cut off."""
    operator_with_approval(page, studio, "machine-panel", "approval_panel")
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 800})
        page.goto("/definitions/approval_panel/versions/1")
        outline = page.locator("#states-outline")
        edges = outline.locator("[data-state='InReview'] .state-edges")
        expect(edges).to_have_text("→ InReview, Approved, Rejected, Expired")
        assert outline.evaluate("e => e.scrollWidth <= e.clientWidth"), f"cut off at {width} px"
        assert edges.evaluate(
            "e => e.getBoundingClientRect().right <= e.closest('ol').getBoundingClientRect().right"
        ), f"the edges run past the panel at {width} px"


def test_submit_a_machine_from_the_studio_and_cancel_it_with_a_reason(
    page: Page, studio: LiveStudio
) -> None:
    """Started from the studio's form, a machine's execution shows its initial state;
    the operator's cancel asks for a reason, and the audit trail keeps it while the
    declared compensation is due (no worker here runs the machine's code)."""
    operator_with_approval(page, studio, "machine-ops", "approval_cancel")

    page.goto("/instances")
    page.get_by_role("link", name="Start an instance").click()
    page.get_by_label("Definition version").select_option("approval_cancel@1")
    page.get_by_label("Instance id").fill("cancel-me")
    page.get_by_label("Input (JSON)").fill('{"input": "doc", "parent": "doc-1"}')
    page.get_by_role("button", name="Start").click()
    page.wait_for_url("**/instances/cancel-me")
    expect(page.locator("#state-Submitted")).to_have_class(re.compile(r"\bcurrent\b"))
    expect(page.locator("#machine-status")).to_have_text("running")

    settled(page)
    page.locator("[data-offer='cancel']").click()
    expect(page.locator("#confirm-effect")).to_be_visible()
    settled(page)
    page.get_by_label("Reason").fill("withdrawn by its author")
    page.locator("#confirm-button").click()

    expect(page.locator("#machine-status")).to_have_text("cancelling")
    expect(page.locator("#audit-table")).to_contain_text("withdrawn by its author")


ARROW_TIP = """edge => {
    const path = document.querySelector(`#${edge} .edge`);
    const length = path.getTotalLength();
    const [tip, back] = [length, length - 1].map(at => path.getPointAtLength(at));
    const m = path.getScreenCTM(), norm = Math.hypot(tip.x - back.x, tip.y - back.y);
    const on = (p) => ({x: m.a * p.x + m.c * p.y + m.e, y: m.b * p.x + m.d * p.y + m.f});
    return {tip: on(tip), dx: (tip.x - back.x) / norm, dy: (tip.y - back.y) / norm};
}"""
"""Where an edge's arrow points (screen pixels) and which way (a unit vector)."""
PIXEL = """async ([png, x, y]) => {
    const image = new Image();
    image.src = "data:image/png;base64," + png;
    await image.decode();
    const canvas = document.createElement("canvas");
    canvas.width = image.width; canvas.height = image.height;
    const context = canvas.getContext("2d");
    context.drawImage(image, 0, 0);
    return [...context.getImageData(x, y, 1, 1).data.slice(0, 3)];
}"""
"""The colour of the pixel at (x, y) of a screenshot (base64 PNG), as the page decodes it."""


def test_a_taken_edge_points_in_its_own_colour_at_the_usual_size(
    page: Page, studio: LiveStudio
) -> None:
    """An arrowhead was drawn by its edge's width: a taken edge's (thicker) was twice the
    size of the others' and stayed grey on a blue line."""
    team = operator_with_approval(page, studio, "arrows", "approval_arrows")
    execution = studio.start_machine(team, "approval_arrows", {"input": "doc", "parent": "p"})
    studio.machine_event(
        execution, K.STATE_ENTERED, step="InReview", attempt=1, data='{"reminders":0}'
    )
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"/instances/{execution}")
    settled(page)
    expect(page.locator("#edge-Submitted--InReview")).to_have_class(re.compile(r"\btaken\b"))
    png = base64.b64encode(page.screenshot()).decode()

    def colour(edge: str, back: float, aside: float) -> list[int]:
        at = page.evaluate(ARROW_TIP, edge)
        x = at["tip"]["x"] - back * at["dx"] - aside * at["dy"]
        y = at["tip"]["y"] - back * at["dy"] + aside * at["dx"]
        return page.evaluate(PIXEL, [png, round(x), round(y)])

    def stroke(edge: str) -> list[int]:
        css = page.locator(f"#{edge} .edge").evaluate("path => getComputedStyle(path).stroke")
        return [int(n) for n in re.findall(r"\d+", css)[:3]]

    line, plain = stroke("edge-Submitted--InReview"), stroke("edge-InReview--Approved")
    assert not alike(line, plain)
    assert alike(colour("edge-Submitted--InReview", 4, 2.5), line), "the head in the line's colour"
    assert alike(colour("edge-InReview--Approved", 4, 2.5), plain)
    beside = colour("edge-Submitted--InReview", 12, 3.5)  # past the usual head, off the line
    assert not alike(beside, line), "a taken edge's head is no larger than the others'"


def alike(one: list[int], other: list[int]) -> bool:
    """Two colours that differ only by anti-aliasing."""
    return all(abs(a - b) <= 40 for a, b in zip(one, other, strict=True))
