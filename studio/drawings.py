"""How the studio draws each definition mode: the studio's part of ``engine.modes``.

The engine never imports the studio, so a mode's drawing is not among the parts the
engine installs; it is found here, by the same mode name. A drawing lays out a
published version as a graph and says what each of its nodes is doing in an instance
and where the instance stands. Step lists are drawn as blocks of steps; machines as
state diagrams (``studio.machines``), which also mark the edges an execution took, so
their pages draw and update every element from its ``marks``. Code-first workflows
are drawn from the outline of their code (``studio.code``), coloured by their journal.
A new mode adds its drawing module and one entry below.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.model.definitions import Definition, Mode
from engine.model.instance import Instance
from engine.model.words import with_article
from engine.modes import ModeNotSupported
from studio.code import journal_view, outline_graph
from studio.code.diff import diff_outlines
from studio.definitions.diff import DefinitionDiff, diff_documents
from studio.definitions.graph import layout
from studio.definitions.structure import Structure, read_structure
from studio.instances.replays import Replayed
from studio.instances.step_states import StepState, frontier, step_states
from studio.machines import diagram, overlay
from studio.machines.diff import diff_machines
from studio.machines.marks import Mark


@dataclass(frozen=True)
class Drawing:
    layout: Callable[[Any], Any]
    """The picture of a version, from its exchange-format document."""
    states: Callable[[Instance], dict[str, StepState]]
    """What each node is doing in an instance, by node name."""
    frontier: Callable[[Instance], set[str]]
    """The nodes the instance is at (none once it has ended or while it unwinds)."""
    marks: Callable[[Any, Replayed], dict[str, Mark]] | None = None
    """Every element's classes, title and count on an instance's page, for a picture
    drawn from marks (``picture`` "states"); None when nodes are classed one by one."""
    picture: str = "steps"
    """Which macro draws the picture: ``steps`` (macros/graph.html) or ``states``
    (machines/diagram.html)."""
    diff: Callable[[Any, Any], DefinitionDiff] = diff_documents
    """The structural diff between two versions' documents."""
    structure: Callable[[Any], Structure] = read_structure
    """The blocks of a version, for the outline beside a picture drawn as steps."""
    standing: Callable[[Instance], set[str]] | None = None
    """Every name a person may give where an instance stands (the list's "at step"
    filter); None: its ``frontier``'s node names, which are the names of its steps or
    states."""

    def at(self, state: Instance) -> set[str]:
        """Where ``state`` stands, by every name a person may give it (``standing``)."""
        return (self.standing or self.frontier)(state)


STEP_LIST = Drawing(layout, step_states, frontier)
MACHINE = Drawing(
    diagram.layout,
    overlay.states,
    overlay.frontier,
    lambda picture, entry: overlay.execution_marks(picture, entry.state, entry.walk),
    "states",
    diff_machines,
)
CODE = Drawing(
    outline_graph.layout,
    journal_view.states,
    journal_view.frontier,
    diff=diff_outlines,
    structure=outline_graph.read_outline,
    standing=journal_view.standing,
)
DRAWINGS: dict[str, Drawing] = {
    Mode.ORCHESTRATION: STEP_LIST,
    Mode.CHOREOGRAPHY: STEP_LIST,
    Mode.MACHINE: MACHINE,
    Mode.CODE: CODE,
}


def drawing_of(definition: Definition) -> Drawing:
    """The drawing of ``definition``'s mode."""
    found = DRAWINGS.get(definition.mode)
    if found is None:
        kind = with_article(definition.mode)
        raise ModeNotSupported(f"the studio cannot draw {kind} definition yet")
    return found


def drawing_of_document(document: Any) -> Drawing:
    """The drawing of a document's mode; a draft of no known mode is drawn as steps."""
    mode = document.get("mode") if isinstance(document, dict) else None
    return DRAWINGS.get(mode, STEP_LIST) if isinstance(mode, str) else STEP_LIST
