"""Validation reports every problem of a document in one pass: duplicate names and
branches naming no step come with the field errors, not after they are fixed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.cli.main import main
from engine.model.errors import DefinitionInvalid
from engine.model.validation import parse_definition
from studio.definitions.problems import check_document

RETRY = {"max_attempts": 3, "initial_delay": "1s", "max_delay": "1m"}


def activity(name: str, **fields: Any) -> dict[str, Any]:
    return {
        "name": name,
        "kind": "activity",
        "target": "t.run",
        "timeout": "30s",
        "input_limit": 1024,
        "result_limit": 1024,
        "retry": RETRY,
        **fields,
    }


def broken() -> dict[str, Any]:
    """A field error, a duplicate name and a branch naming no step, all at once."""
    return {
        "name": "all.at.once",
        "version": "1",
        "mode": "orchestration",
        "steps": [
            activity("reserve", timeout="soon"),
            {
                "name": "checks",
                "kind": "parallel",
                "branches": ["fraud", "gone"],
                "fan_out_limit": 2,
            },
            activity("fraud"),
            activity("fraud"),
            {"name": "checks_done", "kind": "join", "branches": ["fraud", "gone"]},
        ],
    }


def errors(document: Any) -> dict[str, str]:
    with pytest.raises(DefinitionInvalid) as raised:
        parse_definition(document)
    return {e.path: e.message for e in raised.value.errors}


def test_field_errors_come_with_duplicates_and_dangling_branches() -> None:
    found = errors(broken())
    assert "steps[0].timeout" in found
    assert found["steps[3].name"] == "duplicates step 2"
    assert found["steps[1].branches[1]"] == "names no step: 'gone'"


def test_the_same_problems_once_the_fields_are_fixed() -> None:
    document = broken()
    document["steps"][0]["timeout"] = "30s"
    found = errors(document)
    assert {path for path in found if not path.startswith("steps[4]")} == {
        "steps[3].name",
        "steps[1].branches[1]",
    }
    assert found["steps[3].name"] == "duplicates step 2"
    assert found["steps[1].branches[1]"] == "names no step: 'gone'"


def test_an_unusable_head_does_not_hide_the_structure() -> None:
    document = broken()
    document["steps"][0]["timeout"] = "30s"
    document["name"] = "not a name"
    found = errors(document)
    assert "name" in found
    assert found["steps[3].name"] == "duplicates step 2"


def test_the_editor_locates_all_of_them_at_once() -> None:
    problems = check_document(broken())
    located = {(p.index, p.field) for p in problems.errors}
    assert {(0, "timeout"), (3, "name"), (1, "branches")} <= located


def test_definition_check_prints_all_of_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(broken()), encoding="utf-8")
    assert main(["definition", "check", str(path)]) == 1
    out = capsys.readouterr().out
    assert "steps[0].timeout:" in out
    assert "steps[3].name: duplicates step 2" in out
    assert "steps[1].branches[1]: names no step: 'gone'" in out
