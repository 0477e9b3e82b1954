"""A check that examined nothing is never shown as evidence: the scorecard says an
invariant no drill exercised was not exercised, and why, instead of a passing 0/0."""

from __future__ import annotations

from verification import reports, scorecard
from verification.drills.base import DrillResult
from verification.findings import NAMES, NOT_EXERCISED


def result(checks: dict[str, tuple[int, list[str]]]) -> DrillResult:
    drill = DrillResult("M1-kill-after_claim-s0", "M1", "kill", 7, "passed", 1.0)
    drill.checks = checks
    return drill


def test_every_invariant_says_what_it_takes_to_exercise_it() -> None:
    assert NOT_EXERCISED.keys() == NAMES.keys()


def test_an_invariant_no_drill_exercised_says_so_and_why() -> None:
    invariants = scorecard._invariants([result({"M1": (8, []), "M4": (0, [])})])

    assert invariants["M1"]["not_exercised"] == ""
    assert invariants["M4"]["not_exercised"] == NOT_EXERCISED["M4"]
    lines = "\n".join(reports._invariant_lines(invariants))
    assert "M1 machine write per transition 8/0" in lines
    assert "M4 one active execution per parent not exercised: no two executions" in lines
    assert "0/0" not in lines


def test_a_violation_found_without_a_count_is_shown_as_a_violation() -> None:
    invariants = scorecard._invariants([result({"I4": (0, ["completed work w changed"])})])

    assert invariants["I4"]["not_exercised"] == ""
    assert "I4 terminal once 0/1" in "\n".join(reports._invariant_lines(invariants))


def test_a_scorecard_written_before_not_exercised_still_reads() -> None:
    older = {"I1": {"name": "no lost work", "checked": 2, "violations": 0, "first": None}}

    assert reports._invariant_lines(older) == ["invariants I1 no lost work 2/0"]
