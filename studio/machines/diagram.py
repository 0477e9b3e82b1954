"""A machine's state diagram, laid out on the server and drawn as inline SVG.

States are nodes in rows by their distance from the initial state (a breadth-first
walk along the allowed edges; the manifest's order inside a row), so the picture reads
top to bottom the way an execution usually moves, and the same manifest always draws
the same picture. States no walk reaches (only a draft can have them) share one row
below the others, so every state is drawn once whatever the document says.

Edges are drawn by where they go: down to a later row as a curve from the source's
bottom to the target's top; a state's edge to itself as a loop on its right; an edge
back up (or along its own row) as a square route through the gaps between rows, out
of the source's top and into the target's bottom, through a lane left of every node
when a row lies between them, so it never crosses a node. The initial state has an
entry dot, terminal states a double border, timer states their duration as a badge.

The layout reads the document leniently (``read_shape``): a draft's unknown names and
wrong shapes are left out here and reported by validation, on the nodes they concern.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from studio.definitions.graph import shorten

NODE_W = 180
NODE_H = 58
GAP_X = 72
GAP_Y = 84
MARGIN = 28
ENTRY = 36
"""Room above the first row for the entry dot and its arrow."""
HEAD = MARGIN + GAP_Y // 2 + 16
"""The first row's top: room for the entry dot, or for edges routed above the row."""
LOOP = 40
"""How far a self loop reaches right of its node."""
LANE = 14
"""Room per back edge in the lane left of the nodes."""
CORNER = 6


@dataclass(frozen=True)
class Shape:
    """What a machine document says about its states, read without judging it."""

    states: tuple[str, ...]
    fields: dict[str, tuple[tuple[str, str], ...]]
    initial: str
    terminal: frozenset[str]
    timers: dict[str, int]
    edges: tuple[tuple[str, str], ...]
    """Allowed edges between known states, each once, in the document's order."""


BADGE_CHAR = 7.2
"""The widest a character of a timer badge draws (11 px, bold), in the diagram's units."""
BADGE_PAD = 30
"""A timer badge's pill beside its duration: 8 px either side and 14 for its clock."""


@dataclass(frozen=True)
class StateNode:
    """One drawn state. ``step`` is its name, the key overlays and marks use."""

    node_id: str
    step: str
    detail: str
    x: float
    y: float
    w: float
    h: float
    layer: int
    initial: bool = False
    terminal: bool = False
    timer: int | None = None

    @property
    def cx(self) -> float:
        return self.x + self.w / 2

    @property
    def cy(self) -> float:
        return self.y + self.h / 2

    @property
    def badge(self) -> str:
        return f"timer {self.duration}" if self.timer is not None else ""

    @property
    def duration(self) -> str:
        return seconds_text(self.timer)

    @property
    def badge_width(self) -> float:
        """The timer badge's pill: a drawn clock (Chromium on Debian has no glyph for
        one) and the duration, wide enough for it at the badge's 11 px bold."""
        return round(len(self.duration) * BADGE_CHAR + BADGE_PAD, 1)


@dataclass(frozen=True)
class StateEdge:
    """An allowed edge; ``route`` says how it is drawn (down, self, back or level)."""

    source: str
    target: str
    route: str
    path: str
    label: tuple[float, float]

    @property
    def edge_id(self) -> str:
        return edge_id(self.source, self.target)


@dataclass(frozen=True)
class StateDiagram:
    """A machine laid out for drawing: positions are computed here so the template only
    draws, and overlays address nodes and edges by their ids."""

    nodes: tuple[StateNode, ...]
    edges: tuple[StateEdge, ...]
    width: float
    height: float
    entry: tuple[float, float] | None
    """Where the entry dot is (above the initial state), or None without one."""

    def node(self, step: str) -> StateNode | None:
        return next((n for n in self.nodes if n.step == step), None)


def edge_id(source: str, target: str) -> str:
    """The element id of the edge ``source`` -> ``target`` (state names are identifiers)."""
    return f"edge-{source}--{target}"


def seconds_text(seconds: int | None) -> str:
    """A timer's whole seconds in its largest whole unit: ``90 s``, ``5 min``, ``2 h``."""
    if seconds is None:
        return ""
    if seconds and seconds % 3600 == 0:
        return f"{seconds // 3600} h"
    if seconds and seconds % 60 == 0:
        return f"{seconds // 60} min"
    return f"{seconds} s"


