"""How a group commit's statements are prepared: named placeholders become numbered
ones that ``EXECUTE name(...)`` fills in order."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from engine.store import batches, fencing

NAMES = st.lists(st.from_regex(r"[a-z_]{1,8}", fullmatch=True), min_size=1, max_size=12)


def test_a_name_used_twice_keeps_its_number() -> None:
    text, names = batches.positional("SELECT %(a)s, %(b)s WHERE x = %(a)s")
    assert text == "SELECT $1, $2 WHERE x = $1"
    assert names == ("a", "b")


@given(NAMES)
def test_numbering_follows_first_use_and_loses_no_placeholder(uses: list[str]) -> None:
    statement = " + ".join(f"%({name})s" for name in uses)
    text, names = batches.positional(statement)
    assert list(names) == list(dict.fromkeys(uses))  # each name once, in order of first use
    numbers = [int(n) for n in re.findall(r"\$(\d+)", text)]
    assert [names[n - 1] for n in numbers] == uses
    assert "%(" not in text


def test_the_fenced_write_is_fully_numbered() -> None:
    """The statement a worker sends at every step keeps no placeholder psycopg would
    have to fill: EXECUTE passes every one of its parameters."""
    text, names = batches.positional(fencing.FENCED_WRITE)
    assert "%" not in text
    assert len(names) == len(set(re.findall(r"%\((\w+)\)s", fencing.FENCED_WRITE)))
