"""Words in messages: the article before a kind, a mode or a verb ("an activity step")."""

from __future__ import annotations

VOWELS = frozenset("aeiou")


def with_article(word: str) -> str:
    """``word`` after "a" or "an", as its first letter says: "an activity", "a timer".

    Wayline's kinds, modes and verbs are all spoken as they are spelled (none is like
    "an hour" or "a user"), so the letter is enough. Quotes before it are skipped, so a
    quoted word reads "an 'approval'"."""
    first = word.lstrip("'\"")[:1].lower()
    return f"{'an' if first in VOWELS else 'a'} {word}"


def counted(count: int, noun: str) -> str:
    """``count`` and ``noun``, plural unless it is one: "1 instance", "3 work items".

    Wayline's counted nouns all take a plain "s" (instances, work items, problems)."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def clipped(text: str, most: int) -> str:
    """``text``, or its first ``most`` characters and "…" when it is longer: a value a
    person typed, said back in a message without filling the screen."""
    return text if len(text) <= most else text[:most] + "…"
