"""What the definition pages hand the templates for a machine: its diagram, each
element's marks (a diff's changes among them) and the manifest's states to list."""

from __future__ import annotations

from typing import Any

from engine.model.definitions import Definition
from engine.model.words import counted
from engine.modes.code.document import CodeManifest
from engine.modes.machines.manifest import MachineManifest
from studio.code.outline_graph import VERBS, read_outline
from studio.machines.diagram import layout, read_shape
from studio.machines.marks import Mark, marks

EDGE_ARROW = " → "
"""How a diff names an edge (``InReview → Expired``), and how its marks are split."""


def machine_view(document: Any, changes: dict[str, str] | None = None) -> dict[str, Any]:
    """The picture of a machine document; ``changes`` (a diff's marks) name states and
    edges (``From → To``) with ``added``, ``removed`` or ``changed``."""
    diagram = layout(document)
    states: dict[str, Mark] = {}
    edges: dict[tuple[str, str], Mark] = {}
    for name, change in (changes or {}).items():
        source, arrow, target = name.partition(EDGE_ARROW)
        if arrow:
            edges[(source, target)] = Mark(f"diff-{change}", f"{name}: {change}")
        else:
            states[name] = Mark(f"diff-{change}")
    return {
        "picture": "states",
        "graph": diagram,
        "marks": marks(diagram, states, edges),
        "shape": read_shape(document),
    }


def size(definition: Definition, noun: bool = True) -> str:
    """How big a definition is: its steps, a machine's states or the durable calls of a
    code workflow's outline (always with the noun for the last two, so a list that shows
    bare step counts still tells them apart)."""
    if isinstance(definition.manifest, MachineManifest):
        return counted(len(definition.manifest.variants), "state")
    if isinstance(definition.manifest, CodeManifest):
        calls = read_outline({"outline": definition.manifest.outline}).steps
        return counted(sum(1 for shape in calls if shape.kind in VERBS), "durable call")
    count = len(definition.steps)
    return counted(count, "step") if noun else str(count)
