"""Definition validation, durations, retry backoff and the registry.

Each validation rule has a test that breaks exactly that rule in an otherwise valid
document and checks what a user sees: the JSON path of the field and a message that
says what is allowed.
"""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.model.definitions import Definition, DefinitionRef, RetryPolicy
from engine.model.durations import parse_duration, to_micros
from engine.model.errors import (
    DefinitionInvalid,
    DefinitionNotFound,
    FingerprintMismatch,
    RegistryError,
)
from engine.model.limits import MAX_RETRY_ATTEMPTS, MAX_RETRY_DELAY
from engine.model.registry import MigrationEdge, Registry
from engine.model.spec_reader import UNKNOWN_KEY_SHOWN
from engine.model.validation import parse_definition

Document = dict[str, Any]

MIB16 = 16 * 1024 * 1024
PIN = "0123456789abcdef" * 4
RETRY = {"max_attempts": 3, "initial_delay": "1s", "max_delay": "1m"}
DURATION_RULE = "a whole number followed by ms, s, m, h or d, e.g. 500ms, 30s, 5m, 72h, 7d"


# Building documents ------------------------------------------------------------------


def activity(name: str = "charge", **fields: Any) -> Document:
    return {
        "name": name,
        "kind": "activity",
        "target": "payments.charge",
        "timeout": "30s",
        "input_limit": 1024,
        "result_limit": 1024,
        "retry": dict(RETRY),
        **fields,
    }


def compensation(**fields: Any) -> Document:
    return {
        "target": "payments.refund",
        "timeout": "1m",
        "result_limit": 512,
        "retry": dict(RETRY),
        **fields,
    }


def wait(name: str = "paid", kind: str = "signal", **fields: Any) -> Document:
    """A signal or approval step."""
    return {
        "name": name,
        "kind": kind,
        "target": "payment.received",
        "timeout": "7d",
        "input_limit": 256,
        **fields,
    }


def timer(name: str = "pause", **fields: Any) -> Document:
    return {"name": name, "kind": "timer", "timeout": "1h", **fields}


def child(name: str = "ship", **fields: Any) -> Document:
    """A child step: an activity's limits and retry, starting a pinned ``shipping``."""
    pinned = {"name": "shipping", "version": "1", "fingerprint": PIN}
    start = {"kind": "child", "target": "shipping", "timeout": "2d", "child_definition": pinned}
    return activity(name, **{**start, **fields})


def fan_out(kind: str, name: str, branches: list[Any], **fields: Any) -> Document:
    """A parallel or race step whose fan-out limit fits its branches."""
    return {
        "name": name,
        "kind": kind,
        "branches": branches,
        "fan_out_limit": max(len(branches), 1),
        **fields,
    }


def join(name: str, branches: list[str]) -> Document:
    return {"name": name, "kind": "join", "branches": branches}


def definition(*steps: Document, **fields: Any) -> Document:
    return {
        "name": "order",
        "version": "1",
        "mode": "orchestration",
        "steps": list(steps),
        **fields,
    }


def parallel_block(owner: str = "checks", branches: tuple[str, ...] = ("a", "b")) -> list[Document]:
    """A parallel, its activity branches and its join, in a valid order."""
    return [
        fan_out("parallel", owner, list(branches)),
        *(activity(b) for b in branches),
        join(f"{owner}_done", list(branches)),
    ]


# What a user sees --------------------------------------------------------------------


def errors(document: Any) -> list[tuple[str, str]]:
    """Every (path, message) that parse_definition reports, in order."""
    with pytest.raises(DefinitionInvalid) as caught:
        parse_definition(document)
    return [(error.path, error.message) for error in caught.value.errors]


def assert_only_error(document: Any, path: str, *phrases: str) -> None:
    """Exactly one error, at ``path``, whose message contains every phrase."""
    found = errors(document)
    assert [p for p, _ in found] == [path], found
    for phrase in phrases:
        assert phrase in found[0][1]


def test_a_valid_document_becomes_a_definition() -> None:
    steps = [activity(compensation=compensation()), *parallel_block(), wait(), timer(), child()]
    parsed = parse_definition(definition(*steps, deprecated=True))
    assert [s.name for s in parsed.steps] == [
        "charge",
        "checks",
        "a",
        "b",
        "checks_done",
        "paid",
        "pause",
        "ship",
    ]
    assert parsed.deprecated is True
    assert parsed.step("charge").compensation.target == "payments.refund"