def read_shape(document: Any) -> Shape:
    """The states, edges and marks of a machine document (a draft may be half written)."""
    top = document if isinstance(document, dict) else {}
    family = top.get("state")
    raw = family.get("variants") if isinstance(family, dict) else None
    states: list[str] = []
    fields: dict[str, tuple[tuple[str, str], ...]] = {}
    for variant in raw if isinstance(raw, list) else []:
        name = variant.get("name") if isinstance(variant, dict) else None
        if isinstance(name, str) and name and name not in fields:
            states.append(name)
            declared = variant.get("fields")
            pairs = declared.items() if isinstance(declared, dict) else ()
            fields[name] = tuple((str(k), str(v)) for k, v in pairs)
    known = set(states)
    initial = top.get("initial")
    terminal = top.get("terminal")
    timers = top.get("timers")
    return Shape(
        tuple(states),
        fields,
        initial if initial in known else "",
        frozenset(t for t in _list(terminal) if t in known),
        {
            k: v
            for k, v in (timers.items() if isinstance(timers, dict) else ())
            if k in known and isinstance(v, int) and not isinstance(v, bool)
        },
        tuple(_edges(top.get("transitions"), known)),
    )


def _list(value: Any) -> list[Any]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _edges(transitions: Any, known: set[str]) -> Iterable[tuple[str, str]]:
    seen: set[tuple[str, str]] = set()
    for source, targets in transitions.items() if isinstance(transitions, dict) else ():
        for target in _list(targets):
            if source in known and target in known and (source, target) not in seen:
                seen.add((source, target))
                yield source, target


def layers(shape: Shape) -> dict[str, int]:
    """Each state's row: its distance from the initial state; unreached ones last."""
    found: dict[str, int] = {}
    if shape.initial:
        found[shape.initial] = 0
        queue = deque([shape.initial])
        while queue:
            source = queue.popleft()
            for s, target in shape.edges:
                if s == source and target not in found:
                    found[target] = found[source] + 1
                    queue.append(target)
    last = max(found.values(), default=-1) + 1
    return {state: found.get(state, last) for state in shape.states}


def layout(document: Any) -> StateDiagram:
    """Lay out the machine of ``document`` (a published version or a draft)."""
    shape = read_shape(document)
    rows = layers(shape)
    count = max(rows.values(), default=-1) + 1
    members = [[s for s in shape.states if rows[s] == row] for row in range(count)]
    routes = {(s, t): _route(rows, s, t) for s, t in shape.edges}
    lanes = [e for e, route in routes.items() if route == "lane"]
    left = MARGIN + (LANE * (len(lanes) + 1) if lanes else 0)
    widest = max((_row_width(len(m)) for m in members), default=NODE_W)
    top = HEAD
    nodes: dict[str, StateNode] = {}
    for row, names in enumerate(members):
        x = left + (widest - _row_width(len(names))) / 2
        for name in names:
            nodes[name] = StateNode(
                f"state-{name}",
                name,
                _fields_text(shape.fields[name]),
                x,
                top + row * (NODE_H + GAP_Y),
                NODE_W,
                NODE_H,
                row,
                name == shape.initial,
                name in shape.terminal,
                shape.timers.get(name),
            )
            x += NODE_W + GAP_X
    ports = _Ports(shape.edges, routes)
    edges = tuple(
        _edge(nodes[s], nodes[t], routes[(s, t)], ports, lanes, left) for s, t in shape.edges
    )
    first = nodes.get(shape.initial)
    entry = (first.cx, first.y - ENTRY + 6) if first else None
    height = top + max(count, 1) * (NODE_H + GAP_Y) - GAP_Y + MARGIN
    return StateDiagram(
        tuple(nodes[s] for s in shape.states), edges, left + widest + LOOP + MARGIN, height, entry
    )


def _row_width(size: int) -> float:
    return size * NODE_W + max(size - 1, 0) * GAP_X


def _fields_text(fields: tuple[tuple[str, str], ...]) -> str:
    return shorten(", ".join(f"{k}: {v}" for k, v in fields) or "no fields", 28)


