"""Validation problems of a draft, located on the step and field they concern.

The engine reports every problem with a JSON path (``steps[2].retry.max_attempts``).
The editor shows a problem where the person is looking: a badge on the node of step 2,
and the message beside the ``retry.max_attempts`` input of that step's form. Problems
that concern the whole document (its name, version, or the step list itself) go to
the definition's header. Warnings (an activity target no worker advertises) use the
same shape but do not block publishing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from engine.model.definitions import Definition, Mode
from engine.model.errors import DefinitionInvalid, FieldError
from engine.model.validation import parse_definition
from engine.model.words import clipped
from studio.definitions.structure import raw_steps, shape_of, step_refs

TARGET_SHOWN = 40
"""How much of a target a warning repeats (one too long is refused at its field too)."""
FROM_ITS_CODE = (
    "a code workflow is published from its code, where it is linted and its running "
    "journals replayed against it: wayline definition publish --app MODULE:APP"
)
"""Why the studio drafts, imports and publishes step lists and state machines only."""
_STEP_PATH = re.compile(r"^steps\[(\d+)\](?:\.(.*))?$")
_LIST_INDEX = re.compile(r"\[\d+\]")


@dataclass(frozen=True)
class Problem:
    """One message, located: ``step`` is '' for the document, ``field`` a dotted path."""

    path: str
    message: str
    step: str = ""
    index: int = -1
    field: str = ""
    warning: bool = False
    ref: str = ""
    """How a link selects the step (``StepShape.ref``): its name, or ``#<index>`` for a
    step without one or a later step of a name taken before it."""

    @property
    def label(self) -> str:
        """The step as a list of problems names it: its name, else its position."""
        if self.index < 0:
            return ""
        return self.step or f"step {self.index + 1}"

    @property
    def where(self) -> str:
        """Where to say the problem is: the field within its step, or the document path."""
        if self.index < 0:
            return self.path or "definition"
        return self.field or "step"


@dataclass(frozen=True)
class Problems:
    """Every problem of one document, and the definition when there were none."""

    items: tuple[Problem, ...] = ()
    definition: Definition | None = None
    by_index: dict[int, list[Problem]] = field(default_factory=dict)

    @property
    def errors(self) -> tuple[Problem, ...]:
        return tuple(p for p in self.items if not p.warning)

    @property
    def warnings(self) -> tuple[Problem, ...]:
        return tuple(p for p in self.items if p.warning)

    @property
    def document_errors(self) -> tuple[Problem, ...]:
        return tuple(p for p in self.errors if p.index < 0)

    def for_step(self, index: int) -> list[Problem]:
        return self.by_index.get(index, [])

    def for_field(self, index: int, name: str) -> list[Problem]:
        """Problems of one field of one step (``retry`` also gets ``retry.*`` parents)."""
        return [p for p in self.for_step(index) if p.field == name]

    def counts_by_step(self) -> dict[str, int]:
        """Step name -> number of errors, for the graph's badges."""
        counts: dict[str, int] = {}
        for problem in self.errors:
            if problem.index >= 0:
                counts[problem.step] = counts.get(problem.step, 0) + 1
        return counts

    def warned_steps(self) -> set[str]:
        return {p.step for p in self.warnings}


def check_document(document: Any, known_targets: Iterable[str] | None = None) -> Problems:
    """Validate ``document`` with the engine and locate every problem.

    ``known_targets`` are the activity targets workers advertise; a target outside them
    is a warning. None means nothing is known (no worker ever ran), so nothing is flagged.
    """
    errors: list[FieldError] = []
    definition = None
    try:
        definition = parse_definition(document)
    except DefinitionInvalid as invalid:
        errors = list(invalid.errors)
    if definition is not None and definition.mode is Mode.CODE:
        definition, errors = None, [FieldError("mode", FROM_ITS_CODE)]
    items = [locate(e, document) for e in errors]
    if known_targets is not None:
        items.extend(unknown_targets(document, set(known_targets)))
    items = with_refs(items, document)
    by_index: dict[int, list[Problem]] = {}
    for problem in items:
        by_index.setdefault(problem.index, []).append(problem)
    return Problems(tuple(items), definition, by_index)


def with_refs(items: list[Problem], document: Any) -> list[Problem]:
    """``items`` with the ref of the step each concerns (read once for all of them), so
    a link opens that very step even when it has no name or shares one."""
    refs = step_refs(document)
    return [replace(p, ref=refs[p.index]) if 0 <= p.index < len(refs) else p for p in items]


def locate(error: FieldError, document: Any) -> Problem:
    """The step (by position and name) and the field an engine error is about."""
    return locate_path(error.path, error.message, document)


def locate_path(path: str, message: str, document: Any) -> Problem:
    """The step (by position and name) and the field a message at ``path`` is about."""
    match = _STEP_PATH.match(path)
    if match is None:
        return Problem(path, message)
    index = int(match.group(1))
    steps = raw_steps(document)
    name = shape_of(index, steps[index]).name if index < len(steps) else ""
    field_path = _LIST_INDEX.sub("", match.group(2) or "")
    return Problem(path, message, name, index, field_path)


def unknown_targets(document: Any, known: set[str]) -> list[Problem]:
    """Warnings for activity targets (and compensations) that no worker advertises."""
    warnings = []
    for index, raw in enumerate(raw_steps(document)):
        shape = shape_of(index, raw)
        if shape.kind != "activity":
            continue
        targets = [("target", raw.get("target"))]
        compensation = raw.get("compensation")
        if isinstance(compensation, dict):
            targets.append(("compensation.target", compensation.get("target")))
        for field_path, target in targets:
            if isinstance(target, str) and target and target not in known:
                warnings.append(
                    Problem(
                        f"steps[{index}].{field_path}",
                        f"no running worker advertises {clipped(target, TARGET_SHOWN)!r}",
                        shape.name,
                        index,
                        field_path,
                        warning=True,
                    )
                )
    return warnings