# Top level ---------------------------------------------------------------------------


@pytest.mark.parametrize("field", ["name", "version"])
@pytest.mark.parametrize("value", ["", "has space", "a/b", "a:b", "-lead", "x" * 201, "été"])
def test_name_and_version_must_be_names(field: str, value: str) -> None:
    """The rule says ASCII: a name of other letters (``été``) was refused by a message
    that said letters were allowed."""
    document = definition(timer(), **{field: value})
    assert_only_error(document, field, "1 to 200 characters", "ASCII letters, digits")


@pytest.mark.parametrize("field", ["name", "version", "steps"])
def test_top_level_fields_are_required(field: str) -> None:
    document = definition(timer())
    del document[field]
    phrase = "1 to 10000 steps" if field == "steps" else "is required"
    assert_only_error(document, field, phrase)


def test_mode_must_be_known() -> None:
    assert_only_error(
        definition(timer(), mode="batch"), "mode", "must be one of orchestration, choreography"
    )


def test_deprecated_must_be_a_boolean() -> None:
    assert_only_error(definition(timer(), deprecated="yes"), "deprecated", "true or false")


def test_the_document_must_be_an_object() -> None:
    assert errors([timer()]) == [("", "must be a JSON object")]


@pytest.mark.parametrize("count", [0, 10_001])
def test_step_count_is_1_to_10000(count: int) -> None:
    document = definition(*(timer(f"t{i}") for i in range(count)))
    assert_only_error(document, "steps", "must be a list of 1 to 10000 steps")


def test_10000_steps_are_accepted() -> None:
    parsed = parse_definition(definition(*(timer(f"t{i}") for i in range(10_000))))
    assert len(parsed.steps) == 10_000


def test_step_names_are_unique() -> None:
    document = definition(timer("a"), timer("b"), timer("a"))
    assert_only_error(document, "steps[2].name", "duplicates step 0")


def test_step_names_must_be_names() -> None:
    assert_only_error(definition(timer("a/b")), "steps[0].name", "letters, digits")


def test_a_step_must_be_an_object() -> None:
    assert_only_error(definition(timer(), "pause"), "steps[1]", "must be a JSON object")


def test_step_kind_must_be_known() -> None:
    allowed = "activity, signal, timer, child, parallel, join, race, approval"
    assert_only_error(definition(timer(kind="sleep")), "steps[0].kind", f"one of {allowed}")
    assert_only_error(definition({"name": "x"}), "steps[0].kind", "is required: one of")


# Fields of each kind -----------------------------------------------------------------

KIND_SAMPLES: dict[str, tuple[list[Document], int]] = {
    "activity": ([activity()], 0),
    "signal": ([wait()], 0),
    "approval": ([wait(kind="approval")], 0),
    "timer": ([timer()], 0),
    "child": ([child()], 0),
    "parallel": (parallel_block(), 0),
    "join": (parallel_block(), 3),
    "race": ([fan_out("race", "first", ["paid"]), wait()], 0),
}
"""A valid definition's steps for each kind, and the index of the step of that kind."""

REQUIRED = {
    "activity": ("target", "timeout"),
    "signal": ("target", "timeout"),
    "approval": ("target", "timeout"),
    "timer": ("timeout",),
    "child": ("target", "timeout", "child_definition"),
    "parallel": ("branches", "fan_out_limit"),
    "join": ("branches",),
    "race": ("branches", "fan_out_limit"),
}
DEFAULTED = ("input_limit", "result_limit", "retry")
"""Left out, these take their documented defaults (``test_definition_defaults``)."""
OPTIONAL = {
    "activity": (*DEFAULTED, "compensation", "on_unknown"),
    "signal": ("input_limit",),
    "approval": ("input_limit",),
    "child": DEFAULTED,
}
SAMPLE_VALUES = {
    "target": "x",
    "timeout": "1s",
    "input_limit": 1,
    "result_limit": 1,
    "retry": RETRY,
    "compensation": compensation(),
    "on_unknown": "hold",
    "child_definition": {"name": "x", "version": "1", "fingerprint": PIN},
    "branches": ["x"],
    "fan_out_limit": 1,
}


