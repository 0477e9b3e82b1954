"""Drill plans as documents: what is refused (and how it says so), round trips, and the
full matrix (no database: ``verification.plan`` is pure)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.model.files import load_definition
from tests.unit.plan_refusals import assert_pin_refused
from verification import plan as plans

ROOT = Path(__file__).resolve().parents[2]
ORDER = load_definition(ROOT / "examples" / "order_fulfillment.json")
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=10,
)


def _plan(**fields: object) -> plans.Plan:
    return plans.parse({"definition": "order.fulfillment@1", **fields})


@given(json_values)
def test_any_document_is_a_plan_or_refused_with_problems(document: object) -> None:
    try:
        plans.parse(document)
    except plans.PlanInvalid as error:
        assert error.problems and all(isinstance(p, str) for p in error.problems)


@given(
    st.lists(st.sampled_from(plans.matrix(_plan(), ORDER).pins), max_size=6, unique=True),
    st.dictionaries(
        st.sampled_from(["reserve", "charge", "notify"]),
        st.builds(
            plans.Stub,
            st.sampled_from(plans.BEHAVIOURS),
            json_values,
            st.integers(0, plans.MAX_FAIL_TIMES),
            st.floats(0.5, plans.MAX_SLOW_SECONDS),
            st.booleans(),
        ),
    ),
)
def test_a_plan_reads_back_from_its_json(pins: list[plans.Pin], stubs: dict) -> None:
    plan = plans.Plan("order.fulfillment@1", input={"a": 1}, stubs=stubs, pins=tuple(pins))
    assert plans.parse(plan.as_json()) == plan


def test_every_problem_is_named_with_its_path_and_what_is_allowed() -> None:
    with pytest.raises(plans.PlanInvalid) as caught:
        plans.parse(
            {
                "definition": "no-version",
                "pins": ["a:b", {"step": "x", "boundary": "y", "fault": "z", "hit": 0}],
                "stubs": {"charge": {"behaviour": "explode", "seconds": 99}},
                "colour": "red",
            }
        )
    assert caught.value.problems == [
        "colour: not a plan field; allowed: answers, app, definition, definition_file, "
        "input, name, pins, stubs",
        "definition: 'no-version' must be NAME@VERSION",
        "stubs.charge.behaviour: 'explode' is not one of succeed, fail, slow, unknown",
        f"stubs.charge.seconds: must be a number from 0 to {plans.MAX_SLOW_SECONDS:g}",
        "pins[0]: must be STEP:BOUNDARY:FAULT[#HIT] or an object with step, boundary, "
        "fault (and hit)",
        f"pins[1].hit: must be a whole number from 1 to {plans.MAX_HIT}",
    ]


@pytest.mark.parametrize(
    ("pin", "problem"),
    [
        ("nope:after_handler:kill", "no step 'nope'; steps: reserve, charge,"),
        ("checks:after_handler:kill", "a parallel step has no work of its own to fault"),
        ("manager_approval:after_handler:kill", "an approval step has no work of its own"),
        (
            "charge:after_lunch:kill",
            "boundary 'after_lunch' is not one an activity step reaches: after_claim, "
            "after_attempt_start, after_handler, before_commit, after_commit, in_lease_renewal",
        ),
        ("charge:after_handler:melt", "fault 'melt' is not one of kill, exit, raise,"),
        ("charge:after_timer_fire:kill", "an activity step does not reach after_timer_fire"),
        ("charge:after_commit:sever_after_commit", "cuts a COMMIT, and at after_commit"),
        ("charge:after_handler:duplicate_signal", "duplicate_signal goes with before_signal_"),
        ("shipped:before_signal_ack:sever_before_commit", "cuts a COMMIT, and at before_sig"),
        ("charge:in_lease_renewal:kill", "give stubs.charge behaviour slow with seconds >= 1"),
        ("shipped:before_signal_ack:restart_database", "restart_database holds a worker at"),
        (
            "delivery_timeout:after_timer_fire:kill",
            "waits 7d; a drill waits for timers of at most 30s",
        ),
    ],
)
def test_a_pin_that_cannot_run_is_refused_saying_why(pin: str, problem: str) -> None:
    assert_pin_refused(_plan(pins=[pin]), ORDER, pin, problem)


def test_the_same_pin_twice_is_refused_not_reported_fired_twice() -> None:
    """A pin fires once: its twin never would, yet it was reported fired with it."""
    with pytest.raises(plans.PlanInvalid) as caught:
        _plan(pins=["charge:after_handler:kill", "reserve:after_handler:kill",
                    {"step": "charge", "boundary": "after_handler", "fault": "kill"}])  # fmt: skip
    assert caught.value.problems == [
        "pins[2] charge:after_handler:kill: the same pin as pins[0], and a pin fires once: "
        "to fault the step again, pin another hit (charge:after_handler:kill#N, N up to 100)"
    ]
    plans.check_against(_plan(pins=["charge:after_handler:kill", "charge:after_handler:kill#2"]),
                        ORDER)  # fmt: skip


def test_a_slow_stub_makes_lease_renewal_pinnable() -> None:
    plan = _plan(stubs={"charge": {"behaviour": "slow", "seconds": 1.2}},
                 pins=["charge:in_lease_renewal:kill"])  # fmt: skip
    plans.check_against(plan, ORDER)


def test_your_own_handlers_lease_renewal_is_pinnable_without_a_stub() -> None:
    """A stub's time is the plan's, a team's handler's is its own: the pin is not
    refused with advice to give a slow stub (which an app's plan may not have), and
    the full matrix, not knowing how long the handlers take, leaves it out."""
    plan = _plan(app="examples.orders:app", pins=["charge:in_lease_renewal:kill"])
    plans.check_against(plan, ORDER)
    full = plans.matrix(_plan(app="examples.orders:app"), ORDER)
    assert not [p for p in full.pins if p.boundary == "in_lease_renewal"]


def test_the_full_matrix_pins_every_applicable_cell_once_within_its_limit() -> None:
    full = plans.matrix(_plan(), ORDER)
    labels = [p.label for p in full.pins]
    assert len(labels) == len(set(labels)) <= plans.MAX_PINS
    plans.check_against(full, ORDER)
    steps = {p.step for p in full.pins}
    assert steps == {"reserve", "charge", "fraud_check", "inventory_check", "shipped", "notify"}
    assert {p.step for p in full.pins if p.boundary == "after_claim"} == {"reserve"}
    with pytest.raises(plans.PlanInvalid, match="more than 10"):
        plans.matrix(_plan(), ORDER, limit=10)


def test_for_each_pin_makes_one_plan_per_pin() -> None:
    plan = _plan(pins=["charge:after_handler:kill", "reserve:before_commit:raise"])
    assert [p.pins for p in plans.for_each_pin(plan)] == [(p,) for p in plan.pins]


def test_a_pin_from_the_command_line_has_three_parts() -> None:
    assert plans.parse_pin("charge:after_handler:kill").label == "charge:after_handler:kill"
    with pytest.raises(plans.PlanInvalid, match="must be STEP:BOUNDARY:FAULT"):
        plans.parse_pin("charge:kill")


@given(st.integers(min_value=1, max_value=plans.MAX_HIT))
def test_a_pins_label_reads_back_with_its_hit(hit: int) -> None:
    """``#HIT`` as ``Pin.label`` writes it, on the command line and in a plan's pins."""
    pin = plans.Pin("charge", "after_handler", "kill", hit)
    assert plans.parse_pin(pin.label) == pin
    assert _plan(pins=[pin.label]).pins == (pin,)


def test_a_hit_out_of_range_in_a_label_is_refused() -> None:
    with pytest.raises(plans.PlanInvalid, match=r"pins\[0\]\.hit: must be a whole number"):
        _plan(pins=[f"charge:after_handler:kill#{plans.MAX_HIT + 1}"])


def test_a_renewal_cut_and_a_transition_cut_need_two_drills() -> None:
    plan = _plan(
        stubs={"charge": {"behaviour": "slow", "seconds": 1.5}},
        pins=[
            "charge:in_lease_renewal:sever_after_commit",
            "reserve:before_commit:sever_after_commit",
        ],
    )
    with pytest.raises(plans.PlanInvalid, match="use --for-each-pin"):
        plans.check_against(plan, ORDER)
    for one in plans.for_each_pin(plan):
        plans.check_against(one, ORDER)


def test_stubs_and_your_own_handlers_do_not_mix() -> None:
    with pytest.raises(plans.PlanInvalid, match="stubs: not used when app names your handlers"):
        _plan(app="examples.orders:app", stubs={"charge": {"behaviour": "fail"}})


@pytest.mark.parametrize(
    ("problem", "where"),
    [
        ("pins[0] ship:after_handler:kill: no step 'ship'", ("pins[0]", "ship:after_handler")),
        ("stubs.charge.times: must be a whole number", ("stubs.charge.times", "must be")),
        ("--pin 'x': must be STEP:BOUNDARY:FAULT[#HIT]", ("", "--pin 'x'")),
        ("a sentence with no path", ("", "a sentence")),
    ],
)
def test_a_problem_is_located_at_its_path_in_the_plan(problem: str, where: tuple[str, str]) -> None:
    """What an API answer's ``problems`` say: the path, and the problem said there."""
    path, said = plans.located(problem)
    assert (path, said[: len(where[1])]) == where and problem.endswith(said)


def test_every_problem_of_a_bad_document_has_a_path() -> None:
    bad = {"definition": "x", "pins": [{"step": 1}], "stubs": {"a": {"times": -1}}, "app": "?"}
    with pytest.raises(plans.PlanInvalid) as refused:
        plans.parse(bad)
    assert all(plans.located(p)[0] for p in refused.value.problems), refused.value.problems


def test_a_plan_lists_shape_problems_then_the_rest_against_the_definition() -> None:
    """A malformed pin is left out of the check against the definition; the others keep
    their place in the document, so each problem is still located at its own pin."""
    document = {
        "definition": "order.fulfillment@1",
        "pins": [{"step": 1}, "ship:after_handler:kill", "charge:after_handler:kill#0"],
        "stubs": {"nowhere": {"times": -1}},
    }
    problems = plans.checked(plans.read(document), ORDER)
    assert [plans.located(p)[0] for p in problems] == [
        "stubs.nowhere.times", "pins[0]", "pins[2].hit", "stubs.nowhere", "pins[1]"
    ]  # fmt: skip
