"""Operating instances in the browser, against a studio whose worker really runs them.

Start the example from the UI and watch its steps change colour without reloading;
approve, send a signal from the form and see the race resolve; pause with a reason,
see the audit row, resume; cancel and watch the compensations run latest first; force
a dead letter, retry it and see the instance complete; run a crash drill and read its
scorecard; and an operator action without the role is refused.
"""

from __future__ import annotations

import re
import time
import uuid
from pathlib import Path

from playwright.sync_api import Page, expect

from engine.api.client import Client
from engine.decide.operator_actions import Action
from engine.model.identifiers import team_instance_id
from engine.worker.activities import ActivityRegistry
from studio.instances.step_states import step_states
from studio.roles import Role
from tests.browser.conftest import screenshot, settled, sign_in
from tests.studio.live import LiveStudio

EXAMPLE = "order.fulfillment"
WORK_SECONDS = 30_000
"""How long real work (retries with backoff, compensations) may take to show, in ms."""
SAME_DOCUMENT = "window.__sameDocument"
LATE_TARGET = "notifications.late"
"""A target the studio's worker does not run, so its work waits for the test's worker."""


def at_approval(studio: LiveStudio, team: str, input: object = None) -> str:
    """An example instance that has run up to its approval (reserve and charge done).

    The database announces no such state, so this polls it; the deadline only bounds
    how long a failure takes."""
    instance_id = studio.start(team, EXAMPLE, f"order-{uuid.uuid4().hex[:8]}", input or {})
    deadline = time.monotonic() + WORK_SECONDS / 1000
    while time.monotonic() < deadline:
        state = studio.run(lambda store: Client(store).inspect(instance_id))
        if step_states(state)["manager_approval"].state == "waiting-approval":
            return instance_id
        time.sleep(0.2)
    raise AssertionError(f"{instance_id} did not reach its approval")


def open_as(page: Page, studio: LiveStudio, team: str, role: Role, instance_id: str) -> str:
    username = studio.user(team, role)
    sign_in(page, username)
    page.goto(f"/instances/{instance_id}")
    page.evaluate(f"{SAME_DOCUMENT} = true")
    return username


def open_at_approval(page: Page, studio: LiveStudio, team: str, role: Role) -> tuple[str, str]:
    """An instance run up to its approval, open in ``page`` for a user of ``team`` with
    ``role``: the instance id and the username."""
    instance_id = at_approval(studio, team)
    return instance_id, open_as(page, studio, team, role, instance_id)


ONE_LIST = """() => {
  const said = document.querySelector("#confirm-effect li");
  const detail = document.querySelector("#confirm-preview .preview-details li");
  return !detail || said.getBoundingClientRect().left === detail.getBoundingClientRect().left;
}"""
"""Whether what an action does, in words, and the details of its dry run under them
start at one indent (they read as one list; the details stood further left)."""


def act(page: Page, offer: str, reason: str) -> None:
    """Open an action's confirmation, read its effect, give the reason and confirm."""
    settled(page)
    page.locator(f"[data-offer='{offer}']").click()
    expect(page.locator("#confirm-effect")).to_be_visible()
    assert page.evaluate(ONE_LIST), "the effect and its details are indented alike"
    settled(page)
    page.locator("#confirm-form").get_by_label("Reason").fill(reason)
    page.locator("#confirm-button").click()


def still_same_document(page: Page) -> None:
    assert page.evaluate(SAME_DOCUMENT) is True, "the page was reloaded"