def sample(kind: str) -> tuple[Document, int]:
    steps, index = KIND_SAMPLES[kind]
    return definition(*copy.deepcopy(steps)), index


def test_every_kind_sample_is_valid() -> None:
    for kind in KIND_SAMPLES:
        document, index = sample(kind)
        assert parse_definition(document).steps[index].kind == kind


@pytest.mark.parametrize(
    ("kind", "field"), [(kind, field) for kind, fields in REQUIRED.items() for field in fields]
)
def test_each_kind_requires_its_fields(kind: str, field: str) -> None:
    document, index = sample(kind)
    del document["steps"][index][field]
    phrase = "must be a non-empty list of step names" if field == "branches" else "is required"
    assert_only_error(document, f"steps[{index}].{field}", phrase)


@pytest.mark.parametrize(
    ("kind", "field"),
    [
        (kind, field)
        for kind in REQUIRED
        for field in SAMPLE_VALUES
        if field not in REQUIRED[kind] + OPTIONAL.get(kind, ())
    ],
)
def test_each_kind_forbids_other_kinds_fields(kind: str, field: str) -> None:
    document, index = sample(kind)
    document["steps"][index][field] = SAMPLE_VALUES[field]
    allowed = ", ".join(sorted({"name", "kind", *REQUIRED[kind], *OPTIONAL.get(kind, ())}))
    article = "an" if kind[0] in "aeiou" else "a"
    assert_only_error(
        document,
        f"steps[{index}].{field}",
        f"is not allowed on {article} {kind} step; allowed: {allowed}",
    )


# Limits and ranges -------------------------------------------------------------------


RACE = [fan_out("race", "first", ["paid"]), wait()]
COMPENSATED = activity(compensation=compensation())


@pytest.mark.parametrize(
    ("steps", "path", "low", "high"),
    [
        ([activity()], "input_limit", 1, MIB16),
        ([activity()], "result_limit", 1, MIB16),
        ([wait()], "input_limit", 1, MIB16),
        ([child()], "result_limit", 1, MIB16),
        ([COMPENSATED], "compensation.result_limit", 1, MIB16),
        ([activity()], "retry.max_attempts", 1, MAX_RETRY_ATTEMPTS),
        ([child()], "retry.max_attempts", 1, MAX_RETRY_ATTEMPTS),
        ([COMPENSATED], "compensation.retry.max_attempts", 1, MAX_RETRY_ATTEMPTS),
        (RACE, "fan_out_limit", 1, 10_000),
    ],
)
@pytest.mark.parametrize("bad", ["low", "high", "text", "fraction", "boolean"])
def test_whole_number_fields_are_range_checked(
    steps: list[Document], path: str, low: int, high: int, bad: str
) -> None:
    values = {"low": low - 1, "high": high + 1, "text": str(low), "fraction": low + 0.5}
    document = definition(_set(steps[0], path, values.get(bad, True)), *steps[1:])
    assert_only_error(document, f"steps[0].{path}", f"must be a whole number from {low} to {high}")


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("input_limit", MIB16),
        ("input_limit", 1),
        ("result_limit", MIB16),
        ("retry.max_attempts", MAX_RETRY_ATTEMPTS),
        ("retry.max_attempts", 1),
    ],
)
def test_whole_number_bounds_are_inclusive(path: str, value: int) -> None:
    parse_definition(definition(_set(activity(), path, value)))


def test_fan_out_limit_of_10000_is_accepted() -> None:
    steps = copy.deepcopy(RACE)
    steps[0]["fan_out_limit"] = 10_000
    parse_definition(definition(*steps))


def _set(step: Document, dotted: str, value: Any) -> Document:
    """A copy of ``step`` with the field at a dotted path replaced."""
    changed = copy.deepcopy(step)
    *parents, key = dotted.split(".")
    target = changed
    for parent in parents:
        target = target[parent]
    target[key] = value
    return changed


@pytest.mark.parametrize(
    ("step", "path", "value", "phrase"),
    [
        (timer(), "timeout", "0s", "must be more than 0 and at most 365 days"),
        (timer(), "timeout", "366d", "must be more than 0 and at most 365 days"),
        (activity(), "timeout", "8761h", "must be more than 0 and at most 365 days"),
        (activity(), "retry.initial_delay", "0ms", "must be more than 0 and at most 30 days"),
        (activity(), "retry.max_delay", "31d", "must be more than 0 and at most 30 days"),
        (activity(compensation=compensation()), "compensation.timeout", "0m", "more than 0"),
    ],
)
def test_durations_are_range_checked(step: Document, path: str, value: str, phrase: str) -> None:
    assert_only_error(definition(_set(step, path, value)), f"steps[0].{path}", phrase)


