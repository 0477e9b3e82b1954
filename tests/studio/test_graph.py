"""The graph layout: blocks, stable ids, insert points and branch slots."""

from __future__ import annotations

import json
from pathlib import Path

from studio.definitions.graph import NODE_W, layout
from studio.definitions.structure import read_structure

EXAMPLE = json.loads(
    (Path(__file__).resolve().parents[2] / "examples" / "order_fulfillment.json").read_text()
)


def test_every_step_is_one_node_with_a_stable_id() -> None:
    graph = layout(EXAMPLE)
    ids = [n.node_id for n in graph.nodes if n.is_step]
    assert ids == [f"step-{s['name']}" for s in _block_order(EXAMPLE)]
    assert len(set(ids)) == len(EXAMPLE["steps"])
    assert layout(EXAMPLE) == graph  # the same document always draws the same picture


def _block_order(document: dict) -> list[dict]:
    structure = read_structure(document)
    return [document["steps"][s.index] for b in structure.blocks for s in b.members()]


def test_branches_sit_side_by_side_between_their_parallel_and_join() -> None:
    graph = layout(EXAMPLE)
    checks, done = graph.node("checks"), graph.node("checks_done")
    fraud, stock = graph.node("fraud_check"), graph.node("inventory_check")
    assert fraud.y == stock.y
    assert checks.y < fraud.y < done.y
    assert fraud.x + NODE_W < stock.x
    assert abs((fraud.cx + stock.cx) / 2 - checks.cx) < 1  # centred under their head


def test_a_race_closes_at_a_merge_point_before_the_next_step() -> None:
    graph = layout(EXAMPLE)
    merge = next(n for n in graph.nodes if n.kind == "merge")
    assert graph.node("shipped").y < merge.y < graph.node("notify").y


def test_insert_points_name_the_document_position_of_the_next_block() -> None:
    graph = layout(EXAMPLE)
    points = sorted(e.insert_at for e in graph.edges if e.insert_at is not None)
    names = [s["name"] for s in EXAMPLE["steps"]]
    # start, then before each top-level block, then the end
    assert points == [0, 1, 2, 6, 7, 10, 11]
    assert names[6] == "manager_approval" and names[10] == "notify"
    assert {s.owner for s in graph.slots} == {"checks", "delivery"}


def test_an_empty_draft_is_start_and_end_with_one_insert_point() -> None:
    graph = layout({"name": "x", "steps": []})
    assert [n.kind for n in graph.nodes] == ["start", "end"]
    assert [e.insert_at for e in graph.edges] == [0]


def test_broken_documents_still_draw() -> None:
    for document in (None, [], {"steps": "no"}, {"steps": [1, {"kind": "parallel"}, {}]}):
        graph = layout(document)
        assert graph.width > 0
    graph = layout({"steps": [{"name": "a b", "kind": "activity"}, {"kind": "timer"}]})
    assert [n.node_id for n in graph.nodes if n.is_step] == ["step-n0", "step-n1"]


def test_steps_between_a_parallel_and_its_join_run_meanwhile() -> None:
    document = {
        "steps": [
            {"name": "p", "kind": "parallel", "branches": ["a", "b"]},
            {"name": "x", "kind": "timer", "timeout": "1s"},
            {"name": "a", "kind": "activity"},
            {"name": "b", "kind": "activity"},
            {"name": "j", "kind": "join", "branches": ["a", "b"]},
        ]
    }
    block = read_structure(document).blocks[0]
    assert block.meanwhile and [c[0].head.name for c in block.columns] == ["a", "b", "x"]
    graph = layout(document)
    assert graph.node("x").y == graph.node("a").y
    assert any(e.insert_at == 4 for e in graph.edges)  # after x, before the join
