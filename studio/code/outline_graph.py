"""A code-first workflow drawn from its code: the outline of its ctx calls as blocks.

Publishing a code workflow stores an *outline* of its function (``engine.modes.code
.outline``): its durable verbs in source order, and the branches, loops and ``try``
blocks around them. The studio draws it with the step lists' block layout
(``studio.definitions.graph.draw``) so both modes look alike: a verb is a node, an
``if`` forks into its ``then`` and ``else`` columns and closes at "end if", a loop is a
fork of one column closing at "repeat", a ``try`` has its body and one column per
handler. Nothing here raises: an outline node of a shape it does not know becomes a
node of kind "unknown", so a version published by newer code still draws.

Each verb node is named for the journal entries it stands for (``verb_name``), so an
instance's journal can colour it: ``step:charge``, ``wait:paid``, ``race:paid,cancelled``,
``spawn:shipping``; a verb without a name (``sleep``, ``now``) counts its kind instead
(``sleep:2`` is the second ``sleep`` of the outline).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from studio.definitions.graph import Graph, draw
from studio.definitions.structure import Block, StepShape, Structure

VERBS = ("step", "sleep", "wait", "race", "all", "spawn", "now", "random", "uuid4")
NAMED = ("step", "wait", "spawn")
"""Verbs whose journal entries carry the name the outline shows."""
AWAITING = ("race", "all")
"""Verbs named by what they await."""


def verb_name(verb: str, name: str = "", on: tuple[str, ...] = (), count: int = 1) -> str:
    """The node name a journal entry and an outline node share (see the module doc)."""
    if verb in NAMED:
        return f"{verb}:{name}"
    if verb in AWAITING:
        return f"{verb}:{','.join(on)}"
    return f"{verb}:{count}"


def layout(document: Any) -> Graph:
    """The picture of a code workflow's published document."""
    return draw(read_outline(document))


def read_outline(document: Any) -> Structure:
    """The outline of ``document`` as the block structure the graph lays out."""
    outline = document.get("outline") if isinstance(document, dict) else None
    builder = _Builder()
    blocks = builder.sequence(outline if isinstance(outline, list) else [])
    return Structure(tuple(blocks), tuple(builder.shapes))


@dataclass
class _Builder:
    shapes: list[StepShape] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)

    def sequence(self, nodes: list[Any]) -> list[Block]:
        return [self.block(node if isinstance(node, dict) else {}) for node in nodes]

    def block(self, node: dict[str, Any]) -> Block:
        if "if" in node:
            head = self.shape(node, "if", f"if {_text(node['if'])}", "branch")
            columns = (self.column(node.get("then")), self.column(node.get("else")))
            return Block(head, columns, fork=True, closing="end if")
        if "loop" in node:
            head = self.shape(node, "loop", _text(node["loop"]), "repeats")
            return Block(head, (self.column(node.get("body")),), fork=True, closing="repeat")
        if "try" in node:
            head = self.shape(node, "try", "try", "handles failures")
            handlers = node.get("handlers")
            columns = [self.column(node.get("body"))]
            for handler in handlers if isinstance(handlers, list) else []:
                columns.append(
                    self.column(handler.get("body") if isinstance(handler, dict) else [])
                )
            return Block(head, tuple(columns), fork=True, closing="end try")
        if node.get("return"):
            return Block(self.shape(node, "return", "return", "the run completes"), fork=False)
        if node.get("raise"):
            return Block(self.shape(node, "raise", "raise", "the run fails"), fork=False)
        return Block(self.verb(node), fork=False)

    def column(self, nodes: Any) -> tuple[Block, ...]:
        return tuple(self.sequence(nodes if isinstance(nodes, list) else []))

    def verb(self, node: dict[str, Any]) -> StepShape:
        verb = _text(node.get("verb"))
        if verb not in VERBS:
            return self.shape(node, "unknown", verb or "?", "not drawn by this studio")
        self.counts[verb] += 1
        name = _text(node.get("name"))
        on = tuple(_text(o) for o in node.get("on") or () if isinstance(o, str))
        key = verb_name(verb, name, on, self.counts[verb])
        label = name or (" | ".join(on) if on else verb)
        return self.shape(node, verb, label, _detail(verb, node), key)

    def shape(
        self, node: dict[str, Any], kind: str, label: str, detail: str, name: str = ""
    ) -> StepShape:
        index = len(self.shapes)
        line = node.get("line")
        where = f"line {line}" if isinstance(line, int) else ""
        shape = StepShape(
            index=index,
            name=name or f"{kind}@{index}",
            kind=kind,
            branches=(),
            raw=node,
            element_id=f"code-{index}",
            label=label,
            detail=", ".join(p for p in (detail, where) if p),
        )
        self.shapes.append(shape)
        return shape


def _detail(verb: str, node: dict[str, Any]) -> str:
    """What the verb node's second line says: its options, its timeout, what it awaits."""
    timeout = node.get("timeout")
    timeout = str(timeout) if isinstance(timeout, str | int | float) and timeout != "" else ""
    if verb == "step":
        retries = node.get("retries")
        parts = [f"{retries} tries" if isinstance(retries, int) and retries > 1 else ""]
        parts.append("compensated" if node.get("compensated") else "")
        return ", ".join(p for p in parts if p) or "step"
    if verb == "sleep":
        return f"sleep {timeout}" if timeout else "sleep"
    if verb == "wait":
        return f"signal, {timeout} timeout" if timeout else "signal"
    if verb in AWAITING:
        first = "first of" if verb == "race" else "all of"
        return f"{first} {len(node.get('on') or ())}" + (f", {timeout}" if timeout else "")
    if verb == "spawn":
        return "child run"
    return "recorded value"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""
