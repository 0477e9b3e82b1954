"""How a group commit's statements are prepared: named placeholders become numbered
ones that ``EXECUTE name(...)`` fills in order."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from engine.store import batches, leases
from engine.store.statements import leases as lease_sql

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
    text, names = batches.positional(lease_sql.FENCED_WRITE)
    assert "%" not in text
    assert len(names) == len(set(re.findall(r"%\((\w+)\)s", lease_sql.FENCED_WRITE)))


@given(st.lists(st.sampled_from("abcd"), max_size=12))
def test_members_of_one_instance_go_to_successive_statements_in_order(
    instances: list[str],
) -> None:
    rounds = leases.set_rounds([{"instance": instance} for instance in instances])
    placed = [k for positions in rounds for k in positions]
    assert sorted(placed) == list(range(len(instances)))
    for positions in rounds:
        assert positions == sorted(positions)
        assert len({instances[k] for k in positions}) == len(positions)
    for k in placed:  # the n-th member of an instance is in statement n
        earlier = [j for j in placed if j < k and instances[j] == instances[k]]
        assert k in rounds[len(earlier)]


def test_the_members_travel_as_one_json_array_with_their_rows_nested() -> None:
    at = datetime(2026, 12, 2, 4, 30, tzinfo=UTC)
    scalars = dict.fromkeys(n for n in leases.MEMBER_FIELDS_SENT if n != "instance")
    values = {**scalars, "at": at, "lease": timedelta(seconds=30, microseconds=5)}
    writes = [
        {"instance": "a", **values, "history": '[{"sequence": 1}]', "work": "[]", "now": None},
        {"instance": "b", **values, "history": "[]", "work": '[{"work_id": "w"}]', "now": None},
    ]
    sent = leases.set_params(writes)
    members = json.loads(sent["members"])
    assert [m["m"] for m in members] == [0, 1]
    assert [m["instance"] for m in members] == ["a", "b"]
    assert members[0]["history"] == [{"sequence": 1}] and members[1]["work"] == [{"work_id": "w"}]
    assert datetime.fromisoformat(members[0]["at"]) == at
    assert members[0]["lease"] == "PT30.000005S"  # ISO 8601, which interval reads
    assert sent["now"] is None


def test_the_set_statement_is_fully_numbered_and_checks_the_lease_like_held() -> None:
    text, names = batches.positional(lease_sql.FENCED_SET)
    assert "%" not in text and names == ("members", "now")
    for part in ("w.state = 2", "lease_owner", "lease_token", "lease_expires_at", "deadline"):
        assert part in lease_sql.SET_HELD and part in lease_sql.HELD
