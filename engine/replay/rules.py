"""Small checks shared by the replay handlers, each raising ReplayRejected."""

from __future__ import annotations

from collections.abc import Mapping

from engine.model.definitions import Step, StepKind
from engine.model.errors import ReplayRejected
from engine.model.events import Event
from engine.model.instance import Instance, InstanceStatus


def reject(event: Event, message: str) -> ReplayRejected:
    """The error for ``event`` breaking a rule (raise the result)."""
    return ReplayRejected(event.sequence, message)


def require_status(state: Instance, event: Event, *allowed: InstanceStatus) -> None:
    if state.status not in allowed:
        names = " or ".join(s.label for s in allowed)
        raise reject(
            event, f"{event.kind.label} needs the instance {names}, not {state.status.label}"
        )


def require_step(state: Instance, event: Event, *kinds: StepKind) -> Step:
    """The definition step the event names, which must be one of ``kinds``."""
    assert state.spec is not None
    step = state.spec.step(event.step)
    if step is None:
        raise reject(event, f"step {event.step!r} is not in {state.definition}")
    if step.kind not in kinds:
        raise reject(event, f"step {event.step!r} is a {step.kind.value} step")
    return step


def require_first(
    state: Instance, event: Event, kind: StepKind, taken: Mapping[str, object], already: str
) -> Step:
    """The step of ``kind`` a running instance acts on for the first time (an activity,
    child or timer scheduled, a race won); ``already`` says why a second time is refused."""
    require_status(state, event, InstanceStatus.RUNNING)
    step = require_step(state, event, kind)
    if event.step in taken:
        raise reject(event, already)
    return step


def require_size(event: Event, limit: int, what: str) -> None:
    size = 0 if event.data is None else len(event.data.encode())
    if size > limit:
        raise reject(event, f"{what} is {size} bytes; the step allows at most {limit}")
