"""Declaring a machine in Python: the same manifest, rules and fingerprint as its JSON.

A machine declared with ``machine(...)`` over a sealed family of variants writes the
document a manifest file holds, validated by the same reader; the fixture's Python and
JSON forms of the document-approval machine have one fingerprint. Writing a manifest
differently (sets in another order, an optional field left out) keeps it; changing
anything the runtime acts on moves it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine import MachineState, machine, variant
from engine.model.definitions import Mode, definition_document, definition_to_json
from engine.model.errors import DefinitionInvalid
from engine.model.validation import parse_definition
from examples import documents as document_approval
from tests.unit.machines import Document, approval_document


def fingerprint(document: Document) -> str:
    return parse_definition(document).fingerprint


def test_the_python_and_json_forms_of_a_machine_have_one_fingerprint() -> None:
    python = document_approval.flow.definition
    json_form = parse_definition(approval_document())
    assert python == json_form
    assert python.fingerprint == json_form.fingerprint
    assert python.mode is Mode.MACHINE
    assert document_approval.flow.document == definition_to_json(json_form)


def test_the_python_form_writes_the_manifest_document() -> None:
    document = document_approval.flow.document
    assert document["state"] == {
        "name": "Approval",
        "variants": [
            {"name": "Submitted", "fields": {}},
            {"name": "InReview", "fields": {"reminders": "integer"}},
            {"name": "Approved", "fields": {"by": "text"}},
            {"name": "Rejected", "fields": {"reason": "text"}},
            {"name": "Expired", "fields": {}},
        ],
    }
    assert document["transitions"] == {
        "Submitted": ["InReview"],
        "InReview": ["InReview", "Approved", "Rejected", "Expired"],
    }
    assert json.loads(json.dumps(document)) == document
    assert parse_definition(document) == document_approval.flow.definition


def test_the_advance_is_recorded_once() -> None:
    flow = document_approval.flow
    assert flow.advance_function is document_approval.advance
    with pytest.raises(TypeError, match="already has an advance"):
        flow.advance(lambda *args: None)


def _reordered(document: Document) -> Document:
    document["terminal"].reverse()
    document["grants"].reverse()
    document["transitions"]["InReview"].reverse()
    document["transitions"]["Approved"] = []
    document["state"]["variants"][0]["fields"] = {}
    return document


def test_sets_in_another_order_and_empty_defaults_keep_the_fingerprint() -> None:
    document = approval_document()
    assert fingerprint(_reordered(approval_document())) == fingerprint(document)
    del document["compensation"]
    with_null = {**document, "compensation": None}
    assert fingerprint(document) == fingerprint(with_null)


def _edge(document: Document) -> None:
    document["transitions"]["Submitted"].append("Rejected")


def _not_terminal(document: Document) -> None:
    document["terminal"].remove("Expired")
    document["transitions"]["Expired"] = ["Rejected"]


def _field_type(document: Document) -> None:
    document["state"]["variants"][1]["fields"]["reminders"] = "number"


def _set(key: str, value: Any) -> Any:
    return lambda document: document.update({key: value})


CHANGES: list[tuple[str, Any]] = [
    ("max_attempts", _set("max_attempts", 4)),
    ("max_transitions", _set("max_transitions", 9)),
    ("timers", _set("timers", {"InReview": 61})),
    ("terminal", _not_terminal),
    ("compensation", _set("compensation", "documents.undo")),
    ("grants", _set("grants", ["DbRead<Documents>"])),
    ("resource", lambda document: document.update(resource="Files", grants=[])),
    ("function", _set("function", "documents.advance2")),
    ("input", _set("input", "integer")),
    ("deprecated", _set("deprecated", True)),
    ("an edge", _edge),
    ("a field's type", _field_type),
]


@pytest.mark.parametrize("change", [c[1] for c in CHANGES], ids=[c[0] for c in CHANGES])
def test_the_fingerprint_moves_with_anything_the_runtime_acts_on(change: Any) -> None:
    document = approval_document()
    change(document)
    assert fingerprint(document) != fingerprint(approval_document())


def test_a_step_lists_document_has_no_manifest_fields() -> None:
    steps = [{"name": "t", "kind": "timer", "timeout": "1s"}]
    document = {"name": "t", "version": "1", "mode": "orchestration", "steps": steps}
    definition = parse_definition(document)
    assert set(definition_document(definition)) == {
        "name",
        "version",
        "mode",
        "deprecated",
        "steps",
    }


class Light(MachineState):
    """A family used only by the declaration errors below."""


@variant
class Red(Light):
    pass


@variant
class Green(Light):
    seconds: int


def _light(**changes: Any) -> Any:
    fields: dict[str, Any] = {
        "version": "1",
        "function": "lights.advance",
        "state": Light,
        "input": str,
        "initial": Red,
        "terminal": [Green],
        "timers": {},
        "transitions": {Red: [Green]},
        "grants": [],
        "resource": "Lights",
        "max_attempts": 1,
        "max_transitions": 1,
        "retry": "transactional",
        "concurrency": "parent",
    }
    return machine("lights", **{**fields, **changes})


def test_a_python_declaration_reports_every_broken_rule_as_a_file_does() -> None:
    with pytest.raises(DefinitionInvalid) as invalid:
        _light(initial=Green, terminal=[Red, Light], max_attempts=9, input=list)
    assert [str(e) for e in invalid.value.errors] == [
        "input: must be one of text, integer, number, boolean",
        "initial: Green must have no fields",
        "terminal[1]: Light is not a variant of Light",
        "transitions.Red: a terminal state cannot have outgoing edges",
        "max_attempts: must be a whole number from 1 to 8",
    ]


def test_a_family_is_sealed() -> None:
    _light(version="sealing")
    with pytest.raises(TypeError, match="Light is sealed: machine lights@sealing"):

        @variant
        class Amber(Light):
            pass

    with pytest.raises(TypeError, match="is not subclassed itself"):

        class DarkRed(Red):
            pass

    with pytest.raises(TypeError, match="must be a state family"):
        _light(state=Red)


def test_every_state_of_a_family_is_a_declared_variant() -> None:
    class Door(MachineState):
        pass

    @variant
    class Shut(Door):
        pass

    class Ajar(Door):
        pass

    with pytest.raises(TypeError, match="Ajar of Door must be declared @variant"):
        _light(state=Door, initial=Shut, terminal=[Ajar], transitions={Shut: [Ajar]})
