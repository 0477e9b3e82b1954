"""How replay folds a machine's events: states entered along allowed edges, failed
advances, timers, and completion only in a terminal state.

A machine starts in its manifest's initial state (which has no fields, so nothing
needs recording), with no transitions used and no attempt failed. Each advance attempt
either enters a state (``state_entered``, which resets the failed attempts) or fails
(``advance_failed``, which says when the next attempt is due, or that none is left).
Replay refuses what no correct runtime writes: an edge the manifest does not allow, a
state whose fields do not match its variant, anything after a terminal state, a
transition beyond ``max_transitions``, an attempt beyond ``max_attempts`` or before
its retry is due, and the advance of a timer state before its timer fired. Timers
reuse the step lists' ``timer_scheduled`` and ``timer_fired``, naming the state.
"""

from __future__ import annotations

import json
from datetime import timedelta

from engine.model.events import Event, EventKind
from engine.model.frozen import evolve
from engine.model.instance import AuditEntry, Instance, InstanceStatus, MachineProgress
from engine.model.limits import MAX_STATE_BYTES
from engine.model.registry import Registry
from engine.modes import FoldRule
from engine.modes.machines.field_types import value_problem
from engine.modes.machines.manifest import MachineManifest
from engine.replay.lifecycle import lifecycle
from engine.replay.rules import reject, require_status

K = EventKind


def manifest_of(state: Instance) -> MachineManifest:
    """The manifest of the machine the instance runs."""
    assert state.spec is not None and isinstance(state.spec.manifest, MachineManifest)
    return state.spec.manifest


def progress_of(state: Instance) -> MachineProgress:
    """Where the machine stands; in its initial state until its first event."""
    return state.machine or MachineProgress(manifest_of(state).initial)


def enter_state(
    state: Instance, event: Event, registry: Registry, command: AuditEntry | None
) -> Instance:
    manifest, now = _advancing(state, event)
    if event.step not in manifest.targets(now.state):
        raise reject(event, f"{now.state} -> {event.step} is not an edge of {state.definition}")
    used = now.transitions + 1
    if used > manifest.max_transitions:
        raise reject(
            event,
            f"{event.step} would be transition {used}; max_transitions is "
            f"{manifest.max_transitions}",
        )
    _check_fields(event, manifest)
    return evolve(state, machine=MachineProgress(event.step, event.data, used))


def fail_advance(
    state: Instance, event: Event, registry: Registry, command: AuditEntry | None
) -> Instance:
    manifest, now = _advancing(state, event)
    _require_current(event, now)
    last = event.attempt == manifest.max_attempts
    if last and event.due_at is not None:
        raise reject(event, f"attempt {event.attempt} is the last; no retry can be due")
    if not last and event.due_at is None:
        raise reject(event, f"attempt {event.attempt} of {manifest.max_attempts} needs due_at")
    failed = evolve(now, attempts=event.attempt, retry_at=event.due_at, code=event.code)
    return evolve(state, machine=failed)


def schedule_timer(
    state: Instance, event: Event, registry: Registry, command: AuditEntry | None
) -> Instance:
    manifest, now = _live(state, event)
    _require_current(event, now)
    seconds = manifest.timer(now.state)
    if seconds is None:
        raise reject(event, f"{now.state} is not a timer state")
    if now.timer_due_at is not None:
        raise reject(event, f"the timer of {now.state} is already scheduled")
    if event.due_at != event.occurred_at + timedelta(seconds=seconds):
        raise reject(event, f"due_at must be the time plus the {seconds} s of {now.state}")
    return evolve(state, machine=evolve(now, timer_due_at=event.due_at))


