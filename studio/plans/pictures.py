"""How the drill plan pages draw a version: a step list as its graph, a state machine as
its state diagram (``studio.drawings``), each node (a step, or a state) classed by the
plan's page (picked, armed, fired, violated, its heat) and keyed by the name a pin
names, so the template draws the pins on it the same way for both.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.model.definitions import Definition, definition_to_json
from studio.definitions.graph import Node, node_classes
from studio.drawings import drawing_of
from studio.machines.marks import Mark, marks

STATES = "states"
"""A picture drawn as a state diagram (``machines/diagram.html``); else as steps."""


@dataclass(frozen=True)
class Picture:
    kind: str
    """``steps`` or ``states``: which macro draws it (``plans/_picture.html``)."""
    graph: Any
    classes: Callable[[Node], str] | None = None
    """A step's node classes (a picture of steps)."""
    marks: dict[str, Mark] = field(default_factory=dict)
    """Every element's mark (a picture of states)."""


def picture(definition: Definition, extra: Mapping[str, str], picked: str = "") -> Picture:
    """``definition`` drawn with each node (by step or state name) also classed
    ``extra[name]``, and ``picked`` selected."""
    drawing = drawing_of(definition)
    graph = drawing.layout(definition_to_json(definition))
    if drawing.picture == STATES:
        names = {node.step for node in graph.nodes}
        states = {name: Mark(_css(extra.get(name, ""), name == picked)) for name in names}
        return Picture(STATES, graph, marks=marks(graph, states))

    def classes(node: Node) -> str:
        return f"{node_classes(node, selected=picked)} {extra.get(node.step, '')}".strip()

    return Picture(drawing.picture, graph, classes)


def _css(extra: str, selected: bool) -> str:
    return f"{extra} selected".strip() if selected else extra
