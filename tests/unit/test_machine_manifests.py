"""A machine's manifest: valid exactly when every rule of the seed holds, and otherwise
every broken rule reported at once, with its path and what is allowed.

The property breaks the bounds of random valid manifests (timers, attempts,
transitions, the profiles) and expects exactly the message of each bound it broke;
the table below breaks the other rules (variants, edges, names) one at a time on the
fixture; the last tests run ``wayline definition check`` on the fixture files.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.cli.main import main
from engine.model.errors import DefinitionInvalid
from engine.model.limits import (
    MAX_MACHINE_ATTEMPTS,
    MAX_MACHINE_TIMER_SECONDS,
    MAX_MACHINE_TRANSITIONS,
)
from engine.model.validation import parse_definition
from engine.modes.machines.names import GRANT_RULE
from tests.unit.machines import EXAMPLE, FIXTURES, Document, approval_document, machine_documents

ROOT = Path(__file__).resolve().parents[2]
Problems = list[tuple[str, str]]


def problems(document: Document) -> Problems:
    """Every (path, message) validation reports; [] when the document is valid."""
    try:
        parse_definition(document)
    except DefinitionInvalid as invalid:
        return [(e.path, e.message) for e in invalid.errors]
    return []


def _around(low: int, high: int) -> st.SearchStrategy[Any]:
    """Values in and just outside ``low..high``, and a few that are not whole numbers."""
    return st.one_of(
        st.integers(low - 2, low + 2),
        st.integers(high - 2, high + 2),
        st.integers(low, high),
        st.sampled_from([True, 1.5, "3", None]),
    )


def _bound(path: str, value: Any, low: int, high: int) -> Problems:
    """The one problem a bounded whole number has, if any."""
    if value is None:
        return [(path, f"is required: a whole number from {low} to {high}")]
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        return [(path, f"must be a whole number from {low} to {high}")]
    return []


def _profile(key: str, value: Any, only: str) -> Problems:
    if value == only:
        return []
    verb = "is required:" if value is None else "must be"
    return [(key, f'{verb} "{only}" (the only {key} profile)')]


@given(
    machine_documents(),
    _around(1, MAX_MACHINE_ATTEMPTS),
    _around(1, MAX_MACHINE_TRANSITIONS),
    st.lists(_around(1, MAX_MACHINE_TIMER_SECONDS), max_size=4),
    st.sampled_from(["transactional", "at_least_once", None]),
    st.sampled_from(["parent", "global", None]),
)
def test_a_manifest_is_valid_exactly_when_every_bound_is_in_range(
    document: Document,
    attempts: Any,
    transitions: Any,
    seconds: list[Any],
    retry: Any,
    concurrency: Any,
) -> None:
    timers = dict(zip(document["timers"], seconds, strict=False))
    document.update(timers={**document["timers"], **timers})
    expected = [
        problem
        for state, value in document["timers"].items()
        for problem in _bound(f"timers.{state}", value, 1, MAX_MACHINE_TIMER_SECONDS)
    ]
    for key, value in (
        ("max_attempts", attempts),
        ("max_transitions", transitions),
        ("retry", retry),
        ("concurrency", concurrency),
    ):
        if value is None:
            del document[key]
        else:
            document[key] = value
    expected += _bound("max_attempts", attempts, 1, MAX_MACHINE_ATTEMPTS)
    expected += _bound("max_transitions", transitions, 1, MAX_MACHINE_TRANSITIONS)
    expected += _profile("retry", retry, "transactional")
    expected += _profile("concurrency", concurrency, "parent")

    assert problems(document) == expected


@given(machine_documents())
def test_every_random_manifest_of_the_strategy_is_valid(document: Document) -> None:
    """The baseline of the property above: what it breaks is all that is wrong."""
    assert problems(document) == []


def _with(**changes: Any) -> Document:
    document = approval_document()
    for key, value in changes.items():
        if value is None:
            del document[key]
        else:
            document[key] = value
    return document


def _variants(*extra: dict[str, Any], initial_fields: dict[str, str] | None = None) -> Document:
    document = approval_document()
    variants = document["state"]["variants"]
    if initial_fields is not None:
        variants[0]["fields"] = initial_fields
    variants.extend(extra)
    return document


REVIEW = ["InReview", "Approved", "Rejected", "Expired"]
RULES: list[tuple[str, Document, Problems]] = [
    (
        "initial with fields",
        _variants(initial_fields={"note": "text"}),
        [("initial", "Submitted must have no fields")],
    ),
    (
        "initial not a variant",
        _with(initial="Draft"),
        [("initial", "Draft is not a variant of Approval")],
    ),
    (
        "terminal not a variant",
        _with(terminal=["Approved", "Done"]),
        [
            ("terminal[1]", "Done is not a variant of Approval"),
        ],
    ),
    (
        "terminal state with a timer",
        _with(timers={"InReview": 60, "Approved": 60}),
        [("timers.Approved", "a terminal state cannot have a timer")],
    ),
    (
        "timer not a variant",
        _with(timers={"Waiting": 60}),
        [("timers.Waiting", "Waiting is not a variant of Approval")],
    ),
    (
        "terminal state with an edge",
        _with(transitions={"Submitted": ["InReview"], "InReview": REVIEW, "Expired": ["InReview"]}),
        [("transitions.Expired", "a terminal state cannot have outgoing edges")],
    ),
    (
        "edge to no variant",
        _with(transitions={"Submitted": ["InReview"], "InReview": [*REVIEW, "Lost"]}),
        [("transitions.InReview[4]", "Lost is not a variant of Approval")],
    ),
    (
        "unreachable states",
        _with(transitions={"Submitted": ["InReview"], "InReview": ["InReview", "Approved"]}),
        [
            ("transitions", "Rejected is unreachable from Submitted"),
            ("transitions", "Expired is unreachable from Submitted"),
        ],
    ),
    (
        "a loop that cannot end",
        _with(
            terminal=["Approved", "Rejected"],
            transitions={
                "Submitted": ["InReview", "Expired"],
                "InReview": ["Approved", "Rejected"],
                "Expired": ["Expired"],
            },
        ),
        [("transitions", "no terminal state is reachable from Expired")],
    ),
    (
        "initial state that is terminal",
        _with(initial="Expired", terminal=["Approved", "Rejected", "Expired"]),
        [
            ("initial", "Expired is terminal: an execution starts in a state it leaves"),
            ("transitions", "Submitted is unreachable from Expired"),
            ("transitions", "InReview is unreachable from Expired"),
            ("transitions", "Approved is unreachable from Expired"),
            ("transitions", "Rejected is unreachable from Expired"),
        ],
    ),
    (
        "grants beyond the database",
        _with(grants=["DbRead<Documents>", "Http"]),
        [("grants[1]", GRANT_RULE)],
    ),
    (
        "grants on another resource",
        _with(grants=["DbRead<Documents>", "DbWrite<Users>"]),
        [
            (
                "grants[1]",
                "names Users: a machine's grants name its own resource, Documents "
                "(its advance acts as that resource's database role)",
            )
        ],
    ),
    (
        "a resource too long for its roles",
        _with(resource="D" * 50, grants=[]),
        [
            (
                "resource",
                "must be at most 49 characters: its database roles "
                "(wayline_<resource>_write and _read) must fit PostgreSQL's 63-byte names",
            )
        ],
    ),
    (
        "required names",
        _with(resource=None, function=None, grants=None),
        [
            ("function", "is required: the name of the advance"),
            ("resource", "is required: the resource whose rows are the parents"),
            ("grants", "is required: a list of up to 32 grants ([] for none)"),
        ],
    ),
    (
        "a field of no type",
        _variants({"name": "Held", "fields": {"until": "date"}}),
        [
            ("state.variants[5].fields.until", "must be one of text, integer, number, boolean"),
            ("transitions", "Held is unreachable from Submitted"),
        ],
    ),
    (
        "a variant twice",
        _variants({"name": "Approved"}),
        [("state.variants[5].name", "duplicates variant 2")],
    ),
]


@pytest.mark.parametrize(
    ("document", "expected"), [r[1:] for r in RULES], ids=[r[0] for r in RULES]
)
def test_each_rule_is_reported_with_its_path_and_what_is_allowed(
    document: Document, expected: Problems
) -> None:
    assert problems(document) == expected


def test_every_broken_rule_is_reported_at_once() -> None:
    """A wrong bound does not hide a wrong edge, nor a wrong name a wrong timer."""
    document = _with(
        max_attempts=9,
        retry="at_least_once",
        timers={"InReview": 0},
        transitions={"Submitted": ["InReview"], "InReview": ["InReview", "Approved"]},
    )
    assert problems(document) == [
        ("timers.InReview", "must be a whole number from 1 to 86400"),
        ("transitions", "Rejected is unreachable from Submitted"),
        ("transitions", "Expired is unreachable from Submitted"),
        ("max_attempts", "must be a whole number from 1 to 8"),
        ("retry", 'must be "transactional" (the only retry profile)'),
    ]


def test_a_field_of_no_type_does_not_hide_the_names_that_are_no_states() -> None:
    """One field typed ``float`` made the whole family unreadable, so a misspelt
    initial state and an edge to no state went unreported until it was fixed, and a
    terminal state that is none was told it "cannot have a timer"."""
    document = _with(initial="Submited", timers={"Expird": 5})
    document["state"]["variants"][1]["fields"]["reminders"] = "float"
    document["transitions"]["Submitted"] = ["InRevue"]
    assert problems(document) == [
        ("state.variants[1].fields.reminders", "must be one of text, integer, number, boolean"),
        ("initial", "Submited is not a variant of Approval"),
        ("timers.Expird", "Expird is not a variant of Approval"),
        ("transitions.Submitted[0]", "InRevue is not a variant of Approval"),
    ]


TYPE_NAMES = "1 to 200 characters: ASCII letters, digits or '_', starting with a letter"


def test_a_misnamed_or_repeated_variant_does_not_hide_the_other_problems() -> None:
    """A state named "On hold" or one written twice made the whole family unreadable:
    an initial state with fields, a timer on no state and a state no edge reaches went
    unreported until the name was fixed (the studio's editor showed such states as
    fine)."""
    document = _variants({"name": "On hold"}, {"name": "Approved"}, initial_fields={"n": "text"})
    document["timers"] = {"Expird": 5}
    assert problems(document) == [
        ("state.variants[5].name", f"must be {TYPE_NAMES}"),
        ("state.variants[6].name", "duplicates variant 2"),
        ("initial", "Submitted must have no fields"),
        ("timers.Expird", "Expird is not a variant of Approval"),
    ]
    del document["timers"]["Expird"]
    document["state"]["variants"][0]["fields"] = {}
    assert ("transitions", "On hold is unreachable from Submitted") in problems(document)


def check(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    status = main(["definition", "check", str(path)])
    return status, capsys.readouterr().out.splitlines()


def test_the_cli_checks_the_fixture_manifest(capsys: pytest.CaptureFixture[str]) -> None:
    status, out = check(EXAMPLE, capsys)
    fingerprint = parse_definition(approval_document()).fingerprint
    assert (status, out) == (0, [f"ok document_approval@1 {fingerprint}"])


def test_the_cli_lists_every_problem_of_a_broken_manifest(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, out = check(FIXTURES / "everything_wrong.json", capsys)
    assert status == 1
    assert out == [
        "resource: is required: the resource whose rows are the parents",
        "initial: Submitted must have no fields",
        "terminal[2]: Done is not a variant of Approval",
        "timers.InReview: must be a whole number from 1 to 86400",
        "timers.Approved: a terminal state cannot have a timer",
        "transitions.InReview[2]: Gone is not a variant of Approval",
        "transitions.Rejected: a terminal state cannot have outgoing edges",
        f"grants[0]: {GRANT_RULE}",
        "max_transitions: must be a whole number from 1 to 256",
        'retry: must be "transactional" (the only retry profile)',
        'concurrency: must be "parent" (the only concurrency profile)',
    ]


def test_wayline_definition_check_of_nine_attempts_exits_1() -> None:
    """The acceptance command, as a user runs it (a process of its own)."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "engine.cli.main",
            "definition",
            "check",
            "tests/fixtures/machines/attempts_9.json",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (
        1,
        "max_attempts: must be a whole number from 1 to 8\n",
        "",
    )