def test_start_the_example_and_watch_its_steps_change_colour(
    page: Page, studio: LiveStudio, shop: str
) -> None:
    sign_in(page, studio.user(shop, Role.OPERATOR))
    page.goto("/instances")
    page.get_by_role("link", name="Start an instance").click()
    page.get_by_label("Definition version").select_option(f"{EXAMPLE}@1")
    instance_id = f"ui-{uuid.uuid4().hex[:8]}"
    page.get_by_label("Instance id").fill(instance_id)
    page.get_by_label("Input (JSON)").fill('{"fail": {"payments.charge": 2}}')
    page.get_by_role("button", name="Start").click()
    page.wait_for_url(f"**/instances/{instance_id}")
    page.evaluate(f"{SAME_DOCUMENT} = true")

    charge = page.locator("#step-charge")
    expect(charge).to_have_class(re.compile(r"\bstate-succeeded\b"), timeout=WORK_SECONDS)
    expect(page.locator("#step-manager_approval")).to_have_class(
        re.compile(r"\bstate-waiting-approval\b")
    )
    attempts = page.locator("#attempts-table")
    expect(attempts.locator("tr[data-attempt='activity:charge:1']")).to_contain_text(
        "scripted-failure"
    )
    expect(attempts.locator("tr[data-attempt='activity:charge:3']")).to_contain_text("succeeded")
    expect(page.locator("#instance-position")).to_contain_text("waiting for approval")
    expect(page.locator("#history-rows tr.kind-attempt_succeeded")).to_have_count(4)

    # Approved elsewhere, after the page has shown the wait: the nodes follow in place.
    # (Not the charge's retries: how many of them the page sees depends on how soon it
    # loads after the start.)
    stored = team_instance_id(shop, instance_id)  # started in the studio, so in the team's ids
    studio.command(stored, Action.APPROVE, "approved on the phone", step="manager_approval")
    expect(page.locator("#step-manager_approval")).to_have_class(re.compile(r"\bstate-succeeded\b"))
    expect(page.locator("#step-shipped")).to_have_class(re.compile(r"\bstate-waiting-signal\b"))
    still_same_document(page)


def test_approve_then_send_a_signal_and_the_race_resolves(
    page: Page, studio: LiveStudio, shop: str, tmp_path: Path
) -> None:
    instance_id = at_approval(studio, shop, {"fail": {"payments.charge": 1}})
    page.set_viewport_size({"width": 1400, "height": 1000})
    open_as(page, studio, shop, Role.OPERATOR, instance_id)
    expect(page.locator("#step-manager_approval")).to_have_class(
        re.compile(r"state-waiting-approval")
    )
    page.get_by_role("button", name="Fit").click()
    screenshot(page, "instance.png", tmp_path)

    act(page, "approve:manager_approval", "approved on the phone")
    expect(page.locator("#audit-table")).to_contain_text("approved on the phone")
    expect(page.locator("#step-shipped")).to_have_class(re.compile(r"state-waiting-signal"))
    expect(page.locator("#step-delivery_timeout")).to_have_class(re.compile(r"state-waiting-timer"))

    settled(page)
    page.get_by_label("Payload for shipped").fill('{"carrier": "DHL"}')
    page.get_by_label("Reason for shipped").fill("the courier scanned it")
    page.get_by_role("button", name="Send shipped").click()
    expect(page.locator("#race-winner-delivery")).to_have_text("shipped")
    expect(page.locator("#audit-table")).to_contain_text("the courier scanned it")
    expect(page.locator("#step-delivery_timeout")).to_have_class(re.compile(r"\bstate-cancelled\b"))
    expect(page.locator("#step-notify")).to_have_class(
        re.compile(r"\bstate-succeeded\b"), timeout=WORK_SECONDS
    )
    expect(page.locator("#instance-status")).to_have_text("completed")
    expect(page.locator("#live-badge")).to_have_text("ended")
    still_same_document(page)


def test_pause_with_a_reason_see_the_audit_row_and_resume(
    page: Page, studio: LiveStudio, shop: str
) -> None:
    _, username = open_at_approval(page, studio, shop, Role.OPERATOR)
    act(page, "pause", "the customer asked us to wait")
    newest = page.locator("#audit-table tbody tr").first
    expect(newest).to_contain_text("the customer asked us to wait")
    expect(newest).to_contain_text(username)
    expect(newest).to_contain_text("pause")
    expect(page.locator("#instance-status")).to_have_text("paused")
    expect(page.locator("[data-offer='pause']")).to_have_count(0)

    act(page, "resume", "the customer is ready")
    expect(page.locator("#audit-table tbody tr").first).to_contain_text("resume")
    expect(page.locator("#audit-table tbody tr")).to_have_count(2)
    expect(page.locator("#instance-status")).to_have_text("running")
    still_same_document(page)


