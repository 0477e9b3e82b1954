"""How the studio draws each definition mode: the studio's part of ``engine.modes``.

The engine never imports the studio, so a mode's drawing is not among the parts the
engine installs; it is found here, by the same mode name. A drawing lays out a
published version as a graph and says what each of its nodes is doing in an instance
and where the instance stands. Step lists are drawn as blocks of steps; a new mode adds
its drawing module and one entry below.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.model.definitions import Definition, Mode
from engine.model.instance import Instance
from engine.modes import ModeNotSupported
from studio.definitions.graph import Graph, layout
from studio.instances.step_states import StepState, frontier, step_states


@dataclass(frozen=True)
class Drawing:
    layout: Callable[[Any], Graph]
    """The picture of a version, from its exchange-format document."""
    states: Callable[[Instance], dict[str, StepState]]
    """What each node is doing in an instance, by node name."""
    frontier: Callable[[Instance], set[str]]
    """The nodes the instance is at (none once it has ended or while it unwinds)."""


STEP_LIST = Drawing(layout, step_states, frontier)
DRAWINGS: dict[str, Drawing] = {Mode.ORCHESTRATION: STEP_LIST, Mode.CHOREOGRAPHY: STEP_LIST}


def drawing_of(definition: Definition) -> Drawing:
    """The drawing of ``definition``'s mode."""
    found = DRAWINGS.get(definition.mode)
    if found is None:
        raise ModeNotSupported(f"the studio cannot draw a {definition.mode} definition yet")
    return found
