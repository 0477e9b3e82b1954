"""A machine draft's edits (pure) and where its problems are shown (on their states)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.model.validation import parse_definition
from studio.definitions.draft_edits import EditRejected
from studio.definitions.problems import check_document
from studio.machines import edits
from studio.machines.authoring import locate
from studio.machines.diagram import read_shape
from tests.unit.machines import FIXTURES, approval_document, machine_documents


def test_a_new_machine_is_valid_from_the_start() -> None:
    definition = parse_definition(edits.new_machine("approvals", "1"))
    assert definition.mode == "machine"


def test_states_edges_timers_and_bounds_are_written_as_asked() -> None:
    doc = edits.new_machine("m")
    doc = edits.add_state(doc, "Review", "count: integer, by: text").document
    doc = edits.add_edge(doc, "Start", "Review").document
    doc = edits.add_edge(doc, "Review", "Done").document
    doc = edits.add_edge(doc, "Review", "Review").document
    doc = edits.update_state(
        doc, "Review", fields="count: integer", initial=False, terminal=False, timer="300"
    ).document
    doc = edits.set_bounds(doc, {"max_attempts": "5", "grants": "DbRead<Records>"}, "").document
    definition = parse_definition(doc)
    manifest = definition.manifest
    assert manifest.variant("Review").fields == (("count", "integer"),)  # type: ignore[union-attr]
    assert set(manifest.targets("Review")) == {"Review", "Done"}  # type: ignore[union-attr]
    assert manifest.timer("Review") == 300  # type: ignore[union-attr]
    assert (manifest.max_attempts, manifest.grants) == (5, ("DbRead<Records>",))  # type: ignore[union-attr]


def test_what_cannot_be_written_is_refused_and_what_is_wrong_is_kept() -> None:
    doc = edits.new_machine("m")
    with pytest.raises(EditRejected, match="already"):
        edits.add_state(doc, "Start", "")
    with pytest.raises(EditRejected, match="name: type"):
        edits.add_state(doc, "Review", "count")
    with pytest.raises(EditRejected, match="the field by is written twice: give each field once"):
        edits.add_state(doc, "Review", "by: text, count: integer, by: integer")
    with pytest.raises(EditRejected, match="Nowhere is not a state"):
        edits.add_edge(doc, "Start", "Nowhere")
    with pytest.raises(EditRejected, match="already"):
        edits.add_edge(doc, "Start", "Done")
    odd = edits.update_state(doc, "Start", fields="", initial=True, terminal=False, timer="soon")
    assert odd.document["timers"] == {"Start": "soon"}  # validation says why, on Start
    bad = edits.set_bounds(doc, {"max_transitions": "many"}, "").document
    assert bad["max_transitions"] == "many"


@given(machine_documents(), st.data())
def test_removing_a_state_removes_every_mention_of_it(document: Any, data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(list(read_shape(document).states)))
    doc = edits.remove_state(document, name).document
    text = json.dumps({k: v for k, v in doc.items() if k not in ("name", "function", "resource")})
    assert f'"{name}"' not in text
    assert name not in read_shape(doc).states


def _problems_by_state(document: Any) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for problem in check_document(document).errors:
        found.setdefault(locate(problem, document), []).append(problem.path)
    return found


def test_problems_are_located_on_the_states_they_concern() -> None:
    wrong = json.loads((Path(FIXTURES) / "everything_wrong.json").read_text())
    found = _problems_by_state(wrong)
    assert found["Submitted"] == ["initial"]
    assert found["InReview"] == ["timers.InReview", "transitions.InReview[2]"]
    assert found["Approved"] == ["timers.Approved"]
    assert found["Rejected"] == ["transitions.Rejected"]
    assert "Done" in found  # terminal[2] names a state that does not exist
    assert set(found[""]) == {"resource", "grants[0]", "max_transitions", "retry", "concurrency"}
    unreachable = edits.add_state(approval_document(), "Orphan", "").document
    assert _problems_by_state(unreachable)["Orphan"] == ["transitions"]
