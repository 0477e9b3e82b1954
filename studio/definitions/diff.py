"""A structural diff between two definition documents.

A textual JSON diff answers "which lines moved"; people reviewing a new version ask
"which steps were added or removed, and what changed in the others". Steps are matched
by name (names are what instances and histories refer to), each common step is compared
field by field on dotted paths (``retry.max_attempts``), and a step whose place among
the common steps changed is reported as moved. Documents should be in exchange format
(``definition_to_json``), so equal durations are spelled alike and do not show up.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from studio.definitions.structure import raw_steps, shape_of

TOP_FIELDS = ("name", "version", "mode", "deprecated")


class Change(StrEnum):
    """How a step or field differs; the value is the CSS mark the two graphs show."""

    ADDED = "added"
    REMOVED = "removed"
    CHANGED = "changed"


@dataclass(frozen=True)
class FieldChange:
    """One field that differs; a missing side is None."""

    field: str
    before: Any
    after: Any


@dataclass(frozen=True)
class StepChange:
    """One step added, removed or changed (by name), with the fields that changed."""

    step: str
    kind: str
    change: Change
    fields: tuple[FieldChange, ...] = ()


@dataclass(frozen=True)
class DefinitionDiff:
    """What turns the left document into the right one."""

    top: tuple[FieldChange, ...]
    steps: tuple[StepChange, ...]

    @property
    def empty(self) -> bool:
        return not self.top and not self.steps

    def marks(self, side: str) -> dict[str, str]:
        """Step name -> ``added``/``removed``/``changed``, for the graph of one side.

        The left graph shows what was removed, the right one what was added; changed
        steps are marked on both.
        """
        hidden = Change.ADDED if side == "left" else Change.REMOVED
        return {s.step: s.change.value for s in self.steps if s.change is not hidden}

    def count(self, change: Change | str) -> int:
        wanted = Change(change)
        return sum(1 for s in self.steps if s.change is wanted)


def diff_documents(left: Any, right: Any) -> DefinitionDiff:
    """The structural diff from ``left`` to ``right`` (both definition documents)."""
    top = top_changes(left, right, TOP_FIELDS)
    before = _steps_by_name(left)
    after = _steps_by_name(right)
    moved = _moved(list(before), list(after))
    changes: list[StepChange] = []
    for name, step in after.items():
        if name not in before:
            changes.append(StepChange(name, _kind(step), Change.ADDED))
            continue
        fields = field_changes(before[name], step)
        if name in moved:
            fields.append(FieldChange("position", *moved[name]))
        if fields:
            changes.append(StepChange(name, _kind(step), Change.CHANGED, tuple(fields)))
    changes.extend(
        StepChange(name, _kind(step), Change.REMOVED)
        for name, step in before.items()
        if name not in after
    )
    return DefinitionDiff(top, tuple(changes))


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Nested objects as dotted paths; lists and scalars are leaf values."""
    if isinstance(value, dict):
        flat: dict[str, Any] = {}
        for key, item in value.items():
            flat.update(flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return flat
    return {prefix: value}


def top_changes(left: Any, right: Any, keys: Iterable[str]) -> tuple[FieldChange, ...]:
    """The document fields named by ``keys`` that differ (a dotted key reaches into
    objects: ``state.name``), in the order of ``keys``."""
    return tuple(
        FieldChange(key, _get(left, key), _get(right, key))
        for key in keys
        if _get(left, key) != _get(right, key)
    )


def named_changes(
    old: dict[str, tuple[str, dict[str, Any]]], new: dict[str, tuple[str, dict[str, Any]]]
) -> list[StepChange]:
    """Parts matched by name, each given as (kind, its compared fields): the added ones
    in ``new``'s order, the removed ones in ``old``'s, then the changed ones with the
    fields that differ. How a mode names and compares its parts (a code workflow's
    verbs, a machine's states) is the mode's; this is the one way they are matched."""
    changes = [
        StepChange(name, kind, Change.ADDED) for name, (kind, _) in new.items() if name not in old
    ]
    changes += [
        StepChange(name, kind, Change.REMOVED) for name, (kind, _) in old.items() if name not in new
    ]
    for name in (n for n in new if n in old):
        fields = field_changes(old[name][1], new[name][1])
        if fields:
            changes.append(StepChange(name, new[name][0], Change.CHANGED, tuple(fields)))
    return changes


def _get(document: Any, key: str) -> Any:
    value = document
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _kind(step: dict[str, Any]) -> str:
    kind = step.get("kind")
    return kind if isinstance(kind, str) else ""


def _steps_by_name(document: Any) -> dict[str, dict[str, Any]]:
    steps: dict[str, dict[str, Any]] = {}
    for index, raw in enumerate(raw_steps(document)):
        shape = shape_of(index, raw)
        steps.setdefault(shape.name or f"#{index + 1}", shape.raw)
    return steps


def field_changes(before: dict[str, Any], after: dict[str, Any]) -> list[FieldChange]:
    """The fields of two objects that differ, on dotted paths, leading ones first."""
    old, new = flatten(before), flatten(after)
    return [
        FieldChange(key, old.get(key), new.get(key))
        for key in sorted(set(old) | set(new), key=_field_order)
        if old.get(key) != new.get(key)
    ]


def _field_order(key: str) -> tuple[int, str]:
    """Fields in the order a step is read: kind and target first, nested ones last."""
    leading = ("kind", "target", "timeout")
    return (leading.index(key) if key in leading else len(leading) + key.count("."), key)


def _moved(before: list[str], after: list[str]) -> dict[str, tuple[int, int]]:
    """Common steps whose rank among the common steps changed: name -> (old, new), 1-based."""
    common = set(before) & set(after)
    old = [n for n in before if n in common]
    new = [n for n in after if n in common]
    return {
        name: (old.index(name) + 1, new.index(name) + 1)
        for name in common
        if old.index(name) != new.index(name)
    }
