"""What an execution's page lays over its machine's diagram, and its state panel.

The current state is marked with what it is doing (the step lists' state classes, so
the colours and the legend mean the same: ``running`` when an advance is due,
``waiting-timer``, ``retry-waiting``, ``compensating`` while a cancellation runs the
compensation, ``succeeded`` once completed in a terminal state, ``failed`` when dead or
cancelled there), every edge taken with how often, and the
edge taken last. ``view`` is the panel beside the diagram: the state's fields, what
the execution has used of its bounds, its timer and its failed advances.

The status words are the engine's (``status_of``, what the host operation ``status``
answers: running, waiting, paused, cancelling, completed, cancelled, dead).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from engine.model.instance import UNWINDING_STATUSES, Instance, InstanceStatus
from engine.modes.machines.fold import manifest_of, progress_of
from engine.modes.machines.standing import status_of
from studio.formats import format_when
from studio.instances.step_states import StepState
from studio.machines.diagram import StateDiagram
from studio.machines.marks import Mark, marks
from studio.machines.walk import Failure, Walk

S = InstanceStatus
DEAD = "dead-"
LEGEND = (
    "running", "waiting-timer", "retry-waiting", "waiting", "compensating", "succeeded", "failed",
)  # fmt: skip


def current(state: Instance) -> StepState:
    """What the current state is doing, as its node's class and title say."""
    progress, manifest = progress_of(state), manifest_of(state)
    if state.status is S.COMPLETED:
        return StepState("succeeded", "completed here")
    if state.status is S.FAILED:
        dead = state.failure_code.startswith(DEAD)
        return StepState("failed", f"{'dead' if dead else 'failed'}: {state.failure_code}")
    if state.status.terminal:
        return StepState("failed", f"{state.status.label} here")
    if state.status in UNWINDING_STATUSES:
        return StepState("compensating", "cancelling: its compensation runs")
    if state.status is not S.RUNNING:
        return StepState("waiting", state.status.label)
    if manifest.timer(progress.state) is not None and progress.timer_fired_at is None:
        due = progress.timer_due_at
        return StepState("waiting-timer", f"timer due {format_when(due)}" if due else "timer")
    if progress.retry_at is not None:
        failed = f"attempt {progress.attempts} failed ({progress.code})"
        return StepState("retry-waiting", f"{failed}; next {format_when(progress.retry_at)}")
    return StepState("running", "advance due")


def states(state: Instance) -> dict[str, StepState]:
    """The current state's StepState (the others have not one: they are not current)."""
    return {progress_of(state).state: current(state)}


def frontier(state: Instance) -> set[str]:
    """The state an execution that is still going is in."""
    going = state.status in (S.RUNNING, S.PAUSED)
    return {progress_of(state).state} if going else set()


def execution_marks(diagram: StateDiagram, state: Instance, walk: Walk) -> dict[str, Mark]:
    """The diagram's marks for an execution: its current state and the edges it took."""
    now = progress_of(state).state
    doing = current(state)
    title = f"{now}: current state, {doing.state.replace('-', ' ')} ({doing.note})"
    edges = {}
    for edge, times in walk.taken.items():
        css = "taken last" if edge == walk.last else "taken"
        label = f"{edge[0]} → {edge[1]}: taken {times} time{'s' if times != 1 else ''}"
        edges[edge] = Mark(css, label, str(times))
    return marks(diagram, {now: Mark(f"current {doing.css}", title)}, edges)


@dataclass(frozen=True)
class Field:
    """One field the current state declares, with its value in the execution's data."""

    name: str
    type: str
    value: Any


@dataclass(frozen=True)
class MachineView:
    """The state panel of an execution's page."""

    state: str
    status: str
    note: str
    fields: tuple[Field, ...]
    transitions: int
    max_transitions: int
    attempts: int
    max_attempts: int
    timer: int | None
    timer_due_at: datetime | None
    timer_fired_at: datetime | None
    failures: tuple[Failure, ...]
    taken: tuple[tuple[str, str, int], ...]

    @property
    def position(self) -> str:
        """Where the execution stands, for the page's head."""
        return f"{self.status} in {self.state}: {self.note}"


def view(state: Instance, walk: Walk, now: datetime) -> MachineView:
    progress, manifest = progress_of(state), manifest_of(state)
    variant = manifest.variant(progress.state)
    values = json.loads(progress.data) if progress.data else {}
    declared = variant.fields if variant else ()
    return MachineView(
        progress.state,
        status_of(state, now),
        current(state).note,
        tuple(Field(name, kind, values.get(name)) for name, kind in declared),
        progress.transitions,
        manifest.max_transitions,
        progress.attempts,
        manifest.max_attempts,
        manifest.timer(progress.state),
        progress.timer_due_at,
        progress.timer_fired_at,
        tuple(reversed(walk.failures)),
        tuple((s, t, n) for (s, t), n in walk.taken.items()),
    )
