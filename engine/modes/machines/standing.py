"""Where an execution stands, as the host operations ``state`` and ``status`` say it.

``status`` is one of the seed's seven words, read from the replayed instance: an
instance's own status says most of them; a running machine is ``waiting`` while its
state's timer is not yet due or a failed attempt backs off, and ``running`` when an
advance is due now or in flight (a timer fires with the advance it was waiting for).
Failures of a machine are its dead ends (``failed`` with a ``dead-*`` code), so every
failed execution is ``dead``; an operator's ``terminate`` ends it without
compensation, which a caller sees as ``cancelled``.

``state`` is the current variant and its fields (``StateValue``), or, given the state
family of the machine's Python declaration, an instance of the variant's dataclass.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from engine.model.errors import WaylineError
from engine.model.instance import Instance, InstanceStatus
from engine.modes.machines.fold import progress_of
from engine.modes.machines.states import MachineState

S = InstanceStatus
STATUSES = ("running", "waiting", "paused", "cancelling", "completed", "cancelled", "dead")
_ENDED = {
    S.PAUSED: "paused",
    S.CANCELLING: "cancelling",
    S.FAILING: "cancelling",
    S.COMPLETED: "completed",
    S.CONTINUED_AS_NEW: "completed",
    S.CANCELLED: "cancelled",
    S.TERMINATED: "cancelled",
    S.FAILED: "dead",
}


@dataclass(frozen=True)
class StateValue:
    """A machine's state without its Python declaration: the variant and its fields."""

    variant: str
    fields: dict[str, Any] = field(default_factory=dict)


def status_of(instance: Instance, now: datetime) -> str:
    """The execution's status at ``now`` (one of ``STATUSES``)."""
    if instance.status is not S.RUNNING:
        return _ENDED[instance.status]
    progress = progress_of(instance)
    assert instance.spec is not None and instance.spec.manifest is not None
    timer = instance.spec.manifest.timer(progress.state)
    due = progress.timer_due_at
    if timer is not None and progress.timer_fired_at is None and (due is None or due > now):
        return "waiting"
    if progress.retry_at is not None and progress.retry_at > now:
        return "waiting"
    return "running"


def waiting_for(instance: Instance, now: datetime) -> tuple[str | datetime, ...]:
    """What a live execution waits for at ``now``, in words with its instants kept as
    instants (``engine.modes.say`` writes them): ``wayline inspect``'s ``now`` line and
    the studio's Position, beside a step list's "waiting for approval manager_approval"."""
    progress = progress_of(instance)
    status = status_of(instance, now)
    if status == "cancelling":
        return (f"waiting for the compensation of {progress.state}",)
    if status == "paused":
        return (f"paused in {progress.state}",)
    if status == "running":
        return (f"waiting for the advance from {progress.state}, due now",)
    if progress.retry_at is not None and progress.retry_at > now:
        attempt = progress.attempts + 1
        waiting = f"waiting for attempt {attempt} of the advance from {progress.state} at "
        return (waiting, progress.retry_at)
    due = progress.timer_due_at
    timer = f"waiting for the timer of {progress.state}"
    return (timer, " until ", due) if due else (timer,)


def state_value(instance: Instance) -> StateValue:
    """The execution's current state: its variant and fields."""
    progress = progress_of(instance)
    return StateValue(progress.state, json.loads(progress.data) if progress.data else {})


def as_variant(value: StateValue, family: type[MachineState]) -> MachineState:
    """``value`` as an instance of its variant of ``family`` (the machine's state type)."""
    for variant in family._variants:
        if variant.__name__ == value.variant:
            return variant(**value.fields)
    raise WaylineError(f"{family.__name__} has no variant {value.variant}")
