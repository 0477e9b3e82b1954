"""The parts of an instance page that change while it runs, rendered one by one.

The page is drawn once; afterwards only these parts change: the head (status,
position, times), the actions the state allows, and each table (steps, attempts,
timers, signals, races, children, compensations, audit). Each part is rendered by its
own template into an element with a stable id and a digest of its content, so a live
update (or an action's response) can replace exactly the parts that changed, and a
browser skips a part whose digest it already shows: a form someone is typing in is
never replaced by an identical copy. Each part also carries the sequence it was drawn
at, and a browser never replaces a part with one drawn earlier: an action's response
and the live stream race, and whichever arrives last must not paint older state. The
graph is never re-rendered after the page opens: only its nodes' classes and titles
change (``node_updates``; for a machine, every state's and edge's mark, with the edges'
counts).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from litestar import Request
from markupsafe import Markup

from engine.model.definitions import definition_to_json
from studio.definitions.graph import Node, node_classes
from studio.definitions.structure import read_structure
from studio.drawings import drawing_of
from studio.instances.detail import InstanceDetail
from studio.instances.step_states import STATES, StepState
from studio.machines.marks import Mark
from studio.rendering import fragment

SECTIONS = (
    "head",
    "actions",
    "steps",
    "attempts",
    "timers",
    "signals",
    "races",
    "children",
    "compensations",
    "audit",
)
"""Element ids (``instance-<name>``) and templates (``instances/_<name>.html``)."""
NOT_FOR_MACHINES = frozenset({"signals", "races", "children"})
"""The parts a state machine's page leaves out: it takes no signal, runs no race and
starts no child."""
NOT_FOR_CODE = frozenset({"races"})
"""The part a code-first run's page leaves out: its races are entries of its journal
(and open waits), not steps of a definition."""
LAYOUTS: dict[str, Any] = {}
MAX_LAYOUTS = 64


@dataclass(frozen=True)
class Section:
    element_id: str
    html: Markup
    digest: str


def render_sections(
    request: Request, detail: InstanceDetail, oob: bool = False, **shown: Any
) -> dict[str, Section]:
    """Every changing part of the page for ``detail`` that its mode has, by name
    (``oob``: as htmx out-of-band swaps, for the response to an action; ``shown``: what
    the parts' templates show besides, such as a refused form again)."""
    left_out = frozenset()
    if detail.machine is not None:
        left_out = NOT_FOR_MACHINES
    elif detail.journal is not None:
        left_out = NOT_FOR_CODE
    return {
        name: render_section(request, name, detail, oob, **shown)
        for name in SECTIONS
        if name not in left_out
    }


def render_section(
    request: Request, name: str, detail: InstanceDetail, oob: bool = False, **shown: Any
) -> Section:
    element_id = f"instance-{name}"
    body = fragment(request, f"instances/_{name}.html", d=detail, **shown)
    digest = hashlib.sha256(body.encode()).hexdigest()[:16]
    swap = Markup(' hx-swap-oob="true"') if oob else ""
    html = Markup(
        '<div id="{}" class="live-part" data-digest="{}" data-sequence="{}"{}>{}</div>'
    ).format(element_id, digest, detail.state.sequence, swap, body)
    return Section(element_id, html, digest)


def graph_of(detail: InstanceDetail) -> Any:
    """The layout of the instance's pinned version (cached by fingerprint: it never changes)."""
    fingerprint = detail.state.definition.fingerprint
    found = LAYOUTS.get(fingerprint)
    if found is None:
        found = drawing_of(detail.definition).layout(definition_to_json(detail.definition))
        if len(LAYOUTS) >= MAX_LAYOUTS:
            LAYOUTS.pop(next(iter(LAYOUTS)))
        LAYOUTS[fingerprint] = found
    return found


def structure_of(detail: InstanceDetail) -> Any:
    return read_structure(definition_to_json(detail.definition))


def node_class(node: Node, states: dict[str, StepState]) -> str:
    """A node's classes: its kind (as the editor draws it) and its replayed state."""
    base = node_classes(node)
    if not node.is_step:
        return base
    return f"{base} {states.get(node.step, StepState('pending', '')).css}"


def node_title(node: Node, states: dict[str, StepState]) -> str:
    state = states.get(node.step)
    where = f"{node.kind} {node.title}: {node.detail}"
    return f"{where}, {state.state} ({state.note})" if state else where


def marks_of(detail: InstanceDetail) -> dict[str, Mark] | None:
    """Every element's mark, for a picture drawn from marks (a machine's); else None."""
    marks = drawing_of(detail.definition).marks
    return marks(graph_of(detail), detail.replayed) if marks else None


def node_updates(detail: InstanceDetail) -> list[dict[str, str]]:
    """For each step node (or each marked element): its element id, classes and title now."""
    marks = marks_of(detail)
    if marks is not None:
        return [mark.update(element_id) for element_id, mark in marks.items()]
    return [
        {
            "id": node.node_id,
            "class": node_class(node, detail.states),
            "title": node_title(node, detail.states),
        }
        for node in graph_of(detail).nodes
        if node.is_step
    ]


LEGEND = tuple(s for s in STATES if s != "pending")