def test_duration_bounds_are_inclusive() -> None:
    retry = {"max_attempts": 1, "initial_delay": "30d", "max_delay": "30d"}
    parse_definition(definition(timer(timeout="365d"), activity(retry=retry)))


# Retry policies and compensation ------------------------------------------------------


def test_max_delay_must_be_at_least_initial_delay() -> None:
    retry = {"max_attempts": 3, "initial_delay": "2s", "max_delay": "1999ms"}
    assert_only_error(
        definition(activity(retry=retry)), "steps[0].retry.max_delay", "at least initial_delay"
    )
    equal = {"max_attempts": 3, "initial_delay": "2s", "max_delay": "2000ms"}
    parse_definition(definition(activity(retry=equal)))


def test_retry_policy_must_be_an_object_of_its_fields() -> None:
    allowed = "{max_attempts, initial_delay, max_delay}"
    assert_only_error(definition(activity(retry=None)), "steps[0].retry", f"required: {allowed}")
    assert_only_error(definition(activity(retry=3)), "steps[0].retry", "must be a JSON object")


def test_compensation_is_checked_like_an_activity() -> None:
    bad = compensation(retry={"max_attempts": 0, "initial_delay": "1s", "max_delay": "1s"})
    assert_only_error(
        definition(activity(compensation=bad)),
        "steps[0].compensation.retry.max_attempts",
        "from 1 to 1000",
    )
    no_target = compensation()
    del no_target["target"]
    assert_only_error(
        definition(activity(compensation=no_target)), "steps[0].compensation.target", "required"
    )


@pytest.mark.parametrize("make", [wait, timer, child], ids=["signal", "timer", "child"])
def test_compensation_is_only_allowed_on_activities(make: Any) -> None:
    step = make(compensation=compensation())
    assert_only_error(
        definition(step), "steps[0].compensation", f"is not allowed on a {step['kind']} step"
    )
    parse_definition(definition(activity(compensation=compensation())))


def test_on_unknown_must_be_a_known_policy() -> None:
    assert_only_error(
        definition(activity(on_unknown="retry")),
        "steps[0].on_unknown",
        "must be one of hold, retry_same_key",
    )


# Children ----------------------------------------------------------------------------


def test_child_target_must_equal_the_pinned_name() -> None:
    assert_only_error(
        definition(child(target="billing")), "steps[0].target", "must equal child_definition.name"
    )


@pytest.mark.parametrize("fingerprint", [PIN[:63], PIN.upper(), "g" * 64, PIN + "0", ""])
def test_child_pin_needs_a_complete_fingerprint(fingerprint: str) -> None:
    pin = {"name": "shipping", "version": "1", "fingerprint": fingerprint}
    assert_only_error(
        definition(child(child_definition=pin)),
        "steps[0].child_definition.fingerprint",
        "must be 64 lowercase hex characters",
    )


@pytest.mark.parametrize("field", ["name", "version", "fingerprint"])
def test_child_pin_needs_name_version_and_fingerprint(field: str) -> None:
    step = child()
    del step["child_definition"][field]
    assert_only_error(definition(step), f"steps[0].child_definition.{field}", "is required")


# Parallels and races -----------------------------------------------------------------


@pytest.mark.parametrize("branches", [[], "a", [1], None])
@pytest.mark.parametrize("kind", ["parallel", "race", "join"])
def test_branches_must_be_a_non_empty_list_of_names(kind: str, branches: Any) -> None:
    document, index = sample(kind)
    document["steps"][index]["branches"] = branches
    assert_only_error(
        document, f"steps[{index}].branches", "must be a non-empty list of step names"
    )


@pytest.mark.parametrize("kind", ["parallel", "race"])
def test_branches_must_be_distinct(kind: str) -> None:
    document = definition(fan_out(kind, "many", ["paid", "paid"]), wait())
    assert_only_error(document, "steps[0].branches", "must not name a step twice")


