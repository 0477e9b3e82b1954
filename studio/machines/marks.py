"""What a state diagram's elements look like on a page: classes, titles and counts.

A page draws the diagram once; what differs between the version page, a diff, a draft
and an execution is how each state and edge is marked (changed, invalid, current,
taken three times). Every element gets one ``Mark`` holding its whole class attribute,
so the template prints it as it is and a live update compares and swaps it as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from studio.machines.diagram import StateDiagram, StateEdge, StateNode

Edge = tuple[str, str]


@dataclass(frozen=True)
class Mark:
    css: str = ""
    title: str = ""
    count: str = ""
    """An edge's count label, or a state's problem count; '' draws none."""

    def update(self, element_id: str) -> dict[str, str]:
        """The mark as a live update sends it (``static/live.js`` applies it)."""
        return {"id": element_id, "class": self.css, "title": self.title, "count": self.count}


def marks(
    diagram: StateDiagram,
    states: Mapping[str, Mark] | None = None,
    edges: Mapping[Edge, Mark] | None = None,
) -> dict[str, Mark]:
    """Every element's mark: its own classes and title, with ``states`` and ``edges``
    adding classes, replacing the title (when they have one) and giving a count."""
    states, edges = states or {}, edges or {}
    found = {
        n.node_id: _merge(_node_css(n), _node_title(n), states.get(n.step)) for n in diagram.nodes
    }
    for edge in diagram.edges:
        extra = edges.get((edge.source, edge.target))
        found[edge.edge_id] = _merge(_edge_css(edge), f"{edge.source} → {edge.target}", extra)
    return found


def _merge(css: str, title: str, extra: Mark | None) -> Mark:
    if extra is None:
        return Mark(css, title)
    return Mark(f"{css} {extra.css}".strip(), extra.title or title, extra.count)


def _node_css(node: StateNode) -> str:
    classes = ["node", "kind-state"]
    if node.initial:
        classes.append("initial")
    if node.terminal:
        classes.append("terminal-state")
    if node.timer is not None:
        classes.append("timer-state")
    return " ".join(classes)


def _node_title(node: StateNode) -> str:
    roles = [r for r, yes in (("initial", node.initial), ("terminal", node.terminal)) if yes]
    timer = [node.badge] if node.timer is not None else []
    return ", ".join([f"state {node.step}: {node.detail}", *roles, *timer])


def _edge_css(edge: StateEdge) -> str:
    return f"transition route-{edge.route}"
