"""Drafts that hold one name twice, renames to a taken name, and where a form's step is
after other edits: the pure parts behind the editor's integrity (no database)."""

from __future__ import annotations

import pytest

from studio.definitions import draft_edits as edits
from studio.definitions.draft_edits import EditRejected, FieldRejected
from studio.definitions.structure import read_structure


def build() -> dict:
    """activity_1, parallel_1, parallel_1_branch_1, parallel_1_branch_2, parallel_1_join."""
    document = edits.new_document("flow")
    document = edits.insert_step(document, 0, "activity").document
    return edits.insert_step(document, 1, "parallel").document


def test_a_rename_to_a_taken_name_is_refused_naming_the_step_that_has_it() -> None:
    with pytest.raises(FieldRejected) as refused:
        edits.update_step(build(), 0, {"name": "parallel_1_branch_1"})
    assert (refused.value.index, refused.value.field) == (0, "name")
    assert "step 3 (activity, a branch of parallel_1)" in str(refused.value)
    assert edits.update_step(build(), 0, {"name": "activity_1"}).selected == "activity_1"


def test_duplicates_get_their_own_refs_and_ids_and_branches_stay_with_their_owner() -> None:
    document = build()
    document["steps"][0]["name"] = "parallel_1_branch_1"
    structure = read_structure(document)
    ids = [s.node_id for s in structure.steps]
    assert len(set(ids)) == len(ids)
    first, owner, branch = structure.steps[0], structure.steps[1], structure.steps[2]
    assert (first.ref, branch.ref) == ("parallel_1_branch_1", "#2")
    assert structure.step("#2") is branch
    assert structure.owner_of(first) is None and structure.owner_of(branch) is owner
    assert structure.branch_step(owner, "parallel_1_branch_1") is branch
    assert [b.head.index for b in structure.blocks] == [0, 1]


def test_ids_stay_unique_when_a_name_looks_like_a_generated_id() -> None:
    document = build()
    document["steps"][0]["name"] = "n2"  # step-n2 is also the id a duplicate at 2 gets
    document["steps"][2]["name"] = "n2"
    ids = [s.node_id for s in read_structure(document).steps]
    assert len(set(ids)) == len(ids)


def test_a_form_finds_its_step_after_it_moved_or_refuses() -> None:
    document = build()
    assert edits.locate_step(document, 0, "activity_1") == 0
    moved = edits.move_step(document, 0, 1).document  # the activity now comes last
    assert edits.locate_step(moved, 0, "activity_1") == 4
    assert edits.locate_step(moved, 0, None) == 0
    with pytest.raises(EditRejected):
        edits.locate_step(edits.delete_step(document, 0).document, 0, "activity_1")


def test_an_edit_queued_behind_its_own_rename_finds_the_renamed_step() -> None:
    document = build()
    form = {"name": "charge", "target": "payments.charge"}
    renamed = edits.update_step(document, 0, {"name": "charge"}).document
    assert edits.locate_step(renamed, 0, "activity_1", form["name"]) == 0
    with pytest.raises(EditRejected):  # the rename's name alone never reaches another place
        edits.locate_step(edits.move_step(renamed, 0, 1).document, 0, "activity_1", "charge")


def test_a_step_whose_name_is_cleared_stays_chosen_by_its_position() -> None:
    """Its form stays open with "is required" beside the name (it closed, and the
    problem was listed under the definition)."""
    cleared = edits.update_step(build(), 0, {"name": "  "})
    assert "name" not in cleared.document["steps"][0]
    assert cleared.selected == "#0"
    duplicate = build()
    duplicate["steps"][0]["name"] = "parallel_1_branch_1"  # as the JSON tab allows
    assert edits.update_step(duplicate, 2, {"timeout": "5s"}).selected == "#2"