def test_race_branches_must_exist() -> None:
    document = definition(fan_out("race", "first", ["paid", "ghost"]), wait())
    assert_only_error(document, "steps[0].branches[1]", "names no step: 'ghost'")


def test_parallel_branches_must_exist() -> None:
    steps = [fan_out("parallel", "p", ["a", "ghost"]), activity("a"), join("j", ["a", "ghost"])]
    assert_only_error(definition(*steps), "steps[0].branches[1]", "names no step: 'ghost'")


def test_a_step_is_not_its_own_branch() -> None:
    document = definition(fan_out("race", "first", ["paid", "first"]), wait())
    assert_only_error(document, "steps[0].branches[1]", "a step cannot be its own branch")


def test_parallel_branches_must_be_activities() -> None:
    steps = [fan_out("parallel", "p", ["paid"]), wait(), join("j", ["paid"])]
    assert_only_error(
        definition(*steps),
        "steps[0].branches[0]",
        "'paid' is a signal step; parallel branches must be: activity",
    )


@pytest.mark.parametrize(
    ("make", "kind"), [(activity, "an activity"), (child, "a child")], ids=["activity", "child"]
)
def test_race_branches_must_be_signals_approvals_or_timers(make: Any, kind: str) -> None:
    assert_only_error(
        definition(fan_out("race", "first", ["late"]), make("late")),
        "steps[0].branches[0]",
        f"'late' is {kind} step; race branches must be: signal, approval, timer",
    )
    branches = [wait("s"), wait("a", kind="approval"), timer("t")]
    parse_definition(definition(fan_out("race", "first", ["s", "a", "t"]), *branches))


def test_branches_must_fit_the_fan_out_limit() -> None:
    document = definition(
        fan_out("race", "first", ["paid", "pause"], fan_out_limit=1), wait(), timer()
    )
    assert_only_error(
        document, "steps[0].fan_out_limit", "must be at least the number of branches (2)"
    )


def test_a_fan_out_limit_below_the_branches_comes_with_the_field_errors() -> None:
    """Reported at the limit while another step has a mistake, not only once the rest
    is valid (an editor shows every problem of a draft at once)."""
    document = definition(
        fan_out("race", "first", ["paid", "pause"], fan_out_limit=1), wait(), timer(timeout="0s")
    )
    assert [path for path, _ in errors(document)] == [
        "steps[0].fan_out_limit",
        "steps[2].timeout",
    ]


def test_a_branch_comes_after_its_owner() -> None:
    document = definition(wait(), fan_out("race", "first", ["paid"]))
    assert_only_error(document, "steps[1].branches[0]", "'paid' must come after 'first'")


def test_a_step_has_at_most_one_owner() -> None:
    document = definition(
        fan_out("race", "first", ["paid"]), fan_out("race", "second", ["paid"]), wait()
    )
    assert_only_error(document, "steps[1].branches[0]", "'paid' already belongs to 'first'")


# Joins -------------------------------------------------------------------------------

JOIN_RULE = "must list exactly the branches of one parallel step"
NEEDS_JOIN = "needs exactly one join after it"


def test_a_join_in_any_branch_order_is_accepted() -> None:
    steps = parallel_block()
    steps[-1]["branches"] = ["b", "a"]
    parse_definition(definition(*steps))


def test_a_join_lists_all_branches_of_its_parallel() -> None:
    steps = parallel_block()
    steps[-1]["branches"] = ["a"]
    assert errors(definition(*steps)) == [
        ("steps[3].branches", JOIN_RULE),
        ("steps[0].branches", NEEDS_JOIN),
    ]


def test_a_join_does_not_mix_branches_of_two_parallels() -> None:
    steps = [*parallel_block("p", ("a",)), *parallel_block("q", ("b",))]
    steps[-1]["branches"] = ["a", "b"]
    assert errors(definition(*steps)) == [
        ("steps[5].branches", JOIN_RULE),
        ("steps[3].branches", NEEDS_JOIN),
    ]


def test_a_join_only_joins_parallels() -> None:
    document = definition(fan_out("race", "first", ["paid"]), wait(), join("j", ["paid"]))
    assert_only_error(document, "steps[2].branches", JOIN_RULE)


def test_a_parallel_has_exactly_one_join() -> None:
    steps = parallel_block()
    assert_only_error(definition(*steps[:-1]), "steps[0].branches", NEEDS_JOIN)
    twice = definition(*steps, join("again", ["a", "b"]))
    assert_only_error(
        twice, "steps[4].branches", "the branches of 'checks' are already joined by 'checks_done'"
    )