def test_an_action_is_confirmed_from_the_keyboard_alone(
    page: Page, studio: LiveStudio, shop: str
) -> None:
    """The confirmation's first field takes the focus: it stayed on the action bar, so
    typing went nowhere and Tab, Enter opened the next action (Cancel) instead."""
    open_at_approval(page, studio, shop, Role.OPERATOR)
    settled(page)
    page.locator("[data-offer='approve:manager_approval']").focus()
    page.keyboard.press("Enter")
    expect(page.get_by_label("Approval payload (JSON, optional)")).to_be_focused()
    page.locator("[data-offer='pause']").focus()
    page.keyboard.press("Enter")
    expect(page.locator("#confirm-form").get_by_label("Reason")).to_be_focused()
    page.keyboard.type("paused from the keyboard")
    page.keyboard.press("Tab")
    expect(page.locator("#confirm-button")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("#audit-table tbody tr").first).to_contain_text("paused from the keyboard")
    expect(page.locator("#instance-status")).to_have_text("paused")


def test_a_refused_action_says_each_problem_beside_its_field(
    page: Page, studio: LiveStudio, shop: str
) -> None:
    """No reason and a payload that is not JSON: both said at once, each beside its
    field, which the first of them focuses (one message above the form named only the
    reason, and the focus went to the payload it did not mention)."""
    open_at_approval(page, studio, shop, Role.OPERATOR)
    settled(page)
    page.locator("[data-offer='approve:manager_approval']").click()
    payload = page.get_by_label("Approval payload (JSON, optional)")
    expect(payload).to_be_focused()
    payload.fill('{"ok": tru')
    reason = page.locator("#confirm-form").get_by_label("Reason")
    reason.evaluate("field => field.removeAttribute('required')")  # as a blank one of spaces
    reason.fill("   ")
    page.locator("#confirm-button").click()
    expect(page.locator("#confirm-payload-error")).to_contain_text("not valid JSON")
    expect(page.locator("#confirm-reason-error")).to_contain_text("a reason of 1 to 500")
    expect(payload).to_have_attribute("aria-invalid", "true")
    expect(reason).to_have_attribute("aria-describedby", "confirm-reason-error")
    expect(payload).to_be_focused()
    expect(page.locator("#confirm-error")).to_have_count(0)
    expect(payload).to_have_value('{"ok": tru')
    payload.fill('{"ok": true}')
    reason.fill("checked with the customer")
    page.locator("#confirm-button").click()
    expect(page.locator("#audit-table tbody tr").first).to_contain_text("checked with the customer")


def test_a_confirmation_opened_as_its_own_page_confirms(
    page: Page, studio: LiveStudio, shop: str
) -> None:
    """The confirmation at its own address (a new tab, signing in again after the
    session ended): its Confirm did nothing, since htmx aimed the answer at the
    instance page's action panel, which that page does not have."""
    instance_id, username = open_at_approval(page, studio, shop, Role.OPERATOR)
    page.goto(f"/instances/{instance_id}/actions/pause")
    settled(page)
    page.locator("#confirm-form").get_by_label("Reason").fill("paused from its own tab")
    page.locator("#confirm-button").click()
    page.wait_for_url(f"**/instances/{instance_id}#instance-audit")
    newest = page.locator("#audit-table tbody tr").first
    expect(newest).to_contain_text("paused from its own tab")
    expect(newest).to_contain_text(username)
    expect(page.locator("#instance-status")).to_have_text("paused")


def test_cancel_and_watch_the_compensations_run_latest_first(
    page: Page, studio: LiveStudio, shop: str
) -> None:
    open_at_approval(page, studio, shop, Role.OPERATOR)
    page.locator("[data-offer='cancel']").click()
    expect(page.locator("#confirm-effect")).to_contain_text(
        "charge (by payments.refund), then reserve (by inventory.release)"
    )
    expect(page.locator("#confirm-effect")).to_contain_text("Stops waiting for: manager_approval")
    settled(page)
    page.locator("#confirm-form").get_by_label("Reason").fill("the order was withdrawn")
    page.locator("#confirm-button").click()

    expect(page.locator("#instance-status")).to_have_text("cancelled", timeout=WORK_SECONDS)
    ran = page.locator("#compensations-list li")
    expect(ran).to_have_count(2)
    expect(ran.nth(0)).to_have_attribute("data-step", "charge")
    expect(ran.nth(1)).to_have_attribute("data-step", "reserve")
    expect(ran.nth(0)).to_contain_text("succeeded")
    expect(ran.nth(1)).to_contain_text("succeeded")
    for step in ("charge", "reserve"):
        expect(page.locator(f"#step-{step}")).to_have_class(re.compile(r"\bstate-compensated\b"))
    compensated = page.locator("#history-rows tr.kind-compensation_succeeded td:nth-child(4)")
    expect(compensated).to_have_text(["charge", "reserve"])
    still_same_document(page)


