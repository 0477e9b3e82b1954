"""Replay of lifecycle events: start, pause, cancel, complete, fail, migrate, ...

Every definition mode shares these rules; a mode's own events have its own
(``engine.modes``).

The legal edges (the lifecycle table in the README) are the keys of LIFECYCLE_EDGES.
Ending a cancellation or a failure requires every compensation to have settled and no
activity or compensation attempt to be in flight, so an effect can never land after
the instance says it is over.
"""

from __future__ import annotations

from engine.model.errors import RegistryError
from engine.model.events import Event, EventKind
from engine.model.frozen import evolve
from engine.model.instance import AttemptStatus, Instance, InstanceStatus
from engine.model.registry import Registry
from engine.replay.rules import reject

S = InstanceStatus
K = EventKind

LIFECYCLE_EDGES: dict[EventKind, tuple[frozenset[InstanceStatus], InstanceStatus | None]] = {
    K.PAUSED: (frozenset({S.RUNNING}), S.PAUSED),
    K.RESUMED: (frozenset({S.PAUSED}), S.RUNNING),
    K.CANCELLATION_REQUESTED: (frozenset({S.RUNNING, S.PAUSED}), S.CANCELLING),
    K.CANCELLED: (frozenset({S.CANCELLING}), S.CANCELLED),
    K.COMPLETED: (frozenset({S.RUNNING}), S.COMPLETED),
    K.FAILED: (frozenset({S.RUNNING, S.FAILING}), S.FAILED),
    K.TERMINATED: (frozenset({S.RUNNING, S.PAUSED, S.CANCELLING, S.FAILING}), S.TERMINATED),
    K.DEFINITION_MIGRATED: (frozenset({S.PAUSED}), None),
    K.CONTINUED_AS_NEW: (frozenset({S.RUNNING}), S.CONTINUED_AS_NEW),
    K.INSTANCE_FAILING: (frozenset({S.RUNNING}), S.FAILING),
}
"""event kind -> (statuses it may follow, status it leads to; None keeps the status)."""

SETTLED = frozenset({AttemptStatus.SUCCEEDED, AttemptStatus.MANUALLY_RESOLVED})


def lifecycle(state: Instance, event: Event, registry: Registry, command: object) -> Instance:
    allowed, target = LIFECYCLE_EDGES[event.kind]
    if state.status not in allowed:
        raise reject(event, f"{event.kind.label} is not allowed while {state.status.label}")
    if event.kind in (K.CANCELLED, K.FAILED) and state.status in (S.CANCELLING, S.FAILING):
        _require_unwound(state, event)
    new = evolve(state, status=target or state.status)
    if event.kind is K.COMPLETED:
        return evolve(new, result=event.data)
    if event.kind in (K.FAILED, K.INSTANCE_FAILING):
        return evolve(new, failure_code=event.code, failure_step=event.step, result=event.data)
    if event.kind is K.DEFINITION_MIGRATED:
        return _migrate(new, event, registry)
    if event.kind is K.CONTINUED_AS_NEW:
        _resolve(event, registry)
        return evolve(new, successor_id=event.successor_id, result=event.data)
    return new


def _require_unwound(state: Instance, event: Event) -> None:
    for progress in state.compensations.values():
        if progress.status not in SETTLED:
            raise reject(
                event,
                f"compensation of {progress.step!r} has not settled ({progress.status.label})",
            )
    for progress in state.activities.values():
        if progress.status is AttemptStatus.RUNNING:
            raise reject(event, f"activity {progress.step!r} still has an attempt in flight")


def _migrate(state: Instance, event: Event, registry: Registry) -> Instance:
    target = event.definition
    assert target is not None
    if target.name != state.definition.name:
        raise reject(event, "a migration must keep the definition name")
    try:
        registry.migration(target.name, state.definition.version, target.version)
    except RegistryError as exc:
        raise reject(event, str(exc)) from None
    spec = _resolve(event, registry)
    return evolve(state, definition=target, spec=spec, input=event.data)


def _resolve(event: Event, registry: Registry):
    assert event.definition is not None
    try:
        return registry.resolve(event.definition)
    except RegistryError as exc:
        raise reject(event, str(exc)) from None


RULES = dict.fromkeys(LIFECYCLE_EDGES, lifecycle)
