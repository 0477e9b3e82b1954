"""The definition graph: a block layout computed on the server, drawn as inline SVG.

Step kinds are block-structured (see ``studio.definitions.structure``), so the layout is a recursive
nesting of boxes rather than a general graph layout: a sequence stacks its blocks
top to bottom on one centre line; a fork puts its head above a row of columns (one per
branch, one more for the steps that run meanwhile) and its join, or for a race a small
"first wins" merge point, below them. The result depends only on the document, so the
same definition always draws the same picture, node positions never come from the
browser and nothing needs storing.

Edges between blocks of a sequence carry the document position where a step inserted
on them belongs (``insert_at``); forks carry a slot for adding a branch. Nodes keep the
element id of their step (``step-<name>``) so later pages can restyle them in place.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from studio.definitions.structure import Block, StepShape, Structure, read_structure

NODE_W = 200
NODE_H = 56
GAP_Y = 44
GAP_X = 28
TERMINAL = 26
"""Diameter of the start, end and merge circles."""
SLOT = 26
"""Size of the 'add a branch' button beside a fork's columns."""
MARGIN = 24
MAX_LABEL = 26
FITS_LABEL = 16
"""Labels this long fit a node's width whatever their glyphs (the widest, W or M, at the
title's size); a longer one is squeezed to the node's width rather than spill out."""
MAX_MARKERS = 6
"""Pin markers drawn along one node's edge; more are counted (``+n``) instead."""


@dataclass(frozen=True)
class Node:
    """A drawn step (or the start, end or merge point of the graph)."""

    node_id: str
    kind: str
    title: str
    detail: str
    x: float
    y: float
    w: float
    h: float
    index: int = -1
    """The step's position in the document; -1 for start, end and merge points."""
    step: str = ""
    ref: str = ""
    """How a link names the step (``StepShape.ref``): its name unless another has it."""
    compensation: str = ""
    """The target that undoes the step when its instance unwinds ('' when none)."""

    @property
    def cx(self) -> float:
        return self.x + self.w / 2

    @property
    def is_step(self) -> bool:
        return self.index >= 0


@dataclass(frozen=True)
class Edge:
    """A connector; ``insert_at`` is where a step inserted on it goes (None: nowhere)."""

    points: tuple[tuple[float, float], ...]
    insert_at: int | None = None
    handle: tuple[float, float] | None = None
    before: str = ""
    """The name of the step a step inserted here goes before ('' at the end)."""

    @property
    def insert_label(self) -> str:
        where = f"before {self.before}" if self.before else "at the end"
        return f"Insert a step {where}"

    @property
    def path(self) -> str:
        return " ".join(
            f"{'M' if i == 0 else 'L'}{x:g},{y:g}" for i, (x, y) in enumerate(self.points)
        )


@dataclass(frozen=True)
class BranchSlot:
    """Where the 'add a branch' button of a parallel or race is drawn."""

    owner: str
    owner_index: int
    x: float
    y: float


@dataclass(frozen=True)
class Graph:
    """A step list laid out for drawing (``layout``): positions are computed here so the
    template only draws, and a draft that does not validate yet still has a picture."""

    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    slots: tuple[BranchSlot, ...]
    width: float
    height: float

    def node(self, step: str) -> Node | None:
        return next((n for n in self.nodes if n.step == step), None)


@dataclass
class _Canvas:
    nodes: list[Node] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)
    slots: list[BranchSlot] = field(default_factory=list)


def layout(document: Any) -> Graph:
    """Lay out ``document`` (a definition or a draft that may not validate yet)."""
    return draw(read_structure(document))


def draw(structure: Structure) -> Graph:
    """Lay out a block structure: a step list's, or one another mode builds (outlines)."""
    blocks = list(structure.blocks)
    inner_w, _ = _measure_sequence(blocks)
    width = max(inner_w, NODE_W) + 2 * MARGIN
    cx = width / 2
    canvas = _Canvas()
    y = MARGIN
    start = _terminal("graph-start", "start", "Start", cx, y)
    canvas.nodes.append(start)
    y += TERMINAL + GAP_Y
    top, bottom = _place_sequence(canvas, blocks, cx, y)
    end_y = bottom + GAP_Y if blocks else y
    end = _terminal("graph-end", "end", "End", cx, end_y)
    canvas.nodes.append(end)
    end_at = len(structure.steps)
    first_at = blocks[0].first_index if blocks else end_at
    _connect(canvas, cx, start.y + TERMINAL, top if blocks else end_y, first_at)
    if blocks:
        _connect(canvas, cx, bottom, end_y, end_at)
    height = end_y + TERMINAL + MARGIN
    names = [s.name or f"step {s.index + 1}" for s in structure.steps]
    edges = tuple(
        replace(e, before=names[e.insert_at] if e.insert_at < len(names) else "")
        if e.insert_at is not None
        else e
        for e in canvas.edges
    )
    return Graph(tuple(canvas.nodes), edges, tuple(canvas.slots), width, height)


def describe(step: StepShape) -> str:
    """The second line of a node: what the step runs or waits for."""
    if step.detail:
        return step.detail
    raw = step.raw
    if step.kind in ("activity", "signal", "approval"):
        return _text(raw.get("target")) or "no target yet"
    if step.kind == "timer":
        return f"wait {_text(raw.get('timeout')) or '?'}"
    if step.kind == "child":
        child = raw.get("child_definition")
        if isinstance(child, dict):
            return f"{_text(child.get('name'))}@{_text(child.get('version'))}"
        return "no child pinned yet"
    if step.kind == "parallel":
        return f"all of {len(step.branches)} branches"
    if step.kind == "race":
        return f"first of {len(step.branches)}"
    if step.kind == "join":
        return f"waits for {len(step.branches)}"
    return "unknown kind"


