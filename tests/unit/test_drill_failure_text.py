"""What the D9 drill's scorecard says about a failing hypothesis example."""

from __future__ import annotations

from hypothesis.errors import FlakyFailure

from verification.drills.stateful import describe


def test_a_flaky_failure_shows_what_failed_the_first_time() -> None:
    flaky = FlakyFailure("Inconsistent results", [AssertionError("instance i-1 never ended")])

    text = describe(flaky)

    assert text.startswith("FlakyFailure: Inconsistent results")
    assert text.endswith("<- AssertionError: instance i-1 never ended")


def test_a_plain_exception_is_its_type_and_message() -> None:
    assert describe(TimeoutError("quiesce")) == "TimeoutError: quiesce"
