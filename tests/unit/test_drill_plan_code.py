"""Drill plans on a code-first workflow: its steps are its journaled calls and the
signals it waits for, what is refused (and how it says so) and its full matrix (no
database: ``verification.plan`` and ``verification.plan_code`` are pure)."""

from __future__ import annotations

import pytest

from examples.order_saga import app
from tests.unit.plan_refusals import assert_pin_refused
from verification import plan as plans
from verification import plan_code

SAGA = next(flow.definition for flow in app.workflows if flow.name == "order-saga")


def _plan(**fields: object) -> plans.Plan:
    return plans.parse({"definition": "order-saga@1", "app": "examples.order_saga:app", **fields})


def test_a_runs_steps_are_its_first_calls_then_its_signals() -> None:
    assert plan_code.step_names(SAGA) == ["reserve", "charge", "settle"]
    assert plans.steps_of(SAGA)[:3] == ["reserve.1", "charge.1", "settle.1"]
    assert {"paid", "cancelled", "received"} <= set(plan_code.signals(SAGA))
    assert plans.boundaries_of(SAGA, "charge.2") == plan_code.CODE_STEP_BOUNDARIES
    assert plans.boundaries_of(SAGA, "paid") == plan_code.SIGNAL_BOUNDARIES
    assert plans.boundaries_of(SAGA, "charge") == ()


@pytest.mark.parametrize(
    ("pin", "problem"),
    [
        ("charge:after_handler:kill", "no step call or signal 'charge'; the code has reserve.1,"),
        ("ship.1:after_handler:kill", "no step call or signal 'ship.1'"),
        ("charge.101:after_handler:kill", "up to 100"),
        ("charge.1:after_claim:kill", "a step call does not reach after_claim; it reaches"),
        ("charge.1:in_lease_renewal:kill", "a step call does not reach in_lease_renewal"),
        ("paid:after_handler:kill", "a signal does not reach after_handler; it reaches before_s"),
        ("charge.1:after_commit:sever_before_commit", "cuts a COMMIT, and at after_commit"),
        ("charge.1:after_handler:duplicate_signal", "duplicate_signal goes with before_signal"),
        ("paid:before_signal_ack:restart_database", "the signal is committed and its sender"),
    ],
)
def test_a_pin_that_cannot_run_on_code_is_refused_saying_why(pin: str, problem: str) -> None:
    assert_pin_refused(_plan(pins=[pin]), SAGA, pin, problem)


def test_code_runs_its_own_bodies_from_the_app_and_answers_its_signals() -> None:
    plan = plans.parse(
        {
            "definition": "order-saga@1",
            "stubs": {"charge": {"behaviour": "fail"}},
            "answers": {"paid": {}, "shipped": {}},
        }
    )
    with pytest.raises(plans.PlanInvalid) as caught:
        plans.check_against(plan, SAGA)
    assert caught.value.problems[0].startswith(
        "app: order-saga@1 is a code-first workflow: it runs its own code"
    )
    assert caught.value.problems[1:] == [
        "stubs: a code-first step's body is your code; stubs do not replace it",
        "answers.shipped: the code waits for no signal 'shipped'; it waits for paid, "
        "cancelled, shipment, received",
    ]


def test_a_later_call_of_a_step_is_pinned_by_its_occurrence() -> None:
    plans.check_against(_plan(pins=["charge.2:after_attempt_start:kill"]), SAGA)


def test_the_full_matrix_of_code_pins_every_call_and_signal() -> None:
    full = plans.matrix(_plan(), SAGA)
    plans.check_against(full, SAGA)
    labels = [p.label for p in full.pins]
    assert len(labels) == len(set(labels))
    assert "charge.1:after_handler:kill" in labels
    assert "paid:before_signal_ack:duplicate_signal" in labels
    assert not any(p.boundary == "after_claim" for p in full.pins)
