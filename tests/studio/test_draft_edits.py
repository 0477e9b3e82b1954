"""Editor operations on draft documents: insert, branches, move, delete, update."""

from __future__ import annotations

import pytest

from engine.model.validation import parse_definition
from studio.definitions import draft_edits as edits
from studio.definitions.draft_edits import EditRejected


def names(document: dict) -> list[str]:
    return [s["name"] for s in document["steps"]]


def complete(document: dict) -> dict:
    """Give every step without a target one, so the document can validate."""
    for step in document["steps"]:
        if step["kind"] in ("activity", "signal") and "target" not in step:
            step["target"] = f"t.{step['name']}"
    return document


def build() -> dict:
    document = edits.new_document("flow")
    document = edits.insert_step(document, 0, "activity").document
    document = edits.insert_step(document, 1, "parallel").document
    document = edits.insert_step(document, 5, "timer").document
    return edits.insert_step(document, 6, "race").document


def test_inserted_blocks_are_complete_and_validate_once_targets_are_set() -> None:
    document = build()
    assert names(document) == [
        "activity_1",
        "parallel_1",
        "parallel_1_branch_1",
        "parallel_1_branch_2",
        "parallel_1_join",
        "timer_1",
        "race_1",
        "race_1_signal",
        "race_1_timeout",
    ]
    definition = parse_definition(complete(document))
    assert definition.step("parallel_1_join").branches == (
        "parallel_1_branch_1",
        "parallel_1_branch_2",
    )


def test_edits_never_change_their_input() -> None:
    document = build()
    before = repr(document)
    edits.delete_step(document, 1)
    edits.update_step(document, 0, {"name": "renamed"})
    assert repr(document) == before


def test_adding_a_branch_updates_the_join_and_the_fan_out_limit() -> None:
    edited = edits.add_branch(build(), 1)
    document = edited.document
    parallel = document["steps"][1]
    join = next(s for s in document["steps"] if s["kind"] == "join")
    assert (
        parallel["branches"]
        == join["branches"]
        == [
            "parallel_1_branch_1",
            "parallel_1_branch_2",
            edited.selected,
        ]
    )
    assert parallel["fan_out_limit"] == 3
    parse_definition(complete(document))


def test_a_race_branch_must_be_a_wait() -> None:
    with pytest.raises(EditRejected):
        edits.add_branch(build(), 6, "activity")
    document = edits.add_branch(build(), 6, "approval").document
    assert document["steps"][6]["branches"][-1] == "race_1_approval"


def test_deleting_a_fork_takes_its_branches_and_join() -> None:
    document = edits.delete_step(build(), 1).document
    assert names(document) == ["activity_1", "timer_1", "race_1", "race_1_signal", "race_1_timeout"]
    document = edits.delete_step(document, 2).document
    assert names(document) == ["activity_1", "timer_1"]


def test_deleting_a_branch_removes_it_from_its_parallel_and_join() -> None:
    document = edits.delete_step(build(), 2).document
    assert document["steps"][1]["branches"] == ["parallel_1_branch_2"]
    assert document["steps"][3]["branches"] == ["parallel_1_branch_2"]


def test_moving_swaps_whole_blocks_and_branches_reorder_in_place() -> None:
    document = edits.move_step(build(), 5, -1).document  # the timer above the parallel
    assert names(document)[:3] == ["activity_1", "timer_1", "parallel_1"]
    document = edits.move_step(document, 3, 1).document  # first branch down
    assert document["steps"][2]["branches"] == ["parallel_1_branch_2", "parallel_1_branch_1"]
    assert document["steps"][5]["branches"] == ["parallel_1_branch_2", "parallel_1_branch_1"]
    with pytest.raises(EditRejected, match="already first"):
        edits.move_step(document, 0, -1)


def test_update_sets_every_field_of_the_kind_and_keeps_bad_values_for_the_validator() -> None:
    values = {
        "name": "reserve",
        "target": "inventory.reserve",
        "timeout": "45s",
        "retry.max_attempts": "7",
        "input_limit": "lots",
        "result_limit": "",
        "compensation.shown": "1",
        "compensation.enabled": "1",
        "on_unknown": "retry_same_key",
    }
    step = edits.update_step(build(), 0, values).document["steps"][0]
    assert step["name"] == "reserve"
    assert step["retry"]["max_attempts"] == 7
    assert step["input_limit"] == "lots"
    assert "result_limit" not in step
    assert step["compensation"]["timeout"] == "30s"
    assert step["on_unknown"] == "retry_same_key"
    assert list(step)[:3] == ["name", "kind", "target"]
    without = edits.update_step({"steps": [step]}, 0, {"compensation.shown": "1"})
    assert "compensation" not in without.document["steps"][0]


def test_renaming_a_branch_renames_it_in_its_parallel_and_join() -> None:
    edited = edits.update_step(build(), 2, {"name": "fraud"})
    document = edited.document
    assert edited.selected == "fraud"
    assert document["steps"][1]["branches"][0] == document["steps"][4]["branches"][0] == "fraud"


def test_json_must_be_an_object() -> None:
    assert edits.parse_json('{"name": "x"}') == {"name": "x"}
    for text in ("[1]", "{", "null"):
        with pytest.raises(EditRejected):
            edits.parse_json(text)


def test_next_version() -> None:
    assert edits.next_version("1", {"1", "2"}) == "3"
    assert edits.next_version("2.9", set()) == "2.10"
    assert edits.next_version("beta", set()) == "beta-2"
