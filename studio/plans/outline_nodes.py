"""Which node of a version's picture a pin stands on, and what a picked node can pin.

A step list's node and a machine's state are named as their pins name them, so a pin
stands on the node of its own name. A code-first workflow's outline names its nodes by
verb (``step:charge``, ``wait:paid``, ``race:paid,cancelled``: ``studio.code.
outline_graph``) while its pins name a step's call (``charge.1``, ``charge.2``) or a
signal (``paid``: ``verification.plan_code``), so here a step node offers its step's
calls (the first unless a call number is given) and a wait its signals, and a pin
stands on every node that calls its step or awaits its signal. The other nodes
(sleeps, branches, spawned children) have no work a code plan can fault.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeVar

from engine.model.definitions import Definition, Mode
from studio.code.outline_graph import read_outline
from verification import plan_code

T = TypeVar("T")
SIGNAL_VERBS = ("wait", "race", "all")


@dataclass(frozen=True)
class Pinnable:
    """What a picked outline node can pin: a step's calls (``step``), or the signals
    it awaits (``signals``)."""

    step: str = ""
    signals: tuple[str, ...] = ()

    def key(self, call: int = 1, signal: str = "") -> str:
        """The pin's step key: ``NAME.CALL`` of a step, else ``signal`` (the node's
        first when none is given)."""
        if self.step:
            return f"{self.step}.{call}"
        return signal or self.signals[0]

    def holds(self, key: str) -> bool:
        match = plan_code.KEY.match(key)
        return key in self.signals or bool(self.step and match and match[1] == self.step)


def outline_nodes(definition: Definition) -> dict[str, Pinnable]:
    """Each pinnable node of a code-first version's outline, by node name."""
    document = {"outline": plan_code.outline_of(definition)}
    found: dict[str, Pinnable] = {}
    for shape in read_outline(document).steps:
        raw = shape.raw
        if shape.kind == "step" and isinstance(raw.get("name"), str):
            found[shape.name] = Pinnable(step=raw["name"])
        elif shape.kind in SIGNAL_VERBS:
            awaited = [raw.get("name")] if shape.kind == "wait" else list(raw.get("on") or ())
            names = tuple(str(n) for n in awaited if isinstance(n, str))
            if names:
                found[shape.name] = Pinnable(signals=names)
    return found


def pinnable(definition: Definition, node: str) -> Pinnable | None:
    """What the code-first node ``node`` can pin (None: nothing)."""
    return outline_nodes(definition).get(node)


def nodes_of(definition: Definition, key: str) -> list[str]:
    """The names of the nodes a pin on ``key`` stands on."""
    if definition.mode is not Mode.CODE:
        return [key]
    return [name for name, node in outline_nodes(definition).items() if node.holds(key)]


def by_node(definition: Definition, per_key: Mapping[str, list[T]]) -> dict[str, list[T]]:
    """``per_key`` (pin key to items) gathered on the nodes the keys stand on."""
    found: dict[str, list[T]] = {}
    for key, items in per_key.items():
        for node in nodes_of(definition, key):
            found.setdefault(node, []).extend(items)
    return found
