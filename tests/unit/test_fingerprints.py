"""Definition fingerprints: what leaves them alone and what changes them.

Instances pin (name, version, fingerprint), so the fingerprint must not move when a
document is only written differently (key order, a JSON round trip, ``60s`` for
``1m``, a default spelled out) and must move when anything the engine acts on
changes. The fixed vectors catch any change to the canonical form itself.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.model.definitions import Definition, Mode, UnknownPolicy, definition_to_json
from engine.model.durations import parse_duration, to_micros
from engine.model.errors import DefinitionInvalid
from engine.model.limits import MAX_RETRY_DELAY
from engine.model.validation import parse_definition
from tests.unit.strategies import Document, valid_definition_documents

VECTORS = Path(__file__).with_name("fingerprint_vectors.json")
DURATION_KEYS = frozenset({"timeout", "initial_delay", "max_delay"})
JsonPath = tuple[str | int, ...]


def fingerprint(document: Document) -> str:
    return parse_definition(document).fingerprint


def _shuffled(value: Any, rng: random.Random) -> Any:
    """The same JSON value with every object's keys in a random order."""
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {key: _shuffled(item, rng) for key, item in items}
    if isinstance(value, list):
        return [_shuffled(item, rng) for item in value]
    return value


def _durations_in_ms(value: Any) -> Any:
    """The same JSON value with every duration spelled in milliseconds (``1m`` -> ``60000ms``)."""
    if isinstance(value, dict):
        return {
            key: _ms(item) if key in DURATION_KEYS else _durations_in_ms(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_durations_in_ms(item) for item in value]
    return value


def _ms(duration: str) -> str:
    return f"{to_micros(parse_duration(duration)) // 1000}ms"


@given(valid_definition_documents(), st.randoms(use_true_random=False))
def test_fingerprint_ignores_key_order(document: Document, rng: random.Random) -> None:
    assert fingerprint(_shuffled(document, rng)) == fingerprint(document)


@given(valid_definition_documents())
def test_fingerprint_survives_a_json_round_trip_of_the_exported_document(
    document: Document,
) -> None:
    definition = parse_definition(document)
    exported = json.loads(json.dumps(definition_to_json(definition)))
    again = parse_definition(exported)
    assert again == definition
    assert again.fingerprint == definition.fingerprint


@given(valid_definition_documents())
def test_fingerprint_ignores_how_a_duration_is_spelled(document: Document) -> None:
    assert fingerprint(_durations_in_ms(document)) == fingerprint(document)


def test_sixty_seconds_is_one_minute() -> None:
    def timer(timeout: str) -> Document:
        steps = [{"name": "wait", "kind": "timer", "timeout": timeout}]
        return {"name": "d", "version": "1", "mode": "orchestration", "steps": steps}

    assert fingerprint(timer("60s")) == fingerprint(timer("1m")) == fingerprint(timer("60000ms"))
    assert fingerprint(timer("61s")) != fingerprint(timer("1m"))


@given(valid_definition_documents())
def test_fingerprint_treats_omitted_defaults_as_spelled_out(document: Document) -> None:
    explicit = copy.deepcopy(document)
    explicit.setdefault("deprecated", False)
    for step in explicit["steps"]:
        if step["kind"] == "activity":
            step.setdefault("on_unknown", UnknownPolicy.HOLD.value)
    assert fingerprint(explicit) == fingerprint(document)


@given(valid_definition_documents())
def test_fingerprint_is_64_lowercase_hex(document: Document) -> None:
    value = fingerprint(document)
    assert len(value) == 64
    assert set(value) <= set("0123456789abcdef")


# Changing one field -------------------------------------------------------------------


def _leaf_paths(value: Any, path: JsonPath = ()) -> Iterator[JsonPath]:
    """Paths of every scalar, and of every branch list (a list is changed as a whole)."""
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list) and path[-1] != "branches":
        items = enumerate(value)
    else:
        yield path
        return
    for key, item in items:
        yield from _leaf_paths(item, (*path, key))


def _get(document: Any, path: JsonPath) -> Any:
    for key in path:
        document = document[key]
    return document


def _with(document: Document, path: JsonPath, value: Any) -> Document:
    changed = copy.deepcopy(document)
    _get(changed, path[:-1])[path[-1]] = value
    return changed


def _fresh_name(document: Document, name: str) -> str:
    taken = {step["name"] for step in document["steps"]}
    while name in taken:
        name += "x"
    return name


def _renamed_step(document: Document, index: int) -> Document:
    """Step ``index`` under a new name, with every branch list that names it updated."""
    old = document["steps"][index]["name"]
    new = _fresh_name(document, old + "x")
    changed = _with(document, ("steps", index, "name"), new)
    for step in changed["steps"]:
        if "branches" in step:
            step["branches"] = [new if branch == old else branch for branch in step["branches"]]
    return changed


