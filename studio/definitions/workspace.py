"""Everything the draft editor shows, gathered in one value for the templates.

The editor is one fragment (``#workspace``) that every edit re-renders through htmx:
the outline, the graph with its problems and selection, the inspector (the selected
step's form, the insert menu, or the branch menu) and the JSON view. Building it in one
place keeps the full page and each htmx answer identical.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from engine.model.definitions import DefinitionRef
from studio.definitions.draft_edits import INSERTABLE, RACE_BRANCH_KINDS
from studio.definitions.drafts import Draft
from studio.definitions.graph import Graph, layout, node_classes
from studio.definitions.problems import Problem, Problems, check_document, locate_path
from studio.definitions.step_fields import (
    COMPENSATION,
    HAS_COMPENSATION,
    FieldSpec,
    display,
    groups,
    read_path,
    specs_for,
)
from studio.definitions.structure import StepShape, Structure, read_structure

VIEWS = ("graph", "json")


@dataclass(frozen=True)
class Selection:
    """What the inspector shows: a step, an insert point, or a fork's branch menu."""

    step: str = ""
    insert_at: int | None = None
    branch_of: int | None = None


@dataclass
class Workspace:
    """Everything the step editor draws for one draft, built from the saved draft for
    each render (``build_workspace``), so what it shows is always what was saved."""

    draft: Draft
    problems: Problems
    graph: Graph
    structure: Structure
    selection: Selection
    editable: bool
    targets: list[str]
    children: list[DefinitionRef]
    view: str = "graph"
    notice: str = ""
    error: str = ""
    json_text: str = ""
    json_error: str = ""
    insertable: tuple[str, ...] = INSERTABLE
    race_branch_kinds: tuple[str, ...] = RACE_BRANCH_KINDS
    badges: dict[str, int] = field(default_factory=dict)
    refused: tuple[Problem, ...] = ()
    """Values an edit refused (a name another step has), shown at their fields."""
    typed: dict[str, str] = field(default_factory=dict)
    """What was typed into the refused edit's form, shown again to be fixed."""
    focus_first_field: bool = False
    """The edit made a step (insert, add a branch): its first field takes the focus."""
    published_as: str = ""
    """``name@version`` when the draft's content is that published version."""

    @property
    def selected(self) -> StepShape | None:
        return self.structure.step(self.selection.step) if self.selection.step else None

    @property
    def empty(self) -> bool:
        """A new draft's list of steps, still empty: an invitation, not an error."""
        steps = self.draft.document.get("steps")
        return isinstance(steps, list) and not steps

    @property
    def document_problems(self) -> tuple[Problem, ...]:
        """The document's errors for its banner; an empty new draft's step list is not
        one (the outline and the inspector invite the first step instead)."""
        errors = self.problems.document_errors
        return tuple(p for p in errors if not (self.empty and p.path == "steps"))

    @property
    def listed_problems(self) -> tuple[Problem, ...]:
        """Every problem for the inspector's list, but the empty step list's."""
        return tuple(p for p in self.problems.items if not (self.empty and p.path == "steps"))

    @property
    def branch_owner(self) -> StepShape | None:
        index = self.selection.branch_of
        if index is None or not 0 <= index < len(self.structure.steps):
            return None
        owner = self.structure.steps[index]
        return owner if owner.kind in ("parallel", "race") else None

    def classes(self, node: Any) -> str:
        return node_classes(node, self.badges, None, self.selection.step)

    def warned(self, step: str) -> bool:
        return step in self.problems.warned_steps()

    def field_groups(self, step: StepShape) -> list[tuple[str, list[FieldSpec]]]:
        return groups(specs_for(step.kind))

    def compensation_fields(self, step: StepShape) -> tuple[FieldSpec, ...]:
        return COMPENSATION if step.kind in HAS_COMPENSATION else ()

    def value(self, step: StepShape, spec: FieldSpec) -> str:
        if self._refusals(step, spec):
            return self.typed.get(spec.path, "")
        return display(read_path(step.raw, spec.path))

    def field_problems(self, step: StepShape, spec: FieldSpec) -> list[Any]:
        return self._refusals(step, spec) + self.problems.for_field(step.index, spec.path)

    def focused(self, step: StepShape, spec: FieldSpec) -> bool:
        """Whether this field takes the focus: a refused one, or a new step's first."""
        if self.refused:
            return bool(self._refusals(step, spec))
        return self.focus_first_field and spec.path == "name"

    def _refusals(self, step: StepShape, spec: FieldSpec) -> list[Problem]:
        return [p for p in self.refused if p.index == step.index and p.field == spec.path]

    def other_problems(self, step: StepShape) -> list[Any]:
        """Problems of the step that no input of its form shows (e.g. its branches)."""
        shown = {s.path for s in specs_for(step.kind)}
        if step.kind in HAS_COMPENSATION and isinstance(step.raw.get("compensation"), dict):
            shown |= {s.path for s in COMPENSATION}
        return [p for p in self.problems.for_step(step.index) if p.field not in shown]

    def insert_after(self, step: StepShape) -> int | None:
        """Where 'insert after this step' puts a new step (None for branch steps)."""
        if self.structure.owner_of(step) is not None:
            return None
        return self.structure.insertion_after(step.index)


def build_workspace(
    draft: Draft,
    *,
    editable: bool,
    targets: list[str],
    children: list[DefinitionRef],
    selection: Selection,
    view: str = "graph",
    notice: str = "",
    error: str = "",
    json_text: str | None = None,
    json_error: str = "",
    refused: list[dict[str, str]] | None = None,
    typed: dict[str, str] | None = None,
    focus_first_field: bool = False,
    published_as: str = "",
) -> Workspace:
    problems = check_document(draft.document, targets)
    structure = read_structure(draft.document)
    selected = selection.step if structure.step(selection.step) else ""
    return Workspace(
        draft=draft,
        problems=problems,
        graph=layout(draft.document),
        structure=structure,
        selection=Selection(selected, selection.insert_at, selection.branch_of),
        editable=editable,
        targets=targets,
        children=children,
        view=view if view in VIEWS else "graph",
        notice=notice,
        error=error,
        json_text=json.dumps(draft.document, indent=2) if json_text is None else json_text,
        json_error=json_error,
        badges=problems.counts_by_step(),
        refused=tuple(locate_path(p["path"], p["message"], draft.document) for p in refused or ()),
        typed=typed or {},
        focus_first_field=focus_first_field,
        published_as=published_as,
    )