def fire_timer(
    state: Instance, event: Event, registry: Registry, command: AuditEntry | None
) -> Instance:
    _, now = _live(state, event)
    _require_current(event, now)
    if now.timer_due_at is None:
        raise reject(event, f"the timer of {now.state} was never scheduled")
    if now.timer_fired_at is not None:
        raise reject(event, f"the timer of {now.state} already fired")
    if event.occurred_at < now.timer_due_at:
        raise reject(event, f"the timer of {now.state} fires before it is due")
    return evolve(state, machine=evolve(now, timer_fired_at=event.occurred_at))


def complete(
    state: Instance, event: Event, registry: Registry, command: AuditEntry | None
) -> Instance:
    """A machine completes only once it entered a terminal state."""
    now = progress_of(state)
    if not manifest_of(state).is_terminal(now.state):
        raise reject(event, f"a machine completes only in a terminal state, not in {now.state}")
    return lifecycle(state, event, registry, command)


def compensated(
    state: Instance, event: Event, registry: Registry, command: AuditEntry | None
) -> Instance:
    """The declared compensation committed after a cancellation (its text is the data);
    ``cancelled`` follows in the same transition."""
    require_status(state, event, InstanceStatus.CANCELLING)
    if manifest_of(state).compensation is None:
        raise reject(event, f"{state.definition} declares no compensation")
    _require_current(event, progress_of(state))
    return state


def _live(state: Instance, event: Event) -> tuple[MachineManifest, MachineProgress]:
    """The manifest and progress of a running machine that is not in a terminal state."""
    require_status(state, event, InstanceStatus.RUNNING)
    manifest, now = manifest_of(state), progress_of(state)
    if manifest.is_terminal(now.state):
        raise reject(event, f"{now.state} is terminal: the machine takes no more steps")
    return manifest, now


def _advancing(state: Instance, event: Event) -> tuple[MachineManifest, MachineProgress]:
    """``_live``, for an advance attempt: the next one, due, and after a timer fired."""
    manifest, now = _live(state, event)
    if now.attempts >= manifest.max_attempts:
        raise reject(event, f"the {manifest.max_attempts} attempts of {now.state} are used up")
    if event.attempt != now.attempts + 1:
        raise reject(event, f"the next attempt of {now.state} is {now.attempts + 1}")
    if now.retry_at is not None and event.occurred_at < now.retry_at:
        raise reject(event, f"attempt {event.attempt} of {now.state} is not due yet")
    if manifest.timer(now.state) is not None and now.timer_fired_at is None:
        raise reject(event, f"{now.state} advances only after its timer fired")
    return manifest, now


def _require_current(event: Event, now: MachineProgress) -> None:
    if event.step != now.state:
        raise reject(
            event, f"{event.kind.label} names {event.step} but the machine is in {now.state}"
        )


def _check_fields(event: Event, manifest: MachineManifest) -> None:
    """The entered state's data holds exactly its variant's fields, each of its type."""
    variant = manifest.variant(event.step)
    assert variant is not None  # an edge leads only to a variant (validation)
    size = 0 if event.data is None else len(event.data.encode())
    if size > MAX_STATE_BYTES:
        raise reject(event, f"state {event.step} is {size} bytes; at most {MAX_STATE_BYTES}")
    declared = dict(variant.fields)
    if not declared and event.data is not None:
        raise reject(event, f"state {event.step} has no fields, so no data")
    values = json.loads(event.data) if event.data is not None else {}
    if set(values) != set(declared):
        names = ", ".join(declared) or "no fields"
        raise reject(event, f"state {event.step} must have {names}, not {', '.join(values)}")
    for name, kind in declared.items():
        if problem := value_problem(kind, values[name]):
            raise reject(event, f"state {event.step} field {name} {problem}")


RULES: dict[EventKind, FoldRule] = {
    K.STATE_ENTERED: enter_state,
    K.ADVANCE_FAILED: fail_advance,
    K.TIMER_SCHEDULED: schedule_timer,
    K.TIMER_FIRED: fire_timer,
    K.COMPLETED: complete,
    K.COMPENSATION_SUCCEEDED: compensated,
}