def test_force_a_dead_letter_retry_it_and_see_it_complete(
    page: Page, studio: LiveStudio, shop: str
) -> None:
    name = f"dlq.demo-{uuid.uuid4().hex[:6]}"
    late = ActivityRegistry()  # no worker runs its target until the dead letter is retried
    late.register(LATE_TARGET, lambda request: {"sent": True})
    studio.publish(shop, notifying(name, LATE_TARGET))
    instance_id = studio.start(shop, name)
    assert studio.overdue(instance_id) == 1  # as if no worker had run for a day
    sign_in(page, studio.user(shop, Role.OPERATOR))
    page.goto("/dead-letters")
    expect(page.locator("#dead-letter-groups")).to_contain_text(f"{name}@1")
    row = page.locator(f"tr[data-work^='{instance_id}#']")
    expect(row).to_contain_text(instance_id)
    row.locator("input[type=checkbox]").check()
    page.get_by_label("Reason").fill("the workers are back")
    with studio.worker(late):
        page.get_by_role("button", name="Resolve chosen").click()
        expect(page.locator("#resolve-results")).to_contain_text("retried")
        expect(page.locator("#resolutions-table")).to_contain_text("the workers are back")

        page.get_by_role("link", name=instance_id).first.click()
        expect(page.locator("#instance-status")).to_have_text("completed", timeout=WORK_SECONDS)
        expect(page.locator("#step-notify")).to_have_class(re.compile(r"\bstate-succeeded\b"))


def notifying(name: str, target: str = "notifications.send") -> dict:
    """A definition of one notification, by ``target``."""
    return {
        "name": name,
        "version": "1",
        "mode": "orchestration",
        "steps": [
            {
                "name": "notify",
                "kind": "activity",
                "target": target,
                "timeout": "10s",
                "input_limit": 1024,
                "result_limit": 1024,
                "retry": {"max_attempts": 3, "initial_delay": "1s", "max_delay": "5s"},
            },
        ],
    }


def test_run_a_crash_drill_and_read_its_scorecard(
    page: Page, studio: LiveStudio, shop: str, tmp_path: Path
) -> None:
    drill = "D1-kill-after_handler-s0"
    page.set_viewport_size({"width": 1400, "height": 1000})
    sign_in(page, studio.user(shop, Role.OPERATOR))
    page.goto("/drills")
    family = page.locator("fieldset.family").filter(has=page.locator("legend input[value='D1']"))
    family.get_by_text("Choose single drills").click()
    family.get_by_label(re.compile(re.escape(drill))).check()
    page.get_by_role("button", name="Run the chosen drills").click()
    page.wait_for_url("**/drills/jobs/*")
    verdict = page.locator("#scorecard-verdict")
    expect(verdict).to_contain_text("drills: 1 passed, 0 failed", timeout=120_000)
    expect(page.locator(f"#drill-results tr[data-drill='{drill}']")).to_contain_text("passed")
    expect(page.locator("#invariants-table")).to_contain_text("no lost work")
    expect(page.locator("#faults-table")).to_contain_text("after_handler")
    screenshot(page, "drill-scorecard.png", tmp_path)

    page.goto("/drills")
    expect(page.locator("#runs-table")).to_contain_text("1 passed, 0 failed")


