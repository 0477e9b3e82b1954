"""The editable fields of each step kind, as the step form shows them.

One table drives both the form (labels, input types, groups, help) and the edit that
reads the form back, so a field cannot be shown without being saved or the reverse.
The field sets follow ``engine.modes.steps.validation.KIND_FIELDS``; a test keeps them
in step. Paths are dotted (``compensation.retry.max_attempts``), the same shape the
engine's error paths have after the step prefix, so errors land beside their input.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.model.identifiers import NAME_RULE

DURATION_HELP = "a whole number and a unit: 500ms, 30s, 5m, 72h, 7d"


@dataclass(frozen=True)
class FieldSpec:
    """One editable field of a step form: ``path`` is its dotted place in the step's JSON,
    so one table drives the form, its parsing and its error placement."""

    path: str
    label: str
    input: str = "text"
    """``text``, ``number``, ``duration``, ``target`` (offers advertised targets), ``select``."""
    group: str = "Step"
    help: str = ""
    choices: tuple[str, ...] = ()

    @property
    def integer(self) -> bool:
        return self.input == "number"

    @property
    def html_id(self) -> str:
        return "field-" + self.path.replace(".", "-")


NAME = FieldSpec("name", "Name", help=NAME_RULE)
"""Its help is the engine's whole rule: it said only which characters, so "_prep" or a
name of 201 characters, which the hint admitted, was refused."""


def _retry(prefix: str, group: str) -> tuple[FieldSpec, ...]:
    return (
        FieldSpec(f"{prefix}retry.max_attempts", "Max attempts", "number", group),
        FieldSpec(f"{prefix}retry.initial_delay", "First delay", "duration", group, DURATION_HELP),
        FieldSpec(f"{prefix}retry.max_delay", "Longest delay", "duration", group, DURATION_HELP),
    )


_TIMEOUT = FieldSpec("timeout", "Timeout", "duration", help=DURATION_HELP)
_INPUT_LIMIT = FieldSpec("input_limit", "Input limit (bytes)", "number", "Limits")
_RESULT_LIMIT = FieldSpec("result_limit", "Result limit (bytes)", "number", "Limits")

COMPENSATION: tuple[FieldSpec, ...] = (
    FieldSpec("compensation.target", "Compensating target", "target", "Compensation"),
    FieldSpec("compensation.timeout", "Timeout", "duration", "Compensation", DURATION_HELP),
    FieldSpec("compensation.result_limit", "Result limit (bytes)", "number", "Compensation"),
    *_retry("compensation.", "Compensation"),
)

KIND_SPECS: dict[str, tuple[FieldSpec, ...]] = {
    "activity": (
        NAME,
        FieldSpec("target", "Target", "target", help="the activity a worker runs"),
        _TIMEOUT,
        FieldSpec(
            "on_unknown",
            "When the outcome is unknown",
            "select",
            choices=("hold", "retry_same_key"),
            help="hold for an operator, or retry with the same idempotency key",
        ),
        _INPUT_LIMIT,
        _RESULT_LIMIT,
        *_retry("", "Retry"),
    ),
    "signal": (
        NAME,
        FieldSpec(
            "target",
            "Signal",
            help="the name senders deliver the signal under, e.g. payment.confirmed "
            f"({NAME_RULE}); the step waits for one signal of it",
        ),
        _TIMEOUT,
        _INPUT_LIMIT,
    ),
    "approval": (
        NAME,
        FieldSpec(
            "target",
            "Approval",
            help="what an approver is asked to approve, shown to them, e.g. order.refund "
            f"({NAME_RULE}); answered by an audited approve command",
        ),
        _TIMEOUT,
        _INPUT_LIMIT,
    ),
    "timer": (NAME, FieldSpec("timeout", "Wait for", "duration", help=DURATION_HELP)),
    "child": (
        NAME,
        FieldSpec("child_definition.name", "Child definition", group="Pinned child"),
        FieldSpec("child_definition.version", "Version", group="Pinned child"),
        FieldSpec("child_definition.fingerprint", "Fingerprint", group="Pinned child"),
        FieldSpec("target", "Target", help="must equal the child definition's name"),
        _TIMEOUT,
        _INPUT_LIMIT,
        _RESULT_LIMIT,
        *_retry("", "Retry"),
    ),
    "parallel": (
        NAME,
        FieldSpec("fan_out_limit", "Fan-out limit", "number", help="at least the branch count"),
    ),
    "race": (
        NAME,
        FieldSpec("fan_out_limit", "Fan-out limit", "number", help="at least the branch count"),
    ),
    "join": (NAME,),
}

HAS_COMPENSATION = frozenset({"activity"})


def specs_for(kind: str) -> tuple[FieldSpec, ...]:
    """The fields of ``kind`` outside compensation (just the name for unknown kinds)."""
    return KIND_SPECS.get(kind, (NAME,))


def all_paths(kind: str) -> set[str]:
    """Every dotted path a step of ``kind`` may carry, compensation included."""
    paths = {s.path for s in specs_for(kind)}
    if kind in HAS_COMPENSATION:
        paths |= {s.path for s in COMPENSATION}
    return paths


def groups(specs: tuple[FieldSpec, ...]) -> list[tuple[str, list[FieldSpec]]]:
    """Specs grouped for fieldsets, in first-seen order."""
    grouped: dict[str, list[FieldSpec]] = {}
    for spec in specs:
        grouped.setdefault(spec.group, []).append(spec)
    return list(grouped.items())


def read_path(obj: Any, path: str) -> Any:
    """The value at a dotted path, or None."""
    for key in path.split("."):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def write_path(obj: dict[str, Any], path: str, value: Any) -> None:
    """Set a dotted path, creating objects on the way; None removes it (and empty parents)."""
    keys = path.split(".")
    if value is None:
        _remove(obj, keys)
        return
    for key in keys[:-1]:
        child = obj.get(key)
        if not isinstance(child, dict):
            child = obj[key] = {}
        obj = child
    obj[keys[-1]] = value


def _remove(obj: dict[str, Any], keys: list[str]) -> None:
    if len(keys) == 1:
        obj.pop(keys[0], None)
        return
    child = obj.get(keys[0])
    if isinstance(child, dict):
        _remove(child, keys[1:])
        if not child:
            obj.pop(keys[0])


def display(value: Any) -> str:
    """A field's current value as an input shows it."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