def _renamed_child(document: Document, index: int) -> Document:
    """A child step pinned to another name; its target must follow the pin."""
    step = document["steps"][index]
    changed = _with(document, ("steps", index, "target"), step["target"] + "x")
    changed["steps"][index]["child_definition"]["name"] = step["target"] + "x"
    return changed


def _dropped_branch(document: Document, index: int) -> Document:
    """The last branch dropped from a race, or from a parallel and its join together."""
    step = document["steps"][index]
    dropped = step["branches"][-1]
    partners = ("parallel", "join") if step["kind"] in ("parallel", "join") else (step["kind"],)
    changed = copy.deepcopy(document)
    for other in changed["steps"]:
        if other["kind"] in partners and dropped in other.get("branches", ()):
            other["branches"] = [b for b in other["branches"] if b != dropped]
    return changed


def _replaced(document: Document, path: JsonPath, values: list[Any]) -> list[Document]:
    return [_with(document, path, value) for value in values]


def _is_child_name(document: Document, path: JsonPath) -> bool:
    """A child step's target or pinned name: the two must stay equal."""
    if path[0] != "steps" or document["steps"][path[1]]["kind"] != "child":
        return False
    return path[2:] in (("target",), ("child_definition", "name"))


def _string_changes(document: Document, path: JsonPath, value: str) -> list[Document]:
    key = path[-1]
    if key in DURATION_KEYS:
        ms = to_micros(parse_duration(value)) // 1000
        return _replaced(document, path, [f"{ms + 1}ms", f"{ms - 1}ms"])
    if key in ("mode", "on_unknown"):
        members = Mode if key == "mode" else UnknownPolicy
        return _replaced(document, path, [m.value for m in members if m.value != value])
    if key == "kind":
        swaps = {"signal": ["approval"], "approval": ["signal"]}
        return _replaced(document, path, swaps.get(value, []))
    if key == "fingerprint":
        return _replaced(document, path, [("1" if value[0] == "0" else "0") + value[1:]])
    if path[0] == "steps" and path[2:] == ("name",):
        return [_renamed_step(document, path[1])]
    if _is_child_name(document, path):
        return [_renamed_child(document, path[1])]
    return _replaced(document, path, [value + "x"])


def _changes(document: Document, path: JsonPath) -> list[Document]:
    """Candidate documents that differ from ``document`` only in the field at ``path``."""
    value = _get(document, path)
    if isinstance(value, bool):
        return _replaced(document, path, [not value])
    if isinstance(value, int):
        return _replaced(document, path, [value + 1, value - 1])
    if isinstance(value, list):
        return [_dropped_branch(document, path[1])] if len(value) > 1 else []
    return _string_changes(document, path, value)


def _first_valid(candidates: list[Document]) -> Definition | None:
    for candidate in candidates:
        try:
            return parse_definition(candidate)
        except DefinitionInvalid:
            continue
    return None


def _may_have_no_valid_change(document: Document, path: JsonPath) -> bool:
    """Fields that no single valid edit can change, by the validation rules."""
    value = _get(document, path)
    parent = _get(document, path[:-1])
    key = path[-1]
    if key == "kind":  # a kind fixes which fields a step has; only signal/approval swap
        return value not in ("signal", "approval")
    if key == "branches":  # a branch list cannot become empty
        return len(value) == 1
    if key in ("initial_delay", "max_delay"):  # both at 1ms, or both at 30d: ±1ms breaks a rule
        bound = timedelta(milliseconds=1) if key == "initial_delay" else MAX_RETRY_DELAY
        delays = (parse_duration(parent["initial_delay"]), parse_duration(parent["max_delay"]))
        return delays == (bound, bound)
    return False


@given(valid_definition_documents(max_blocks=4))
def test_fingerprint_changes_when_any_single_field_changes(document: Document) -> None:
    """Each field is edited to the nearest value that is still valid.

    A step's new name is carried into the branch lists that name it, a child's target
    moves with its pin, and a parallel and its join lose a branch together: each is one
    change to the definition although two JSON values move.
    """
    document = {**document, "deprecated": document.get("deprecated", False)}
    original = fingerprint(document)
    for path in _leaf_paths(document):
        changed = _first_valid(_changes(document, path))
        if changed is None:
            assert _may_have_no_valid_change(document, path), f"no valid change for {path}"
        else:
            assert changed.fingerprint != original, f"changing {path} kept the fingerprint"


def test_deprecating_a_version_changes_its_fingerprint() -> None:
    steps = [{"name": "wait", "kind": "timer", "timeout": "1s"}]
    document = {"name": "d", "version": "1", "mode": "orchestration", "steps": steps}
    assert fingerprint({**document, "deprecated": True}) != fingerprint(document)


# Fixed vectors ------------------------------------------------------------------------


def _vectors() -> list[dict[str, Any]]:
    return json.loads(VECTORS.read_text(encoding="utf-8"))


@pytest.mark.parametrize("vector", _vectors(), ids=lambda vector: vector["description"])
def test_fingerprint_matches_the_fixed_vector(vector: dict[str, Any]) -> None:
    assert fingerprint(vector["document"]) == vector["fingerprint"]