def _route(rows: dict[str, int], source: str, target: str) -> str:
    if source == target:
        return "self"
    if rows[target] > rows[source]:
        return "down"
    if rows[source] - rows[target] > 1:
        return "lane"
    return "back" if rows[target] < rows[source] else "level"


class _Ports:
    """Where each edge leaves its source and enters its target, spread along the side
    it uses so that edges sharing a node do not share a line."""

    def __init__(self, edges: tuple[tuple[str, str], ...], routes: dict[tuple[str, str], str]):
        self.out: dict[str, list[tuple[str, str]]] = {}
        self.into: dict[str, list[tuple[str, str]]] = {}
        for s, t in edges:
            if routes[(s, t)] != "self":
                self.out.setdefault(s, []).append((s, t))
                self.into.setdefault(t, []).append((s, t))

    def start(self, node: StateNode, edge: tuple[str, str]) -> float:
        return _spread(node, self.out[node.step], edge)

    def end(self, node: StateNode, edge: tuple[str, str]) -> float:
        """Ends sit a little right of where starts would, so the two never meet."""
        return _spread(node, self.into[node.step], edge) + 5


def _spread(node: StateNode, edges: list[tuple[str, str]], edge: tuple[str, str]) -> float:
    return node.x + node.w * (edges.index(edge) + 1) / (len(edges) + 1)


def _edge(
    source: StateNode,
    target: StateNode,
    route: str,
    ports: _Ports,
    lanes: list[tuple[str, str]],
    left: float,
) -> StateEdge:
    key = (source.step, target.step)
    if route == "self":
        x, y = source.x + source.w, source.cy
        path = (
            f"M{x:g},{y - 12:g} C{x + LOOP:g},{y - 34:g} {x + LOOP:g},{y + 34:g} {x:g},{y + 12:g}"
        )
        return StateEdge(*key, route, path, (x + LOOP - 6, y))
    sx, tx = ports.start(source, key), ports.end(target, key)
    if route == "down":
        sy, ty = source.y + source.h, target.y
        bend = (ty - sy) / 2
        path = f"M{sx:g},{sy:g} C{sx:g},{sy + bend:g} {tx:g},{ty - bend:g} {tx:g},{ty:g}"
        return StateEdge(*key, route, path, ((sx + tx) / 2, (sy + ty) / 2))
    # Up or along a row: out of the source's top, into the target's bottom (or top, in
    # its own row), through the gap above the source's row.
    offset = (lanes.index(key) if key in lanes else ports.out[source.step].index(key)) % 4 * 5
    above = source.y - GAP_Y / 2 - offset
    end_y = target.y if route == "level" else target.y + target.h
    if route == "lane":
        lane = left - LANE * (lanes.index(key) + 1)
        below = target.y + target.h + GAP_Y / 2 + offset
        points = [(sx, source.y), (sx, above), (lane, above), (lane, below), (tx, below)]
        label = (lane, (above + below) / 2)
    else:
        points = [(sx, source.y), (sx, above), (tx, above)]
        label = ((sx + tx) / 2, above)
    points.append((tx, end_y))
    return StateEdge(*key, route, _rounded(points), label)


def _rounded(points: list[tuple[float, float]]) -> str:
    """A path through ``points`` (horizontal and vertical runs) with rounded corners."""
    parts = [f"M{points[0][0]:g},{points[0][1]:g}"]
    for before, corner, after in zip(points, points[1:], points[2:], strict=False):
        into = _toward(corner, before, CORNER)
        out = _toward(corner, after, CORNER)
        parts.append(f"L{into[0]:g},{into[1]:g} Q{corner[0]:g},{corner[1]:g} {out[0]:g},{out[1]:g}")
    parts.append(f"L{points[-1][0]:g},{points[-1][1]:g}")
    return " ".join(parts)


def _toward(
    point: tuple[float, float], other: tuple[float, float], distance: float
) -> tuple[float, float]:
    """The point ``distance`` from ``point`` toward ``other`` (at most half way)."""
    dx, dy = other[0] - point[0], other[1] - point[1]
    length = abs(dx) + abs(dy)
    if not length:
        return point
    step = min(distance, length / 2) / length
    return point[0] + dx * step, point[1] + dy * step
