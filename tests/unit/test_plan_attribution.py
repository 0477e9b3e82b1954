"""Each fired cell of a plan run gets its own verdict, from the findings about its step,
and the coverage heatmap shows that verdict, never the run's wholesale (no database:
the drill's scorecard entry is the input)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engine.model.files import load_definition
from studio.plans import heatmap
from studio.plans.saved import PlanRun
from verification.attribution import (
    FAILED,
    PASSED,
    UNATTRIBUTED,
    annotate,
    attribute,
    from_record,
)
from verification.plan import Plan
from verification.plan_drills import Drilled
from verification.plan_report import pin_outcome

ROOT = Path(__file__).resolve().parents[2]
ORDER = load_definition(ROOT / "examples" / "order_fulfillment.json")
APPROVAL = load_definition(ROOT / "examples" / "document_approval.json")
CHECKED = {"I1": [1, 0], "I3": [3, 0], "I9": [1, 0]}
HISTORY = [
    {"seq": 1, "kind": "instance_started", "step": "", "attempt": 0},
    {"seq": 2, "kind": "activity_scheduled", "step": "reserve", "attempt": 0},
    {"seq": 3, "kind": "attempt_started", "step": "reserve", "attempt": 1},
    {"seq": 4, "kind": "attempt_succeeded", "step": "reserve", "attempt": 1},
    {"seq": 5, "kind": "activity_scheduled", "step": "charge", "attempt": 0},
    {"seq": 6, "kind": "attempt_started", "step": "charge", "attempt": 1},
    {"seq": 7, "kind": "attempt_unknown", "step": "charge", "attempt": 1},
    {"seq": 8, "kind": "completed", "step": "", "attempt": 0},
]
DUPLICATE = (
    "charge: its effect happened 2 times under one idempotency key (plan-1/charge/1): the "
    "activity is not idempotent, and a retry with the same key repeated it"
)


def pin(label: str, fired: bool = True) -> dict[str, Any]:
    step, boundary, fault = label.split(":")
    return {"step": step, "boundary": boundary, "fault": fault, "hit": 1, "label": label,
            "fired": fired}  # fmt: skip


def drill(
    pins: list[dict[str, Any]],
    own: list[dict[str, str]] = (),
    checker: list[str] = (),
    invariants: dict[str, list[int]] = CHECKED,
    history: list[dict[str, Any]] = HISTORY,
) -> dict[str, Any]:
    """A plan drill's scorecard entry: its plan's own findings are its expectations, so
    they are among its failures too, before the checker's."""
    failures = [f["text"] for f in own] + list(checker)
    return {
        "id": "P-order-2-pins",
        "verdict": "failed" if failures else "passed",
        "failures": failures,
        "invariants": invariants,
        "extra": {"plan": {"pins": pins, "findings": list(own), "history": history}},
    }


def verdicts(entry: dict[str, Any], definition: Any = ORDER) -> dict[str, str]:
    return {":".join(c): v.verdict for c, v in attribute(entry, definition).items()}


def test_a_violation_is_its_own_cells_and_the_other_fired_cell_passed() -> None:
    entry = drill(
        [pin("reserve:after_handler:kill"), pin("charge:after_handler:kill")],
        own=[{"step": "charge", "text": DUPLICATE}],
    )

    assert verdicts(entry) == {
        "reserve:after_handler:kill": PASSED,
        "charge:after_handler:kill": FAILED,
    }
    assert attribute(entry, ORDER)[("charge", "after_handler", "kill")].why == DUPLICATE


def test_a_checker_violation_is_put_on_the_step_of_the_event_it_names() -> None:
    i2 = "I2 checkpoint once: plan-1: attempt_started of reserve recorded twice at 3"
    entry = drill(
        [pin("reserve:after_handler:kill"), pin("charge:after_handler:kill")], checker=[i2]
    )

    assert verdicts(entry) == {
        "reserve:after_handler:kill": FAILED,
        "charge:after_handler:kill": PASSED,
    }


def test_a_finding_about_no_fired_step_is_not_attributed_to_any_cell() -> None:
    """A violation naming the instance's end, or no event, could be any fault's."""
    i4 = "I4 terminal once: plan-1: completed but archived=False at 8"
    entry = drill(
        [pin("reserve:after_handler:kill"), pin("charge:after_handler:kill")],
        own=[{"step": "charge", "text": DUPLICATE}],
        checker=[i4],
    )

    found = attribute(entry, ORDER)
    assert found[("charge", "after_handler", "kill")].verdict == FAILED
    reserve = found[("reserve", "after_handler", "kill")]
    assert reserve.verdict == UNATTRIBUTED
    assert "name no step a pin fired on" in reserve.why and i4 in reserve.why


def test_a_finding_on_a_step_where_two_cells_fired_belongs_to_neither_alone() -> None:
    entry = drill(
        [pin("charge:after_claim:kill"), pin("charge:after_handler:kill")],
        own=[{"step": "charge", "text": DUPLICATE}],
    )

    found = attribute(entry, ORDER)
    assert {v.verdict for v in found.values()} == {UNATTRIBUTED}
    assert "where after_handler:kill fired too" in found[("charge", "after_claim", "kill")].why


