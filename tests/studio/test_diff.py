"""The structural diff between versions."""

from __future__ import annotations

from studio.definitions.diff import Change, diff_documents, flatten
from studio.machines.diff import diff_machines
from tests.unit.machines import approval_document

BASE = {
    "name": "d",
    "version": "1",
    "mode": "orchestration",
    "steps": [
        {"name": "a", "kind": "activity", "target": "t.a", "retry": {"max_attempts": 3}},
        {"name": "wait", "kind": "timer", "timeout": "5m"},
        {"name": "b", "kind": "activity", "target": "t.b"},
    ],
}


def test_identical_documents_have_no_diff() -> None:
    assert diff_documents(BASE, BASE).empty


def test_steps_added_removed_and_changed_field_by_field() -> None:
    new = {
        **BASE,
        "version": "2",
        "steps": [
            {"name": "a", "kind": "activity", "target": "t.a", "retry": {"max_attempts": 5}},
            {"name": "wait", "kind": "timer", "timeout": "5m"},
            {"name": "c", "kind": "signal", "target": "go"},
        ],
    }
    diff = diff_documents(BASE, new)
    by_step = {s.step: s for s in diff.steps}
    assert by_step["c"].change is Change.ADDED
    assert by_step["b"].change is Change.REMOVED
    changed = by_step["a"]
    assert changed.change is Change.CHANGED
    assert [(f.field, f.before, f.after) for f in changed.fields] == [("retry.max_attempts", 3, 5)]
    assert "wait" not in by_step
    assert [(f.field, f.before, f.after) for f in diff.top] == [("version", "1", "2")]
    assert diff.marks("left") == {"a": "changed", "b": "removed"}
    assert diff.marks("right") == {"a": "changed", "c": "added"}


def test_a_reordered_step_is_reported_as_moved() -> None:
    swapped = {**BASE, "steps": [BASE["steps"][1], BASE["steps"][0], BASE["steps"][2]]}
    diff = diff_documents(BASE, swapped)
    positions = {s.step: s.fields for s in diff.steps}
    assert positions["a"][0].field == "position"
    assert (positions["a"][0].before, positions["a"][0].after) == (1, 2)


def test_flatten_uses_dotted_paths() -> None:
    assert flatten({"a": {"b": {"c": 1}}, "d": [1, 2]}) == {"a.b.c": 1, "d": [1, 2]}


def test_machines_diff_by_states_edges_timers_and_bounds() -> None:
    old = approval_document()
    assert diff_machines(old, old).empty
    new = approval_document()
    new["state"]["variants"][4]["name"] = "TimedOut"
    new["terminal"] = ["Approved", "Rejected", "TimedOut"]
    new["transitions"]["InReview"] = ["InReview", "Approved", "Rejected", "TimedOut"]
    new["max_transitions"] = 16
    new["grants"] = ["DbRead<Documents>"]
    diff = diff_machines(old, new)
    assert [(f.field, f.before, f.after) for f in diff.top] == [
        ("max_transitions", 8, 16),
        ("grants", ["DbRead<Documents>", "DbWrite<Documents>"], ["DbRead<Documents>"]),
    ]
    assert [(s.step, s.kind, s.change.value) for s in diff.steps] == [
        ("TimedOut", "state", "added"),
        ("Expired", "state", "removed"),
        ("InReview → TimedOut", "edge", "added"),
        ("InReview → Expired", "edge", "removed"),
    ]
    assert diff.marks("left") == {"Expired": "removed", "InReview → Expired": "removed"}
