"""Words in messages read as English: one of a thing is never "thing(s)"."""

from __future__ import annotations

from engine.model.words import counted, with_article


def test_a_count_of_one_is_singular_and_any_other_plural() -> None:
    assert [counted(n, "work item") for n in (0, 1, 2)] == [
        "0 work items",
        "1 work item",
        "2 work items",
    ]


def test_the_article_follows_the_first_letter_past_quotes() -> None:
    assert [with_article(w) for w in ("activity", "timer", "'approval'")] == [
        "an activity",
        "a timer",
        "an 'approval'",
    ]
