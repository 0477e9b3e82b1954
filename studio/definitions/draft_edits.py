"""Edits of a draft document: the operations behind the editor's buttons.

Each edit takes a document and returns a new one (the input is never changed) plus the
step to select afterwards. Edits keep the document's cross references consistent the
way a person would expect (renaming a branch renames it in its parallel and join, a
parallel is inserted with two branches and its join, deleting a race deletes its
branches) but they do not validate: a draft may be invalid while someone works on it,
and the engine's validator reports what is left to fix. Only edits that cannot mean
anything (an unknown kind, a step position that does not exist) are rejected.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.model.errors import InputRefused
from engine.model.inputs import read_json
from engine.model.words import with_article
from studio.definitions.step_fields import (
    COMPENSATION,
    HAS_COMPENSATION,
    all_paths,
    specs_for,
    write_path,
)
from studio.definitions.structure import Block, StepShape, read_structure, shape_of, step_refs

MAX_DOCUMENT_CHARS = 1_000_000
"""Largest JSON text the editor accepts (a definition of thousands of steps fits)."""

_RETRY = {"max_attempts": 3, "initial_delay": "1s", "max_delay": "1m"}
_LIMIT = 65536
NEW_STEP: dict[str, dict[str, Any]] = {
    "activity": {"timeout": "30s", "input_limit": _LIMIT, "result_limit": _LIMIT, "retry": _RETRY},
    "signal": {"timeout": "24h", "input_limit": _LIMIT},
    "approval": {"timeout": "72h", "input_limit": _LIMIT},
    "timer": {"timeout": "1m"},
    "child": {"timeout": "1h", "input_limit": _LIMIT, "result_limit": _LIMIT, "retry": _RETRY},
}
NEW_COMPENSATION = {"timeout": "30s", "result_limit": _LIMIT, "retry": _RETRY}
INSERTABLE = ("activity", "signal", "approval", "timer", "child", "parallel", "race")
RACE_BRANCH_KINDS = ("signal", "approval", "timer")
_INTEGER = re.compile(r"^-?\d{1,18}$")


class EditRejected(ValueError):
    """The edit cannot apply to this document; the message says why."""


class FieldRejected(EditRejected):
    """One field's new value cannot be saved (a name another step has): the editor shows
    the message beside that field, with the value that was typed."""

    def __init__(self, message: str, index: int, field: str, value: str) -> None:
        super().__init__(message)
        self.index = index
        self.field = field
        self.value = value


@dataclass(frozen=True)
class Edited:
    document: dict[str, Any]
    selected: str = ""


def new_document(name: str, version: str = "1") -> dict[str, Any]:
    """An empty orchestration definition (invalid until it has a step)."""
    return {"name": name, "version": version, "mode": "orchestration", "steps": []}


def parse_json(text: str) -> dict[str, Any]:
    """A document from JSON text; EditRejected unless it is a JSON object.

    Read with the engine's rules (``engine.model.inputs.read_json``). Every refusal, a text
    nested too deeply or holding a NUL character included, is an EditRejected: the
    editor's JSON tab and the import page show it beside the text (422) so the author
    can fix it there, where other routes answer such values with a bare 400.
    """
    if len(text) > MAX_DOCUMENT_CHARS:
        raise EditRejected(f"the JSON is longer than {MAX_DOCUMENT_CHARS} characters")
    try:
        document = read_json(text, "the JSON")
    except InputRefused as refused:
        raise EditRejected(str(refused)) from None
    if not isinstance(document, dict):
        raise EditRejected("a definition must be a JSON object")
    return document


def locate_step(
    document: Mapping[str, Any], index: int, name: str | None, renamed_to: str | None = None
) -> int:
    """Where the step a form named (by position ``index`` and ``name``) is now.

    A form names the step it acts on twice, so an edit made on an older revision (one
    queued while another was saving) still acts on exactly that step: at ``index`` when
    it is still called ``name``, else wherever the one step of that name moved to. A step
    form's edit queued behind its own rename names the step by its old name: the step
    still at ``index`` under the name the form itself sets (``renamed_to``) is that one,
    as a rename moves nothing. When it cannot be told, nothing is changed (EditRejected).
    """
    steps = _copy(document)["steps"]
    names = [shape_of(i, raw).name for i, raw in enumerate(steps)]
    here = names[index] if 0 <= index < len(names) else None
    if name is None or here == name or (renamed_to and here == renamed_to):
        return index
    found = [i for i, have in enumerate(names) if have == name]
    if len(found) != 1:
        raise EditRejected(f"{name or 'that step'} is no longer where it was; nothing was changed")
    return found[0]


def set_header(document: Mapping[str, Any], name: str, version: str) -> Edited:
    """Rename the definition or change its version."""
    doc = _copy(document)
    write_path(doc, "name", name.strip() or None)
    write_path(doc, "version", version.strip() or None)
    return Edited(doc)


def insert_step(document: Mapping[str, Any], at: int, kind: str) -> Edited:
    """Insert a new step of ``kind`` at document position ``at`` (a graph edge's slot).

    A parallel comes with two activity branches and its join, a race with a signal
    and a timer branch, so a fork is complete the moment it appears.
    """
    if kind not in INSERTABLE:
        choices = ", ".join(INSERTABLE)
        raise EditRejected(
            f"cannot insert {with_article(repr(kind))} step; choose one of {choices}"
        )
    doc = _copy(document)
    steps = _steps(doc)
    at = max(0, min(at, len(steps)))
    names = _names(doc)
    if kind == "parallel":
        new = _new_parallel(names)
    elif kind == "race":
        new = _new_race(names)
    else:
        new = [_new_step(kind, _unique(kind, names))]
    steps[at:at] = new
    return Edited(doc, new[0]["name"])


def add_branch(document: Mapping[str, Any], owner: int, kind: str = "") -> Edited:
    """Add a branch to the parallel or race at position ``owner`` (and to its join)."""
    doc = _copy(document)
    steps = _steps(doc)
    head = _shape(doc, owner)
    if head.kind not in ("parallel", "race"):
        raise EditRejected("branches can only be added to a parallel or a race")
    kind = kind or ("activity" if head.kind == "parallel" else "signal")
    allowed = ("activity",) if head.kind == "parallel" else RACE_BRANCH_KINDS
    if kind not in allowed:
        raise EditRejected(f"{with_article(head.kind)} branch must be: {', '.join(allowed)}")
    block = read_structure(doc).fork_of(owner)
    if head.kind == "parallel":
        name = _unique(f"{head.name}_branch", _names(doc))
    else:
        name = _unique(f"{head.name}_{kind}", _names(doc), numbered=False)
    after = max(
        (s.index for c in (block.columns if block else ()) for b in c for s in b.members()),
        default=owner,
    )
    steps.insert(after + 1, _new_step(kind, name))
    old = list(head.branches)
    _set_branches(steps[owner], [*old, name])
    if block is not None and block.tail is not None and head.kind == "parallel":
        _set_branches(steps[_shifted(block.tail.index, after + 1)], [*old, name])
    limit = steps[owner].get("fan_out_limit")
    if isinstance(limit, int) and not isinstance(limit, bool) and limit < len(old) + 1:
        steps[owner]["fan_out_limit"] = len(old) + 1
    return Edited(doc, name)


def delete_step(document: Mapping[str, Any], index: int) -> Edited:
    """Delete a step; a parallel or race takes its branches (and join) with it."""
    doc = _copy(document)
    shape = _shape(doc, index)
    structure = read_structure(doc)
    doomed = {index}
    block = structure.fork_of(index)
    if block is not None:
        doomed |= {s.index for s in block.members()}
        doomed -= {s.index for s in _meanwhile_members(block)}
    owner = structure.owner_of(structure.steps[index])
    if owner is not None:
        _drop_branch(doc, owner.index, shape.name)
    doc["steps"] = [raw for i, raw in enumerate(_steps(doc)) if i not in doomed]
    return Edited(doc, owner.name if owner is not None else "")


def move_step(document: Mapping[str, Any], index: int, direction: int) -> Edited:
    """Move a step (with its whole block) one place up (-1) or down (+1).

    A branch moves among its owner's branches; anything else swaps with the neighbouring
    block of its sequence.
    """
    if direction not in (-1, 1):
        raise EditRejected("a step moves one place up or down")
    doc = _copy(document)
    shape = _shape(doc, index)
    structure = read_structure(doc)
    owner = structure.owner_of(structure.steps[index])
    if owner is not None:
        _move_branch(doc, owner.index, shape.name, direction)
        return Edited(doc, owner.name)  # branches are reordered from their owner's list
    found = structure.block_of(index)
    if found is None:
        raise EditRejected("this step cannot be moved on its own")
    sequence, position = found
    other = position + direction
    if not 0 <= other < len(sequence):
        raise EditRejected(
            f"{shape.name or 'the step'} is already {'first' if direction < 0 else 'last'}"
        )
    first, second = sorted((position, other))
    earlier = [s.index for s in sequence[first].members()]
    later = [s.index for s in sequence[second].members()]
    order = structure.normalized_order()
    start = order.index(earlier[0])
    order[start : start + len(earlier) + len(later)] = later + earlier
    steps = _steps(doc)
    doc["steps"] = [steps[i] for i in order]
    return Edited(doc, shape.name)


COMPENSATION_SWITCHES = ("compensation.shown", "compensation.enabled")
"""The form's compensation checkbox and the mark that its section was shown."""


def step_paths(document: Mapping[str, Any], index: int) -> tuple[str, set[str]]:
    """The kind of the step at ``index`` and every key ``update_step`` reads for it, so
    that a caller can refuse a key it would ignore (EditRejected when there is no such
    step)."""
    kind = _shape(_copy(document), index).kind
    switches = set(COMPENSATION_SWITCHES) if kind in HAS_COMPENSATION else set()
    return kind, all_paths(kind) | switches


def update_step(document: Mapping[str, Any], index: int, values: Mapping[str, str]) -> Edited:
    """Set the fields of one step from form values (every field of its kind).

    An empty value removes the field, so the validator says it is required; whole
    numbers become integers, anything else stays text for the validator to judge.
    Renaming a step renames it wherever a parallel, race or join names it.
    ``compensation.enabled`` (a checkbox) adds or removes the compensation.
    """
    doc = _copy(document)
    steps = _steps(doc)
    shape = _shape(doc, index)
    _refuse_taken_name(doc, shape, values.get("name", shape.name).strip())
    step = steps[index]
    specs = list(specs_for(shape.kind))
    if shape.kind in HAS_COMPENSATION and "compensation.shown" in values:
        if values.get("compensation.enabled"):
            if not isinstance(step.get("compensation"), dict):
                step["compensation"] = copy.deepcopy(NEW_COMPENSATION)
            specs.extend(s for s in COMPENSATION if s.path in values)
        else:
            step.pop("compensation", None)
    for spec in specs:
        if spec.path not in values:
            continue
        text = values[spec.path].strip()
        value: Any = text or None
        if spec.integer and text and _INTEGER.match(text):
            value = int(text)
        if spec.path == "on_unknown" and text == "hold":
            value = None
        write_path(step, spec.path, value)
    steps[index] = _tidy(step)
    new_name = step.get("name")
    if isinstance(new_name, str) and shape.name and new_name != shape.name:
        _rename(steps, shape.name, new_name)
    # By its ref, not its name: a step whose name was cleared stays chosen (as ``#i``),
    # so its form shows "is required" beside the name instead of closing.
    return Edited(doc, step_refs(doc)[index])


def _refuse_taken_name(doc: dict[str, Any], shape: StepShape, name: str) -> None:
    """FieldRejected when ``name`` is a new name for the step that another step has.

    Two steps of one name would share a node, a selection and every branch reference,
    so the rename is refused before anything is saved, naming the step that has it.
    """
    if not name or name == shape.name:
        return
    structure = read_structure(doc)
    other = next((s for s in structure.steps if s.name == name and s.index != shape.index), None)
    if other is None:
        return
    owner = structure.owner_of(other)
    where = f", a branch of {owner.name}" if owner is not None else ""
    raise FieldRejected(
        f"step {other.index + 1} ({other.kind or 'unknown kind'}{where}) is already "
        f"called {name}; step names must be unique",
        shape.index,
        "name",
        name,
    )


def next_version(version: str, taken: set[str]) -> str:
    """A version after ``version`` not in ``taken``: 3 -> 4, 2.1 -> 2.2, beta -> beta-2."""
    match = re.match(r"^(.*?)(\d+)$", version)
    stem, number = (match.group(1), int(match.group(2))) if match else (f"{version}-", 1)
    candidate = f"{stem}{number + 1}"
    while candidate in taken:
        number += 1
        candidate = f"{stem}{number + 1}"
    return candidate


# Helpers -------------------------------------------------------------------------------


def _copy(document: Mapping[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(dict(document))
    if not isinstance(doc.get("steps"), list):
        doc["steps"] = []
    return doc


def _steps(doc: dict[str, Any]) -> list[Any]:
    return doc["steps"]


def _shape(doc: dict[str, Any], index: int) -> StepShape:
    steps = _steps(doc)
    if not 0 <= index < len(steps):
        raise EditRejected("that step is no longer in the draft; reload and try again")
    if not isinstance(steps[index], dict):
        raise EditRejected("that step is not a JSON object; fix it in the JSON view")
    return shape_of(index, steps[index])


def _names(doc: dict[str, Any]) -> set[str]:
    return {
        s["name"] for s in _steps(doc) if isinstance(s, dict) and isinstance(s.get("name"), str)
    }


def _unique(base: str, taken: set[str], numbered: bool = True) -> str:
    """``base_1``, ``base_2``, ... (or ``base`` itself first): the first not taken.

    The name is reserved in ``taken`` so several new steps of one edit differ.
    """
    n = 1
    name = f"{base}_{n}" if numbered else base
    while name in taken:
        n += 1
        name = f"{base}_{n}"
    taken.add(name)
    return name


def _new_step(kind: str, name: str) -> dict[str, Any]:
    return {"name": name, "kind": kind, **copy.deepcopy(NEW_STEP.get(kind, {}))}


def _new_parallel(names: set[str]) -> list[dict[str, Any]]:
    head = _unique("parallel", names)
    branches = [_unique(f"{head}_branch", names) for _ in range(2)]
    join = _unique(f"{head}_join", names, numbered=False)
    return [
        {"name": head, "kind": "parallel", "branches": branches, "fan_out_limit": 2},
        *(_new_step("activity", b) for b in branches),
        {"name": join, "kind": "join", "branches": list(branches)},
    ]


def _new_race(names: set[str]) -> list[dict[str, Any]]:
    head = _unique("race", names)
    signal = _unique(f"{head}_signal", names, numbered=False)
    timeout = _unique(f"{head}_timeout", names, numbered=False)
    timer = {**_new_step("timer", timeout), "timeout": "1h"}
    return [
        {"name": head, "kind": "race", "branches": [signal, timeout], "fan_out_limit": 2},
        _new_step("signal", signal),
        timer,
    ]


KEY_ORDER = (
    "name",
    "kind",
    "target",
    "child_definition",
    "timeout",
    "on_unknown",
    "input_limit",
    "result_limit",
    "retry",
    "compensation",
    "branches",
    "fan_out_limit",
)


def _tidy(step: dict[str, Any]) -> dict[str, Any]:
    """The step's keys in reading order (as exported), unknown keys last."""
    rank = {key: i for i, key in enumerate(KEY_ORDER)}
    return dict(sorted(step.items(), key=lambda item: rank.get(item[0], len(rank))))


def _set_branches(step: Any, branches: list[str]) -> None:
    if isinstance(step, dict):
        step["branches"] = branches


def _shifted(index: int, inserted_at: int) -> int:
    return index + 1 if index >= inserted_at else index


def _meanwhile_members(block: Block) -> list[StepShape]:
    if not block.meanwhile:
        return []
    return [s for b in block.columns[-1] for s in b.members()]


def _joins_of(doc: dict[str, Any], branches: set[str]) -> list[dict[str, Any]]:
    return [
        s
        for s in _steps(doc)
        if isinstance(s, dict)
        and s.get("kind") == "join"
        and isinstance(s.get("branches"), list)
        and set(s["branches"]) == branches
    ]


def _drop_branch(doc: dict[str, Any], owner: int, branch: str) -> None:
    step = _steps(doc)[owner]
    old = [b for b in step.get("branches", []) if isinstance(b, str)]
    new = [b for b in old if b != branch]
    if step.get("kind") == "parallel":
        for join in _joins_of(doc, set(old)):
            join["branches"] = list(new)
    step["branches"] = new


def _move_branch(doc: dict[str, Any], owner: int, branch: str, direction: int) -> None:
    step = _steps(doc)[owner]
    branches = [b for b in step.get("branches", []) if isinstance(b, str)]
    position = branches.index(branch)
    other = position + direction
    if not 0 <= other < len(branches):
        raise EditRejected(f"{branch} is already the {'first' if direction < 0 else 'last'} branch")
    joins = _joins_of(doc, set(branches)) if step.get("kind") == "parallel" else []
    branches[position], branches[other] = branches[other], branches[position]
    step["branches"] = branches
    for join in joins:
        join["branches"] = list(branches)


def _rename(steps: list[Any], old: str, new: str) -> None:
    for step in steps:
        if isinstance(step, dict) and isinstance(step.get("branches"), list):
            step["branches"] = [new if b == old else b for b in step["branches"]]