def shorten(text: str, limit: int = MAX_LABEL) -> str:
    """Fit a label in a node; the full text stays in the node's title."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _terminal(node_id: str, kind: str, title: str, cx: float, y: float) -> Node:
    return Node(node_id, kind, title, "", cx - TERMINAL / 2, y, TERMINAL, TERMINAL)


def _step_node(step: StepShape, cx: float, y: float) -> Node:
    return Node(
        step.node_id,
        step.kind or "unknown",
        step.label or step.name or f"step {step.index + 1}",
        describe(step),
        cx - NODE_W / 2,
        y,
        NODE_W,
        NODE_H,
        step.index,
        step.name,
        step.ref or step.name,
        _compensation(step.raw),
    )


def _compensation(raw: dict[str, Any]) -> str:
    compensation = raw.get("compensation")
    return _text(compensation.get("target")) if isinstance(compensation, dict) else ""


def _connect(canvas: _Canvas, x: float, y1: float, y2: float, insert_at: int | None = None) -> None:
    handle = (x, (y1 + y2) / 2) if insert_at is not None else None
    canvas.edges.append(Edge(((x, y1), (x, y2)), insert_at, handle))


# Measuring -----------------------------------------------------------------------------


def _measure_sequence(blocks: list[Block] | tuple[Block, ...]) -> tuple[float, float]:
    if not blocks:
        return 0.0, 0.0
    sizes = [_measure(b) for b in blocks]
    return max(w for w, _ in sizes), sum(h for _, h in sizes) + GAP_Y * (len(sizes) - 1)


def _measure(block: Block) -> tuple[float, float]:
    if not block.is_fork:
        return NODE_W, NODE_H
    columns_w, columns_h = _measure_columns(block)
    closing = NODE_H if block.tail is not None else TERMINAL
    height = NODE_H + GAP_Y + columns_h + GAP_Y + closing
    # The branch slot sits right of the columns; the same room on the left keeps the
    # columns centred under their head.
    return max(NODE_W, columns_w + 2 * (GAP_X + SLOT)), height


def _measure_columns(block: Block) -> tuple[float, float]:
    sizes = [_measure_sequence(column) for column in block.columns]
    widths = [w for w, _ in sizes]
    total = sum(widths) + GAP_X * max(len(widths) - 1, 0)
    return total, max((h for _, h in sizes), default=NODE_H)


# Placing -------------------------------------------------------------------------------


def _place_sequence(
    canvas: _Canvas, blocks: list[Block] | tuple[Block, ...], cx: float, y: float
) -> tuple[float, float]:
    """Place blocks on the centre line ``cx`` from ``y``; returns (top, bottom)."""
    top = y
    for i, block in enumerate(blocks):
        _, height = _measure(block)
        _place(canvas, block, cx, y)
        y += height
        if i + 1 < len(blocks):
            _connect(canvas, cx, y, y + GAP_Y, blocks[i + 1].first_index)
            y += GAP_Y
    return top, y


def _place(canvas: _Canvas, block: Block, cx: float, y: float) -> None:
    canvas.nodes.append(_step_node(block.head, cx, y))
    if not block.is_fork:
        return
    columns_w, columns_h = _measure_columns(block)
    split_y = y + NODE_H + GAP_Y / 2
    columns_y = y + NODE_H + GAP_Y
    close_y = columns_y + columns_h + GAP_Y
    merge_y = close_y - GAP_Y / 2
    left = cx - columns_w / 2
    for position, column in enumerate(block.columns):
        width, height = _measure_sequence(column)
        ccx = left + width / 2
        canvas.edges.append(
            Edge(((cx, y + NODE_H), (cx, split_y), (ccx, split_y), (ccx, columns_y)))
        )
        _place_sequence(canvas, column, ccx, columns_y)
        meanwhile = block.meanwhile and position == len(block.columns) - 1
        bottom = columns_y + height
        if meanwhile and block.tail is not None:
            _connect(canvas, ccx, bottom, bottom + GAP_Y / 2, block.tail.index)
            bottom += GAP_Y / 2
        canvas.edges.append(Edge(((ccx, bottom), (ccx, merge_y), (cx, merge_y), (cx, close_y))))
        left += width + GAP_X
    canvas.slots.append(
        BranchSlot(block.head.name, block.head.index, left, columns_y + (NODE_H - SLOT) / 2)
    )
    if block.tail is not None:
        canvas.nodes.append(_step_node(block.tail, cx, close_y))
    else:
        merge_id = f"merge-{block.head.node_id}"
        canvas.nodes.append(_terminal(merge_id, "merge", block.closing, cx, close_y))


def node_classes(
    node: Node,
    problems: Mapping[str, int] | None = None,
    marks: Mapping[str, str] | None = None,
    selected: str = "",
) -> str:
    """CSS classes of a node: its kind, and whether it is invalid, changed or selected."""
    classes = ["node", f"kind-{node.kind}"]
    if node.is_step and problems and problems.get(node.step):
        classes.append("invalid")
    if node.is_step and marks and node.step in marks:
        classes.append(f"diff-{marks[node.step]}")
    if node.is_step and selected and (node.ref or node.step) == selected:
        classes.append("selected")
    return " ".join(classes)
