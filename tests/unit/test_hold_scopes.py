"""What a hold covers and how much a release lets go, as callers name them: every bad
value is refused with what was wrong and what is allowed."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine import MAX_RELEASE_COUNT, MAX_RELEASE_RATE, HoldScope, InputRefused, ReleaseMode
from engine.model.holds import check_scope, parse_scope, release_amount


def test_a_scope_is_a_name_a_version_or_the_team() -> None:
    assert parse_scope("red", None) == HoldScope("red")
    assert parse_scope("red", "order") == HoldScope("red", "order")
    assert parse_scope("", "order@2") == HoldScope("", "order", "2")
    assert [s.label for s in (HoldScope("red"), HoldScope("", "o"), HoldScope("", "o", "2"))] == [
        "team red",
        "o",
        "o@2",
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("no such/name", "the definition name must be 1 to 200 characters"),
        ("order@", "name a version after @, or leave the @ out"),
        ("order@v 2", "the version must be 1 to 200 characters"),
        ("@2", "the definition name must be"),
        ("", "the definition name must be"),
    ],
)
def test_a_bad_scope_says_what_was_wrong(text: str, message: str) -> None:
    with pytest.raises(InputRefused, match=message):
        parse_scope("", text)


def test_a_version_needs_its_name() -> None:
    with pytest.raises(InputRefused, match="names its definition too"):
        check_scope(HoldScope("", "", "2"))


@given(st.integers(min_value=-5, max_value=MAX_RELEASE_COUNT + 5))
def test_a_count_is_a_whole_number_of_instances_within_the_limit(count: int) -> None:
    if 1 <= count <= MAX_RELEASE_COUNT:
        assert release_amount(ReleaseMode.COUNT, count) == count
    else:
        with pytest.raises(InputRefused, match=f"from 1 to {MAX_RELEASE_COUNT} instances"):
            release_amount(ReleaseMode.COUNT, count)


@given(st.floats(min_value=-1.0, max_value=MAX_RELEASE_RATE * 2, allow_nan=False))
def test_a_rate_is_above_zero_and_within_the_limit(rate: float) -> None:
    if 0 < rate <= MAX_RELEASE_RATE:
        assert release_amount(ReleaseMode.RATE, rate) == rate
    else:
        with pytest.raises(InputRefused, match="instances per second"):
            release_amount(ReleaseMode.RATE, rate)


def test_a_release_of_everything_takes_no_amount_and_a_count_no_fraction() -> None:
    assert release_amount(ReleaseMode.ALL, None) == 0.0
    with pytest.raises(InputRefused, match="takes no count or rate"):
        release_amount(ReleaseMode.ALL, 3)
    with pytest.raises(InputRefused, match="a whole number"):
        release_amount(ReleaseMode.COUNT, 1.5)  # type: ignore[arg-type]
