"""The studio draws a code workflow from the outline publishing stored (issue 20)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from studio.code.outline_graph import layout, read_outline, verb_name

SAGA = {
    "name": "order-saga",
    "version": "1",
    "mode": "code",
    "outline": [
        {"verb": "step", "name": "reserve", "line": 3, "compensated": True},
        {"verb": "race", "on": ["paid", "cancelled"], "timeout": "72h", "line": 4},
        {
            "if": "which == 'cancelled'",
            "line": 5,
            "then": [{"verb": "step", "name": "release", "line": 6}, {"return": True, "line": 7}],
            "else": [],
        },
        {"verb": "step", "name": "charge", "retries": 3, "compensated": True, "line": 8},
        {"verb": "spawn", "name": "shipping", "line": 9},
        {
            "loop": "for item in order['items']",
            "line": 10,
            "body": [{"verb": "step", "name": "f'pack-{item}'", "line": 11}],
        },
        {"verb": "sleep", "timeout": "1h", "line": 12},
        {"return": True, "line": 13},
    ],
}


def test_every_verb_of_the_code_is_a_node_named_for_its_journal_entries() -> None:
    graph = layout(SAGA)
    names = [n.step for n in graph.nodes if n.is_step]
    assert "step:reserve" in names and "step:charge" in names
    assert "race:paid,cancelled" in names and "spawn:shipping" in names
    assert "sleep:1" in names
    charge = graph.node("step:charge")
    assert charge is not None and "3 tries" in charge.detail and "line 8" in charge.detail


def test_branches_and_loops_close_where_the_code_rejoins() -> None:
    graph = layout(SAGA)
    closings = sorted(n.title for n in graph.nodes if n.kind == "merge")
    assert closings == ["end if", "repeat"]
    loop = next(n for n in graph.nodes if n.kind == "loop")
    assert loop.title == "for item in order['items']"


def test_node_ids_are_unique_even_when_names_repeat() -> None:
    twice = {"outline": [{"verb": "step", "name": "a"}, {"verb": "step", "name": "a"}]}
    ids = [n.node_id for n in layout(twice).nodes]
    assert len(ids) == len(set(ids))


def test_an_unnamed_verb_counts_its_kind() -> None:
    assert verb_name("sleep", count=2) == "sleep:2"
    assert verb_name("wait", "paid") == "wait:paid"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)


@given(st.dictionaries(st.sampled_from(["outline", "name"]), json_values))
def test_any_document_draws_without_raising(document: dict) -> None:
    structure = read_outline(document)
    assert len(layout(document).nodes) >= 2 + len(structure.steps) - 1
