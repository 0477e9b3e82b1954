"""Validation problems located on their step and field."""

from __future__ import annotations

from studio.definitions.problems import check_document

DOC = {
    "name": "d",
    "version": "1",
    "mode": "orchestration",
    "steps": [
        {
            "name": "charge",
            "kind": "activity",
            "target": "payments.charge",
            "timeout": "30s",
            "input_limit": 10,
            "result_limit": 10,
            "retry": {"max_attempts": 0, "initial_delay": "1s", "max_delay": "1m"},
        },
        {"name": "pause", "kind": "timer", "timeout": "soon"},
    ],
}


def test_engine_errors_land_on_the_step_and_field() -> None:
    problems = check_document(DOC)
    assert problems.definition is None
    located = {(p.step, p.field) for p in problems.errors}
    assert located == {("charge", "retry.max_attempts"), ("pause", "timeout")}
    assert problems.counts_by_step() == {"charge": 1, "pause": 1}
    assert "duration" in problems.for_field(1, "timeout")[0].message


def test_document_level_errors_have_no_step() -> None:
    problems = check_document({**DOC, "name": "", "steps": []})
    assert {p.path for p in problems.document_errors} == {"name", "steps"}


def test_targets_no_worker_advertises_are_warnings_not_errors() -> None:
    fixed = {
        **DOC,
        "steps": [{**DOC["steps"][0], "retry": {**DOC["steps"][0]["retry"], "max_attempts": 3}}],
    }
    problems = check_document(fixed, ["inventory.reserve"])
    assert problems.definition is not None
    assert [(p.step, p.field, p.warning) for p in problems.items] == [("charge", "target", True)]
    assert check_document(fixed, ["payments.charge"]).items == ()
    long = {**fixed, "steps": [{**fixed["steps"][0], "target": "t" * 600}]}
    warned = [p.message for p in check_document(long, []).items if p.warning]
    assert warned == [f"no running worker advertises '{'t' * 40}…'"], "not all 600 characters"


def test_a_step_without_a_name_or_with_a_taken_one_is_named_and_linked_by_position() -> None:
    """Not "definition name is required": the list names the step and links to it."""
    unnamed = {"kind": "timer", "timeout": "1m"}
    again = {"name": "pause", "kind": "timer", "timeout": "soon"}
    problems = check_document({**DOC, "steps": [*DOC["steps"], unnamed, again]})
    located = {(p.label, p.ref, p.field) for p in problems.errors}
    assert ("step 3", "#2", "name") in located
    assert ("pause", "#3", "name") in located  # the second pause, not the first
    assert ("pause", "pause", "timeout") in located
    assert {(p.label, p.ref) for p in problems.document_errors} == set()
