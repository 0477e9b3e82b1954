"""What a machine draft's editor shows: the diagram with every validation problem on
the state it concerns, the selected state, and the rest of the problems.

The engine reports each problem of a manifest with a JSON path
(``state.variants[1].fields.count``, ``timers.InReview``, ``transitions.InReview[2]``,
``terminal[0]``, ``initial``) and the walks' problems on ``transitions`` naming the
state in the message. ``locate`` turns each into the state it is about, so the editor
can badge that node and list the message beside its form; the others (bounds,
declarations, the document) are shown above the diagram.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from studio.definitions.drafts import Draft
from studio.definitions.problems import Problem, Problems, check_document
from studio.machines.diagram import Shape, StateDiagram, layout, read_shape
from studio.machines.marks import Mark, marks

_VARIANT = re.compile(r"^state\.variants\[(\d+)\]")
_KEYED = re.compile(r"^(?:timers|transitions)\.([^.\[]+)")
_LISTED = re.compile(r"^terminal\[(\d+)\]$")
_WALK = re.compile(r"^(\w+) is unreachable from |^no terminal state is reachable from (\w+)$")


def locate(problem: Problem, document: Any) -> str:
    """The state a problem is about, or '' when it is about the whole machine."""
    top = document if isinstance(document, dict) else {}
    if match := _VARIANT.match(problem.path):
        family = top.get("state")
        variants = family.get("variants") if isinstance(family, dict) else None
        index = int(match.group(1))
        if isinstance(variants, list) and index < len(variants):
            name = variants[index].get("name") if isinstance(variants[index], dict) else None
            return name if isinstance(name, str) else ""
        return ""
    if match := _KEYED.match(problem.path):
        return match.group(1)
    if (match := _LISTED.match(problem.path)) and isinstance(top.get("terminal"), list):
        value = top["terminal"][int(match.group(1))]
        return value if isinstance(value, str) else ""
    if problem.path == "initial":
        value = top.get("initial")
        return value if isinstance(value, str) else ""
    if problem.path == "transitions" and (match := _WALK.match(problem.message)):
        return match.group(1) or match.group(2)
    return ""


@dataclass
class MachineWorkspace:
    draft: Draft
    problems: Problems
    diagram: StateDiagram
    shape: Shape
    selected: str
    editable: bool
    by_state: dict[str, list[Problem]] = field(default_factory=dict)
    general: list[Problem] = field(default_factory=list)
    error: str = ""

    @property
    def marks(self) -> dict[str, Mark]:
        """The diagram's marks: problem badges on states, the selected state."""
        states = {
            name: Mark("invalid", f"{name}: {'; '.join(p.message for p in found)}", str(len(found)))
            for name, found in self.by_state.items()
            if found
        }
        if self.selected in self.shape.states:
            found = states.get(self.selected, Mark())
            states[self.selected] = Mark(f"{found.css} selected".strip(), found.title, found.count)
        return marks(self.diagram, states)

    @property
    def located(self) -> list[tuple[str, Problem]]:
        """Every problem with the state it concerns ('' for the machine as a whole), in
        the order of the states and then the rest: the problems pill's list."""
        on_states = [(state, p) for state, found in self.by_state.items() for p in found]
        return on_states + [("", p) for p in self.general]

    def targets(self, state: str) -> list[str]:
        return [t for s, t in self.shape.edges if s == state]

    def fields_text(self, state: str) -> str:
        return ", ".join(f"{k}: {v}" for k, v in self.shape.fields.get(state, ()))

    def value(self, key: str) -> Any:
        top = self.draft.document
        return top.get(key) if isinstance(top, dict) else None


def build(draft: Draft, selected: str, *, editable: bool, error: str = "") -> MachineWorkspace:
    problems = check_document(draft.document)
    shape = read_shape(draft.document)
    by_state: dict[str, list[Problem]] = {}
    general: list[Problem] = []
    for problem in problems.errors:
        state = locate(problem, draft.document)
        if state in shape.states:
            by_state.setdefault(state, []).append(problem)
        else:
            general.append(problem)
    return MachineWorkspace(
        draft,
        problems,
        layout(draft.document),
        shape,
        selected if selected in shape.states else "",
        editable,
        by_state,
        general,
        error,
    )