def test_a_join_comes_after_its_parallel() -> None:
    steps = parallel_block()
    assert errors(definition(steps[-1], *steps[:-1])) == [
        ("steps[0].branches", "the join must come after 'checks'"),
        ("steps[1].branches", NEEDS_JOIN),
    ]


# Unknown fields and many errors ------------------------------------------------------


@pytest.mark.parametrize(
    ("document", "path", "allowed"),
    [
        (definition(timer(), colour=1), "colour", "deprecated, mode, name, steps, version"),
        (definition(timer(colour=1)), "steps[0].colour", "branches, child_definition"),
        (
            definition(activity(retry={**RETRY, "jitter": 1})),
            "steps[0].retry.jitter",
            "initial_delay, max_attempts, max_delay",
        ),
        (
            definition(activity(compensation=compensation(input_limit=1))),
            "steps[0].compensation.input_limit",
            "result_limit, retry, target, timeout",
        ),
        (
            definition(
                child(
                    child_definition={
                        "name": "shipping",
                        "version": "1",
                        "fingerprint": PIN,
                        "tenant": "x",
                    }
                )
            ),
            "steps[0].child_definition.tenant",
            "fingerprint, name, version",
        ),
    ],
)
def test_unknown_fields_are_reported_once_with_what_is_allowed(
    document: Document, path: str, allowed: str
) -> None:
    assert_only_error(document, path, f"unknown field; allowed: {allowed}")


def test_an_unknown_field_with_a_long_name_is_named_by_its_start() -> None:
    """A key thousands of characters long was said back whole in its error's path."""
    key = "k" * 5000
    shown = "k" * UNKNOWN_KEY_SHOWN + "…"
    assert_only_error(
        {**definition(activity()), key: 1},
        shown,
        "unknown field; allowed: deprecated, mode, name, steps, version",
    )


def test_every_field_error_is_reported_at_once() -> None:
    document = definition(
        timer(timeout="1.5s"),
        activity(retry={**RETRY, "max_attempts": 0}, colour="red"),
        wait(input_limit=0),
        name="",
    )
    assert [path for path, _ in errors(document)] == [
        "name",
        "steps[0].timeout",
        "steps[1].colour",
        "steps[1].retry.max_attempts",
        "steps[2].input_limit",
    ]


def test_every_structural_error_is_reported_at_once() -> None:
    document = definition(
        fan_out("race", "first", ["ghost", "first"]),
        *parallel_block()[:-1],
        timer("pause"),
        timer("pause"),
    )
    assert [path for path, _ in errors(document)] == [
        "steps[5].name",
        "steps[0].branches[0]",
        "steps[0].branches[1]",
        "steps[1].branches",
    ]


