"""Drill plans on a state machine: its steps are its states that advance, what is
refused (and how it says so), the way its stubs drive it and its full matrix (no
database: ``verification.plan`` and ``verification.plan_machines`` are pure)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.model.definitions import Definition
from engine.model.files import load_definition
from engine.model.validation import parse_definition
from studio.plans import heatmap
from tests.unit.plan_refusals import assert_pin_refused
from verification import plan as plans
from verification import plan_machines as machines

ROOT = Path(__file__).resolve().parents[2]
APPROVAL = load_definition(ROOT / "examples" / "document_approval.json")
MANIFEST = machines.manifest_of(APPROVAL)


def _plan(**fields: object) -> plans.Plan:
    return plans.parse({"definition": "document_approval@1", "input": "v1", **fields})


def test_a_machines_steps_are_its_states_that_advance() -> None:
    assert plans.steps_of(APPROVAL) == ["Submitted", "InReview"]
    assert plans.boundaries_of(APPROVAL, "InReview") == machines.MACHINE_BOUNDARIES
    assert plans.boundaries_of(APPROVAL, "Approved") == ()


def test_without_stubs_the_machine_takes_the_shortest_way_to_an_end() -> None:
    assert machines.walk(MANIFEST, {}) == ["Submitted", "InReview"]
    assert machines.entered(MANIFEST, "InReview", None) == ("Approved", {"by": ""})
    rejected = {"state": "Rejected", "fields": {"reason": "late"}}
    assert machines.entered(MANIFEST, "InReview", rejected) == ("Rejected", {"reason": "late"})


def test_a_stub_that_fails_for_good_ends_the_walk_there() -> None:
    fail = plans.Stub("fail")
    assert machines.walk(MANIFEST, {"Submitted": fail}) == ["Submitted"]
    once = plans.Stub("fail", times=1)
    assert machines.walk(MANIFEST, {"Submitted": once}) == ["Submitted", "InReview"]


def test_a_stub_that_loops_is_walked_once() -> None:
    again = plans.Stub(result={"state": "InReview", "fields": {"reminders": 1}})
    assert machines.walk(MANIFEST, {"InReview": again}) == ["Submitted", "InReview"]


@pytest.mark.parametrize(
    ("pin", "problem"),
    [
        ("Approved:before_commit:kill", "'Approved' is a terminal state: it never advances"),
        ("Nope:before_commit:kill", "'Nope' is no state of the machine; states: Submitted,"),
        ("InReview:after_handler:kill", "a machine's advance does not reach after_handler; it"),
        ("InReview:after_attempt_start:kill", "does not reach after_attempt_start"),
        ("InReview:before_signal_ack:kill", "does not reach before_signal_ack"),
        ("InReview:before_commit:duplicate_signal", "'duplicate_signal' does not apply to a"),
        ("InReview:after_commit:sever_before_commit", "cuts a COMMIT, and at after_commit"),
        ("InReview:in_lease_renewal:kill", "give stubs.InReview behaviour slow with seconds"),
        ("InReview:after_handler:restart_database", "does not reach after_handler; it reach"),
    ],
)
def test_a_pin_that_cannot_run_on_a_machine_is_refused_saying_why(pin: str, problem: str) -> None:
    assert_pin_refused(_plan(pins=[pin]), APPROVAL, pin, problem)


def test_a_pin_on_a_state_the_stubs_never_reach_is_refused_naming_the_way() -> None:
    plan = _plan(stubs={"Submitted": {"behaviour": "fail"}}, pins=["InReview:after_claim:kill"])
    with pytest.raises(plans.PlanInvalid) as caught:
        plans.check_against(plan, APPROVAL)
    assert caught.value.problems == [
        "pins[0] InReview:after_claim:kill: InReview never advances with this plan's stubs: "
        "the execution goes Submitted"
    ]


def test_what_does_not_fit_a_machine_is_refused_with_its_path() -> None:
    plan = _plan(
        input=7,
        answers={"InReview": True},
        stubs={
            "Approved": {},
            "Submitted": {"behaviour": "unknown", "idempotent": False},
            "InReview": {"result": {"state": "Approved", "fields": {"by": 1, "at": "x"}}},
        },
    )
    with pytest.raises(plans.PlanInvalid) as caught:
        plans.check_against(plan, APPROVAL)
    assert caught.value.problems == [
        "answers: document_approval is a state machine: it waits for no signal or approval",
        "input: must be text (the machine's input is text)",
        "stubs.Approved: no state 'Approved' that advances; states: Submitted, InReview",
        "stubs.Submitted.behaviour: a machine's advance commits with its state or not at all, "
        "so it is never unknown; one of succeed, fail, slow",
        "stubs.Submitted.idempotent: a machine's advance has no effect outside its "
        "transaction to repeat; leave it out",
        "stubs.InReview.result: Approved has no field 'at'; fields.by must be text",
    ]


def test_a_stub_result_names_a_state_the_machine_may_enter() -> None:
    with pytest.raises(plans.PlanInvalid) as caught:
        plans.check_against(_plan(stubs={"Submitted": {"result": "Approved"}}), APPROVAL)
    assert caught.value.problems == [
        "stubs.Submitted.result: Submitted cannot enter 'Approved'; it may enter InReview"
    ]


def test_a_machines_own_code_is_not_drilled_in_a_throwaway_schema() -> None:
    plan = _plan(app="examples.documents:app")
    with pytest.raises(plans.PlanInvalid, match="drill it with stubs"):
        plans.check_against(plan, APPROVAL)


def test_the_full_matrix_of_a_machine_pins_every_state_that_advances() -> None:
    full = plans.matrix(plans.parse({"definition": "document_approval@1"}), APPROVAL)
    plans.check_against(full, APPROVAL)
    assert full.input == ""  # an input of the machine's type
    labels = [p.label for p in full.pins]
    assert len(labels) == len(set(labels))
    assert {p.step for p in full.pins} == {"Submitted", "InReview"}
    assert {p.step for p in full.pins if p.boundary == "after_claim"} == {"Submitted", "InReview"}
    assert {p.boundary for p in full.pins} == {"after_claim", "before_commit", "after_commit"}
    assert "InReview:before_commit:sever_after_commit" in labels


@given(st.lists(st.sampled_from(plans.matrix(_plan(), APPROVAL).pins), max_size=6))
def test_any_pins_of_the_matrix_fit_the_machine(pins: list[plans.Pin]) -> None:
    plans.check_against(plans.Plan("document_approval@1", input="v1", pins=tuple(pins)), APPROVAL)


def _escalating() -> Definition:
    """The approval machine with ``Escalated``, which no default way passes through."""
    document = json.loads((ROOT / "examples" / "document_approval.json").read_text())
    document["state"]["variants"].append({"name": "Escalated"})
    document["transitions"]["InReview"].append("Escalated")
    document["transitions"]["Escalated"] = ["Approved"]
    return parse_definition(document)


def test_a_state_off_the_default_way_is_pinned_once_a_stub_leads_there() -> None:
    escalating = _escalating()
    pin = ["Escalated:before_commit:kill"]
    with pytest.raises(plans.PlanInvalid, match="Escalated never advances with this plan"):
        plans.check_against(_plan(pins=pin), escalating)
    plans.check_against(_plan(pins=pin, stubs={"InReview": {"result": "Escalated"}}), escalating)


def test_the_heatmap_of_a_machine_has_every_state_that_advances_and_its_cells() -> None:
    steps = {s.step: s for s in heatmap.coverage(_escalating(), [], [])}
    assert list(steps) == ["Submitted", "InReview", "Escalated"]
    escalated = steps["Escalated"]
    assert escalated.kind == "state"
    assert escalated.boundaries == [b.value for b in machines.MACHINE_BOUNDARIES]
    assert escalated.cells[("before_commit", "kill")].applicable  # another plan may lead there
    assert escalated.cells[("in_lease_renewal", "kill")].applicable
    assert not escalated.cells[("before_commit", "duplicate_signal")].applicable
