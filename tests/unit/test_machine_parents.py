"""Invariant M4 over a whole drill: two executions of a machine for one parent are
never active at once, whether or not they have ended by the time of the check."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from verification.machine_checks import CLOCK_SLACK, Lifespan, overlaps

T0 = datetime(2024, 5, 1, 12, tzinfo=UTC)
CHECKED_AT = T0 + timedelta(hours=1)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def span(
    execution: str, active_by: float | None, ended: float | None, parent: str = "p"
) -> Lifespan:
    return Lifespan(
        execution,
        "drill.machine",
        parent,
        None if active_by is None else at(active_by),
        None if ended is None else at(ended),
    )


def test_two_ended_executions_of_one_parent_that_overlapped_are_named() -> None:
    checked, problems = overlaps([span("a", 1, 10), span("b", 2, 11)], CHECKED_AT)

    assert checked == 2
    assert len(problems) == 1
    assert problems[0].startswith("drill.machine: b (from ")
    assert problems[0].endswith("was active for parent p at once with a")


def test_executions_of_one_parent_one_after_the_other_pass_and_count() -> None:
    checked, problems = overlaps([span("a", 1, 10), span("b", 12, 20)], CHECKED_AT)

    assert (checked, problems) == (2, [])


def test_a_start_stamped_before_the_end_it_waited_for_is_not_an_overlap() -> None:
    """b's first move came after a's end: only when it was surely active counts."""
    checked, problems = overlaps([span("a", 1, 10), span("b", 10, None)], CHECKED_AT)

    assert (checked, problems) == (2, [])


def test_an_execution_still_active_overlaps_one_that_moved_before_it_ended() -> None:
    _, problems = overlaps([span("a", 1, None), span("b", 5, 8)], CHECKED_AT)

    assert len(problems) == 1


def test_two_executions_active_at_the_check_overlap_even_without_a_move() -> None:
    _, problems = overlaps([span("a", None, None), span("b", None, None)], CHECKED_AT)

    assert len(problems) == 1


def test_an_execution_that_never_moved_proves_nothing_against_an_ended_one() -> None:
    _, problems = overlaps([span("a", 1, 10), span("b", None, None)], CHECKED_AT)

    assert problems == []


def test_executions_alone_with_their_parent_exercise_nothing() -> None:
    checked, problems = overlaps([span("a", 1, 10, "p"), span("b", 2, 11, "q")], CHECKED_AT)

    assert (checked, problems) == (0, [])


def test_the_same_parent_of_another_machine_is_another_parent() -> None:
    other = Lifespan("b", "other.machine", "p", at(2), at(11))

    assert overlaps([span("a", 1, 10), other], CHECKED_AT) == (0, [])


def test_an_overlap_within_the_clocks_slack_is_not_named() -> None:
    """Event times are the deciding processes' clocks, each up to a round trip behind
    the server's: b's first move stamped a little before a's end is not a violation."""
    slack = CLOCK_SLACK.total_seconds()
    near = overlaps([span("a", 1, 10), span("b", 10 - slack / 2, 20)], CHECKED_AT)
    assert near == (2, [])
    far = overlaps([span("a", 1, 10), span("b", 10 - 2 * slack, 20)], CHECKED_AT)
    assert len(far[1]) == 1
