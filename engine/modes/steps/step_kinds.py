"""The one per-step-kind table: which of a reader's handlers serves each kind of step.

Deciding what an instance does next (``engine.modes.steps.orchestration``) and showing
what each step is doing (the studio's step states) both handle every kind of step, and
both treat signal and approval steps alike (a wait for an outside input). Each reader names
its handlers here, by role, and gets back its table: a new kind of step is added in
this one place, and every reader that lacks a handler for its role fails at import.
"""

from __future__ import annotations

from typing import TypeVar

from engine.model.definitions import StepKind

Handler = TypeVar("Handler")


def table(
    *,
    activity: Handler,
    timer: Handler,
    wait: Handler,
    child: Handler,
    parallel: Handler,
    join: Handler,
    race: Handler,
) -> dict[StepKind, Handler]:
    """Each step kind's handler; ``wait`` serves signal and approval steps."""
    return {
        StepKind.ACTIVITY: activity,
        StepKind.TIMER: timer,
        StepKind.SIGNAL: wait,
        StepKind.APPROVAL: wait,
        StepKind.CHILD: child,
        StepKind.PARALLEL: parallel,
        StepKind.JOIN: join,
        StepKind.RACE: race,
    }
