"""The state diagram's layout: pure, from the document, with invariants any manifest
(and any half-written draft) keeps, and the fixture's picture in particular."""

from __future__ import annotations

import re
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from studio.machines.diagram import layers, layout, read_shape, seconds_text
from tests.unit.machines import approval_document, machine_documents

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)


def _rectangles_apart(a: Any, b: Any) -> bool:
    return a.x + a.w <= b.x or b.x + b.w <= a.x or a.y + a.h <= b.y or b.y + b.h <= a.y


def _check_invariants(document: Any) -> None:
    shape = read_shape(document)
    diagram = layout(document)
    placed = [n.step for n in diagram.nodes]
    assert placed == list(shape.states)  # every state placed once, in manifest order
    assert len({n.node_id for n in diagram.nodes}) == len(placed)
    for i, a in enumerate(diagram.nodes):
        assert a.x >= 0 and a.x + a.w <= diagram.width
        assert a.y >= 0 and a.y + a.h <= diagram.height
        for b in diagram.nodes[i + 1 :]:
            assert _rectangles_apart(a, b)
    assert {(e.source, e.target) for e in diagram.edges} == set(shape.edges)
    assert len(diagram.edges) == len(shape.edges)
    for edge in diagram.edges:
        assert edge.source in placed and edge.target in placed
        numbers = [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", edge.path)]
        xs, ys = numbers[0::2], numbers[1::2]
        assert min(xs) >= 0 and max(xs) <= diagram.width
        assert min(ys) >= 0 and max(ys) <= diagram.height


@given(machine_documents())
def test_every_state_is_placed_once_and_every_edge_joins_placed_states(document: Any) -> None:
    _check_invariants(document)


@given(machine_documents())
def test_rows_are_distances_from_the_initial_state(document: Any) -> None:
    shape = read_shape(document)
    rows = layers(shape)
    assert rows[shape.initial] == 0
    assert [s for s, row in rows.items() if row == 0] == [shape.initial]
    for source, target in shape.edges:
        assert rows[target] <= rows[source] + 1  # a breadth-first walk's distances
    routes = {(e.source, e.target): e.route for e in layout(document).edges}
    for (source, target), route in routes.items():
        expected = (
            "self"
            if source == target
            else "down"
            if rows[target] > rows[source]
            else "level"
            if rows[target] == rows[source]
            else "back"
            if rows[source] - rows[target] == 1
            else "lane"
        )
        assert route == expected


@given(JSON)
def test_any_draft_however_wrong_is_drawn_without_failing(document: Any) -> None:
    _check_invariants(document)


@given(machine_documents(), st.data())
def test_a_draft_with_unreachable_states_and_unknown_names_draws_them_in_a_last_row(
    document: Any, data: st.DataObject
) -> None:
    variants = document["state"]["variants"]
    variants.append({"name": "Orphan", "fields": {}})
    document["transitions"]["Orphan"] = ["Nowhere", document["initial"]]
    document["initial"] = data.draw(st.sampled_from([document["initial"], "Missing", 7]))
    _check_invariants(document)
    diagram = layout(document)
    orphan = diagram.node("Orphan")
    assert orphan is not None and orphan.layer == max(n.layer for n in diagram.nodes)


def test_the_fixture_is_drawn_with_its_marks() -> None:
    diagram = layout(approval_document())
    nodes = {n.step: n for n in diagram.nodes}
    assert [n.layer for n in diagram.nodes] == [0, 1, 2, 2, 2]
    assert nodes["Submitted"].initial and diagram.entry == (nodes["Submitted"].cx, 56)
    assert [s for s, n in nodes.items() if n.terminal] == ["Approved", "Rejected", "Expired"]
    assert nodes["InReview"].badge == "timer 1 min"
    assert nodes["InReview"].detail == "reminders: integer"
    assert nodes["Expired"].detail == "no fields"
    routes = {e.edge_id: e.route for e in diagram.edges}
    assert routes["edge-InReview--InReview"] == "self"
    assert routes["edge-Submitted--InReview"] == "down"


def test_back_edges_go_up_through_gaps_and_a_lane_when_rows_lie_between() -> None:
    document = approval_document()
    document["transitions"]["InReview"] = ["Submitted", "Approved"]
    document["transitions"]["Approved"] = []
    document["terminal"] = ["Approved"]
    document["state"]["variants"] = document["state"]["variants"][:3]
    document["timers"] = {}
    document["transitions"]["Submitted"] = ["InReview"]
    document["state"]["variants"].append({"name": "Later", "fields": {}})
    document["transitions"]["Approved"] = []
    document["transitions"]["InReview"].append("Later")
    document["transitions"]["Later"] = ["Submitted", "Approved"]
    edges = {e.edge_id: e for e in layout(document).edges}
    assert edges["edge-InReview--Submitted"].route == "back"
    assert edges["edge-Later--Submitted"].route == "lane"
    _check_invariants(document)


def test_timer_durations_are_shown_in_their_largest_whole_unit() -> None:
    assert [seconds_text(s) for s in (1, 59, 60, 90, 300, 3600, 5400, 86_400)] == [
        "1 s", "59 s", "1 min", "90 s", "5 min", "1 h", "90 min", "24 h",
    ]  # fmt: skip