# Durations ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("500ms", timedelta(milliseconds=500)),
        ("30s", timedelta(seconds=30)),
        ("5m", timedelta(minutes=5)),
        ("72h", timedelta(hours=72)),
        ("7d", timedelta(days=7)),
    ],
)
def test_durations_are_a_whole_number_and_a_unit(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected
    assert parse_definition(definition(timer(timeout=text))).steps[0].timeout == expected


@pytest.mark.parametrize(
    "text", ["1.5s", "-1s", "10w", "5", "s", "5 s", "5S", " 5s", "5s\n", "1m30s", "", 30]
)
def test_malformed_durations_are_rejected_with_the_allowed_form(text: Any) -> None:
    assert_only_error(
        definition(timer(timeout=text)), "steps[0].timeout", f"expected a duration: {DURATION_RULE}"
    )


def test_zero_duration_is_rejected() -> None:
    assert_only_error(definition(timer(timeout="0s")), "steps[0].timeout", "more than 0")


@pytest.mark.parametrize("text", ["999999999999d", "999999999999h"])
def test_a_duration_too_long_for_any_clock_is_an_error_not_a_crash(text: str) -> None:
    assert_only_error(definition(timer(timeout=text)), "steps[0].timeout", "is too long")


# Retry backoff -----------------------------------------------------------------------


def test_backoff_doubles_from_initial_delay_up_to_max_delay() -> None:
    policy = RetryPolicy(10, timedelta(seconds=1), timedelta(seconds=10))
    delays = [policy.backoff(n).total_seconds() for n in range(1, 7)]
    assert delays == [1, 2, 4, 8, 10, 10]


def test_backoff_counts_attempts_from_one() -> None:
    policy = RetryPolicy(3, timedelta(seconds=1), timedelta(seconds=10))
    with pytest.raises(ValueError, match="attempt counts from 1"):
        policy.backoff(0)


_DELAY_MICROS = st.integers(1, to_micros(MAX_RETRY_DELAY))
_ATTEMPTS = st.integers(1, 64) | st.integers(1, 10 * MAX_RETRY_ATTEMPTS)
"""Mostly early attempts, where the doubling has not reached max_delay yet."""


@given(_DELAY_MICROS, _DELAY_MICROS, _ATTEMPTS)
def test_backoff_is_min_of_doubling_and_max_delay(first: int, second: int, attempt: int) -> None:
    initial, maximum = sorted((first, second))
    policy = RetryPolicy(
        MAX_RETRY_ATTEMPTS, timedelta(microseconds=initial), timedelta(microseconds=maximum)
    )
    expected = min(initial * 2 ** (attempt - 1), maximum)
    assert to_micros(policy.backoff(attempt)) == expected
    assert policy.backoff(attempt) <= policy.backoff(attempt + 1)


# Registry ----------------------------------------------------------------------------


def version(number: str, *steps: Document, **fields: Any) -> Definition:
    return parse_definition({**definition(*(steps or (timer(),)), **fields), "version": number})


def test_registry_rejects_a_duplicate_name_and_version() -> None:
    with pytest.raises(RegistryError, match="order@1 is registered twice"):
        Registry([version("1"), version("1", deprecated=True)])


def test_registry_resolves_only_the_exact_fingerprint() -> None:
    registered = version("1")
    registry = Registry([registered, version("2")])
    assert registry.resolve(registered.ref) is registered
    other = version("1", timer(timeout="2h"))
    with pytest.raises(FingerprintMismatch, match="order@1 is registered with fingerprint"):
        registry.resolve(other.ref)
    with pytest.raises(DefinitionNotFound, match="order@3 is not registered"):
        registry.resolve(DefinitionRef("order", "3", registered.fingerprint))


def _parent_of(pinned: Definition) -> Definition:
    pin = {"name": pinned.name, "version": pinned.version, "fingerprint": pinned.fingerprint}
    step = child(target=pinned.name, child_definition=pin)
    return parse_definition(definition(step, name="parent"))


def test_registry_resolves_child_pins_when_it_is_built() -> None:
    shipping = parse_definition(definition(timer(), name="shipping"))
    parent = _parent_of(shipping)
    assert Registry([parent, shipping]).resolve(parent.ref) is parent
    with pytest.raises(DefinitionNotFound, match="shipping@1 is not registered"):
        Registry([parent])
    changed = parse_definition(definition(timer(timeout="2h"), name="shipping"))
    with pytest.raises(FingerprintMismatch, match="shipping@1"):
        Registry([parent, changed])


def _edge(from_version: str, to_version: str, apply: Any = lambda data: data) -> MigrationEdge:
    return MigrationEdge("order", from_version, to_version, apply)


def test_registry_keeps_valid_migration_edges() -> None:
    registry = Registry([version("1"), version("2")], [_edge("1", "2")])
    assert registry.migration("order", "1", "2").apply({"a": 1}) == {"a": 1}
    with pytest.raises(RegistryError, match="no migration of order from 2 to 1"):
        registry.migration("order", "2", "1")


@pytest.mark.parametrize(
    ("edges", "error", "message"),
    [
        ([_edge("1", "2", None)], RegistryError, "has no apply function"),
        ([_edge("1", "3")], DefinitionNotFound, "order@3, which is not registered"),
        ([_edge("0", "1")], DefinitionNotFound, "order@0, which is not registered"),
        ([_edge("1", "1")], RegistryError, "must change the version"),
        ([_edge("1", "2"), _edge("1", "2")], RegistryError, "1->2 is registered twice"),
    ],
    ids=["no-apply", "unregistered-target", "unregistered-source", "same-version", "duplicate"],
)
def test_registry_rejects_bad_migration_edges(
    edges: list[MigrationEdge], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        Registry([version("1"), version("2")], edges)
