"""The diff of two machine versions: states, edges, timers and bounds.

A reviewer of a new machine version asks which states and edges were added or
removed, what changed in a state (its fields' types, whether it is terminal, its
timer), and which declarations changed (bounds, initial state, advance, grants). So
states are matched by name and compared on those, edges are matched as pairs (named
``From → To``, which ``studio.machines.views`` reads back to mark the diagram), and
every other manifest field is compared as a whole beside the definition's own fields.
It is the step lists' ``DefinitionDiff``, so pages and the API show it the same way.
"""

from __future__ import annotations

from typing import Any

from studio.definitions.diff import (
    TOP_FIELDS,
    Change,
    DefinitionDiff,
    StepChange,
    named_changes,
    top_changes,
)
from studio.machines.diagram import Shape, read_shape
from studio.machines.views import EDGE_ARROW

DECLARATIONS = (
    "initial",
    "max_attempts",
    "max_transitions",
    "function",
    "resource",
    "input",
    "compensation",
    "grants",
    "retry",
    "concurrency",
)
"""The manifest's fields compared as a whole, in the order a reviewer reads them."""


def diff_machines(left: Any, right: Any) -> DefinitionDiff:
    """The diff from machine document ``left`` to ``right``."""
    top = top_changes(left, right, (*TOP_FIELDS, "state.name", *DECLARATIONS))
    before, after = read_shape(left), read_shape(right)
    changes = named_changes(_states(before), _states(after))
    changes += [_edge(e, Change.ADDED) for e in after.edges if e not in before.edges]
    changes += [_edge(e, Change.REMOVED) for e in before.edges if e not in after.edges]
    return DefinitionDiff(top, tuple(changes))


def _states(shape: Shape) -> dict[str, tuple[str, dict[str, Any]]]:
    """What is compared of each state: its fields' types, terminal or not, its timer."""
    return {
        name: (
            "state",
            {
                "fields": dict(shape.fields[name]),
                "terminal": name in shape.terminal,
                "timer": shape.timers.get(name),
            },
        )
        for name in shape.states
    }


def _edge(edge: tuple[str, str], change: Change) -> StepChange:
    return StepChange(EDGE_ARROW.join(edge), "edge", change)