def test_an_operator_action_without_the_role_is_refused(
    page: Page, studio: LiveStudio, shop: str
) -> None:
    instance_id, _ = open_at_approval(page, studio, shop, Role.VIEWER)
    expect(page.locator("#instance-actions")).to_contain_text("need the operator role")
    expect(page.locator("[data-offer]")).to_have_count(0)
    expect(page.locator(".signal-form")).to_have_count(0)
    headers = page.locator("body").get_attribute("hx-headers") or ""
    csrf = re.search(r'"X-CSRF-Token": "([^"]+)"', headers).group(1)
    forged = page.request.post(
        f"/instances/{instance_id}/actions/cancel",
        form={"_csrf": csrf, "reason": "not mine to cancel"},
    )
    assert forged.status == 403
    page.reload()
    expect(page.locator("#instance-status")).to_have_text("running")
    expect(page.locator("#instance-audit")).to_contain_text("No operator has acted")


def parent_of_a_child(studio: LiveStudio, shop: str) -> str:
    """A published parent whose one step runs a child to completion; the parent's name."""
    child = notifying(f"child.demo-{uuid.uuid4().hex[:6]}")
    fingerprint = studio.publish(shop, child)
    parent = {
        "name": f"parent.demo-{uuid.uuid4().hex[:6]}",
        "version": "1",
        "mode": "orchestration",
        "steps": [
            {
                "name": "ship",
                "kind": "child",
                "target": child["name"],
                "timeout": "1m",
                "input_limit": 1024,
                "result_limit": 1024,
                "retry": {"max_attempts": 2, "initial_delay": "1s", "max_delay": "2s"},
                "child_definition": {
                    "name": child["name"],
                    "version": "1",
                    "fingerprint": fingerprint,
                },
            }
        ],
    }
    studio.publish(shop, parent)
    return parent["name"]


def open_finished_parent(page: Page, studio: LiveStudio, shop: str) -> str:
    """An instance of ``parent_of_a_child``, open in ``page`` for a viewer once it has
    completed (its child with it); the parent's instance id."""
    parent_id = studio.start(shop, parent_of_a_child(studio, shop))
    open_as(page, studio, shop, Role.VIEWER, parent_id)
    expect(page.locator("#instance-status")).to_have_text("completed", timeout=WORK_SECONDS)
    return parent_id


def test_a_child_instance_links_to_its_parent_and_back(
    page: Page, studio: LiveStudio, shop: str
) -> None:
    parent_id = open_finished_parent(page, studio, shop)
    page.locator("#children-table").get_by_role("link", name=f"{parent_id}/ship").click()
    expect(page.locator("h1")).to_contain_text(f"{parent_id}/ship")
    expect(page.locator("#instance-status")).to_have_text("completed")
    page.locator("#parent-link").click()
    expect(page.locator("h1")).to_contain_text(parent_id)


def test_the_list_shows_children_under_their_parents(
    page: Page, studio: LiveStudio, shop: str
) -> None:
    parent_id = open_finished_parent(page, studio, shop)
    page.goto("/instances?view=all")
    page.get_by_label("Children under their parents").check()
    page.get_by_role("button", name="Filter").click()
    expect(page).to_have_url(re.compile(r"nest=1"))
    parent_row = page.locator("#instances-table tbody tr", has_text=parent_id).first
    child_row = parent_row.locator("xpath=following-sibling::tr[1]")
    expect(child_row).to_have_attribute("data-parent", parent_id)
    expect(child_row.locator("td.child-row")).to_contain_text(f"↳ {parent_id}/ship")


def test_an_open_page_stops_following_once_its_session_is_signed_out(
    page: Page, studio: LiveStudio, shop: str
) -> None:
    """An instance page left open went on receiving the instance's updates after its
    session was signed out in another tab; its live badge now says it stopped, and the
    page takes no update made after the sign-out."""
    instance_id, _ = open_at_approval(page, studio, shop, Role.VIEWER)
    expect(page.locator("#live-badge")).to_have_text(re.compile("live"))
    other = page.context.new_page()
    other.goto("/")
    other.get_by_role("button", name="Sign out").click()
    other.wait_for_url(re.compile("/login"))
    studio.command(
        instance_id, Action.APPROVE, "approved after the sign-out", step="manager_approval"
    )
    expect(page.locator("#live-badge")).to_have_text("stopped: signed out, reload to sign in")
    expect(page.locator("#step-manager_approval")).to_have_class(
        re.compile(r"state-waiting-approval")
    )
    expect(page.locator("main")).not_to_contain_text("approved after the sign-out")