def test_when_one_cell_fired_every_finding_is_its_own_and_unfired_pins_are_not() -> None:
    never = "pin notify:after_claim:kill never fired: the step was never claimed"
    i4 = "I4 terminal once: plan-1: completed but archived=False at 8"
    fired = [pin("reserve:after_handler:kill"), pin("notify:after_claim:kill", fired=False)]

    unreached = "B boundaries reached: kill at after_claim hit 1 never happened"
    unfired = drill(fired, own=[{"step": "notify", "text": never}], checker=[unreached])
    assert verdicts(unfired) == {"reserve:after_handler:kill": PASSED}
    assert verdicts(drill(fired, checker=[i4])) == {"reserve:after_handler:kill": FAILED}


def test_nothing_passes_where_the_checker_did_not_run() -> None:
    entry = drill(
        [pin("reserve:after_handler:kill")],
        checker=["check failed: OperationalError()"],
        invariants={},
    )

    (found,) = attribute(entry, ORDER).values()
    assert found.verdict == UNATTRIBUTED and "the checker did not run" in found.why


def test_a_machine_state_entered_is_the_advance_of_the_state_it_left() -> None:
    history = [
        {"seq": 1, "kind": "instance_started", "step": "", "attempt": 0},
        {"seq": 2, "kind": "state_entered", "step": "InReview", "attempt": 1},
        {"seq": 3, "kind": "state_entered", "step": "Approved", "attempt": 1},
        {"seq": 4, "kind": "completed", "step": "", "attempt": 0},
    ]
    i2 = "I2 checkpoint once: plan-1: state_entered Approved recorded twice at 3"
    entry = drill(
        [pin("Submitted:before_commit:kill"), pin("InReview:before_commit:kill")],
        checker=[i2],
        history=history,
    )

    assert verdicts(entry, APPROVAL) == {
        "Submitted:before_commit:kill": PASSED,
        "InReview:before_commit:kill": FAILED,
    }


def run(verdict: str, pins: list[dict[str, Any]]) -> PlanRun:
    return PlanRun("r-1", "two faults", 1, verdict, pins, datetime(2031, 1, 1, tzinfo=UTC))


def test_the_heatmap_shows_each_cells_recorded_verdict_not_the_runs() -> None:
    pins = [
        {**pin("reserve:after_handler:kill"), "verdict": PASSED, "why": "nothing"},
        {**pin("charge:after_handler:kill"), "verdict": FAILED, "why": DUPLICATE},
    ]

    steps = {s.step: s for s in heatmap.coverage(ORDER, [], [run("failed", pins)])}

    reserve = steps["reserve"].cells[("after_handler", "kill")]
    charge = steps["charge"].cells[("after_handler", "kill")]
    assert (reserve.status, reserve.symbol) == ("passed", "✓")
    assert (charge.status, charge.why) == ("failed", DUPLICATE)


def test_a_run_recorded_before_cells_had_verdicts_lends_its_own_only_where_it_can() -> None:
    one = [pin("reserve:after_handler:kill"), pin("notify:after_claim:kill", fired=False)]
    two = [pin("reserve:after_handler:kill"), pin("charge:after_handler:kill")]

    assert from_record("failed", one, one[0]).verdict == FAILED
    assert from_record("passed", two, two[0]).verdict == PASSED
    legacy = from_record("failed", two, two[0])
    assert legacy.verdict == UNATTRIBUTED and "2 cells fired" in legacy.why
    steps = {s.step: s for s in heatmap.coverage(ORDER, [], [run("failed", two)])}
    cell = steps["charge"].cells[("after_handler", "kill")]
    assert (cell.status, cell.symbol, cell.drilled) == ("unattributed", "?", True)


def test_the_command_line_prints_each_fired_pins_own_verdict_beside_it() -> None:
    """``wayline drill run`` keeps each fired pin's verdict in the scorecard and prints
    it beside the pin; the finding it rests on is printed once, among the findings."""
    entry = drill(
        [
            pin("reserve:after_handler:kill"),
            pin("charge:after_handler:kill"),
            pin("notify:after_claim:kill", fired=False),
        ],
        own=[{"step": "charge", "text": DUPLICATE}],
    )
    entry["extra"]["plan"]["definition"] = "order.fulfillment@1"
    annotate({"drills": [entry]}, [Drilled(Plan("order.fulfillment@1"), ORDER)])

    pins = entry["extra"]["plan"]["pins"]
    assert [(p["label"], pin_outcome(p)) for p in pins] == [
        (
            "reserve:after_handler:kill",
            "fired, passed: nothing the run found is about this step (its findings are other "
            "steps' where their pins fired)",
        ),
        ("charge:after_handler:kill", "fired, FAILED: its finding is below"),
        ("notify:after_claim:kill", "NEVER FIRED"),
    ]
    assert pins[1]["why"] == DUPLICATE  # the studio's heatmap shows the finding itself
