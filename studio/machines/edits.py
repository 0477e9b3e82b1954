"""Edits of a machine draft, as its graphical editor makes them: pure, document in,
document out (``Edited``), like the step lists' ``studio.definitions.draft_edits``.

An edit never validates: it writes what the author asked for (a timer of "soon", a
field of type "date") and the editor shows what validation says about it on the node
it concerns. It only refuses what it cannot write at all (a state without a name, an
edge from a state that does not exist), with EditRejected. Removing a state removes
every mention of it, so no edit leaves a reference behind that the author did not make.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from studio.definitions.draft_edits import Edited, EditRejected
from studio.machines.diagram import read_shape

STARTER_STATES = ("Start", "Done")


def new_machine(name: str, version: str = "1") -> dict[str, Any]:
    """A machine that validates from the start: ``Start`` -> ``Done``, with the
    declarations every machine needs set to values its author will change."""
    return {
        "name": name,
        "version": version,
        "mode": "machine",
        "function": "machines.advance",
        "resource": "Records",
        "state": {"name": "Step", "variants": [{"name": s, "fields": {}} for s in STARTER_STATES]},
        "input": "text",
        "initial": "Start",
        "terminal": ["Done"],
        "timers": {},
        "transitions": {"Start": ["Done"]},
        "compensation": None,
        "grants": [],
        "max_attempts": 3,
        "max_transitions": 16,
        "retry": "transactional",
        "concurrency": "parent",
    }


def parse_fields(text: str) -> dict[str, str]:
    """``"by: text, count: integer"`` as a variant's fields (types are checked later).
    A field written twice is refused: a state holds one value per field, so keeping
    either would drop the other without a word."""
    fields: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, colon, kind = (s.strip() for s in part.partition(":"))
        if not colon or not name or not kind:
            raise EditRejected(f"write each field as name: type, not {part!r}")
        if name in fields:
            raise EditRejected(f"the field {name} is written twice: give each field once")
        fields[name] = kind
    return fields


def add_state(document: Mapping[str, Any], name: str, fields: str) -> Edited:
    doc = _copy(document)
    name = name.strip()
    if not name:
        raise EditRejected("give the new state a name")
    if name in read_shape(doc).states:
        raise EditRejected(f"there already is a state {name}")
    doc["state"]["variants"].append({"name": name, "fields": parse_fields(fields)})
    return Edited(doc, name)


def update_state(
    document: Mapping[str, Any],
    name: str,
    *,
    fields: str,
    initial: bool,
    terminal: bool,
    timer: str,
) -> Edited:
    """Set a state's fields, whether it is the initial one or terminal, and its timer
    (whole seconds; empty for none)."""
    doc = _copy(document)
    variant = _variant(doc, name)
    variant["fields"] = parse_fields(fields)
    if initial:
        doc["initial"] = name
    elif doc.get("initial") == name:
        doc["initial"] = None
    ends = [t for t in _names(doc.get("terminal")) if t != name]
    doc["terminal"] = [*ends, name] if terminal else ends
    timers = doc["timers"] = dict(doc["timers"]) if isinstance(doc.get("timers"), dict) else {}
    timers.pop(name, None)
    if timer.strip():
        text = timer.strip()
        timers[name] = int(text) if text.isdigit() else text
    return Edited(doc, name)


def remove_state(document: Mapping[str, Any], name: str) -> Edited:
    doc = _copy(document)
    variants = doc["state"]["variants"]
    doc["state"]["variants"] = [v for v in variants if _name(v) != name]
    if doc.get("initial") == name:
        doc["initial"] = None
    doc["terminal"] = [t for t in _names(doc.get("terminal")) if t != name]
    if isinstance(doc.get("timers"), dict):
        doc["timers"].pop(name, None)
    edges = _edges(doc)
    edges.pop(name, None)
    for source, targets in edges.items():
        if isinstance(targets, list):
            edges[source] = [t for t in targets if t != name]
    return Edited(doc)


def add_edge(document: Mapping[str, Any], source: str, target: str) -> Edited:
    doc = _copy(document)
    states = read_shape(doc).states
    for end in (source, target):
        if end not in states:
            raise EditRejected(f"{end or 'nothing'} is not a state of this machine")
    edges = _edges(doc)
    targets = edges.get(source)
    targets = edges[source] = list(targets) if isinstance(targets, list) else []
    if target in targets:
        raise EditRejected(f"{source} → {target} is an edge already")
    targets.append(target)
    return Edited(doc, source)


def remove_edge(document: Mapping[str, Any], source: str, target: str) -> Edited:
    doc = _copy(document)
    edges = _edges(doc)
    targets = edges.get(source)
    if isinstance(targets, list):
        edges[source] = [t for t in targets if t != target]
        if not edges[source]:
            del edges[source]
    return Edited(doc, source)


BOUNDS = ("max_attempts", "max_transitions")
DECLARATIONS = ("function", "resource", "input", "compensation")


def set_bounds(document: Mapping[str, Any], values: Mapping[str, str], selected: str) -> Edited:
    """Set the bounds, the declarations, the state family's name and the grants."""
    doc = _copy(document)
    for key in BOUNDS:
        if key in values:
            text = values[key].strip()
            doc[key] = int(text) if text.isdigit() else text
    for key in DECLARATIONS:
        if key in values:
            doc[key] = values[key].strip() or None
    if "family" in values:
        doc["state"]["name"] = values["family"].strip()
    if "grants" in values:
        doc["grants"] = [g.strip() for g in values["grants"].split(",") if g.strip()]
    return Edited(doc, selected)


def _copy(document: Mapping[str, Any]) -> dict[str, Any]:
    """A copy with the shapes edits write into (a state family with its variants)."""
    doc = copy.deepcopy(dict(document))
    family = doc.get("state")
    if not isinstance(family, dict):
        family = doc["state"] = {"name": "Step"}
    if not isinstance(family.get("variants"), list):
        family["variants"] = []
    return doc


def _variant(doc: dict[str, Any], name: str) -> dict[str, Any]:
    found = next((v for v in doc["state"]["variants"] if _name(v) == name), None)
    if found is None:
        raise EditRejected(f"{name or 'nothing'} is not a state of this machine")
    return found


def _name(variant: Any) -> Any:
    return variant.get("name") if isinstance(variant, dict) else None


def _names(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else []


def _edges(doc: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(doc.get("transitions"), dict):
        doc["transitions"] = {}
    return doc["transitions"]
