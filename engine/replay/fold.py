"""Deterministic replay: history in, immutable Instance out, as a fold.

``apply(registry, state, event)`` checks one event against the state and the pinned
definition and returns the next state; ``replay`` folds a whole history. Nothing here
runs user code, migration code, or reads a clock. Every rule of the model is enforced
on the way: contiguous sequences of one instance, time never going backwards, a known
definition with a matching fingerprint, legal lifecycle edges, and each operator audit
record immediately followed by its effect.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from engine import modes
from engine.decide.operator_actions import EFFECTS, OPERATOR_ONLY_KINDS, audit_from_event
from engine.model.errors import RegistryError, ReplayRejected
from engine.model.events import Event, EventKind
from engine.model.frozen import evolve
from engine.model.instance import AuditEntry, Instance, InstanceStatus
from engine.model.registry import Registry
from engine.model.words import with_article
from engine.replay.lifecycle import RULES as LIFECYCLE_RULES


def replay(registry: Registry, events: Iterable[Event]) -> Instance:
    """Fold a complete history; reject an empty one or one ending mid-command."""
    state: Instance | None = None
    for event in events:
        state = apply(registry, state, event)
    if state is None:
        raise ReplayRejected(0, "history is empty")
    if state.pending_command is not None:
        raise ReplayRejected(state.sequence, "operator command has no effect after it")
    return state


def apply(registry: Registry, state: Instance | None, event: Event) -> Instance:
    """The state after ``event``; ReplayRejected when the event is not legal here."""
    if state is None:
        return _start(registry, event)
    _check_position(state, event)
    command = state.pending_command
    _check_command_pairing(command, event)
    if event.kind is EventKind.OPERATOR_COMMAND_RECORDED:
        entry = audit_from_event(event)
        return evolve(
            state,
            pending_command=entry,
            audit=(*state.audit, entry),
            sequence=event.sequence,
            updated_at=event.occurred_at,
        )
    rule = _mode_rules(state).get(event.kind) or LIFECYCLE_RULES.get(event.kind)
    if rule is None:
        raise ReplayRejected(event.sequence, _unruled(state, event))
    new = rule(state, event, registry, command)
    return evolve(new, sequence=event.sequence, updated_at=event.occurred_at, pending_command=None)


def _mode_rules(state: Instance) -> Mapping[EventKind, modes.FoldRule]:
    """The fold rules of the instance's definition mode: its own events, and the
    lifecycle events it checks further (a machine completes only in a terminal state)."""
    assert state.spec is not None
    return modes.of(state.spec).fold


def _unruled(state: Instance, event: Event) -> str:
    """Why an event no rule folds is refused: only the first event may start an
    instance, and the other kinds belong to another mode."""
    if event.kind is EventKind.INSTANCE_STARTED:
        return f"{event.kind.label} may only begin a history"
    assert state.spec is not None
    return f"{event.kind.label} is not an event of {with_article(state.spec.mode)} definition"


def _start(registry: Registry, event: Event) -> Instance:
    if event.kind is not EventKind.INSTANCE_STARTED or event.sequence != 1:
        raise ReplayRejected(event.sequence, "history must begin with instance_started at 1")
    assert event.definition is not None
    try:
        spec = registry.resolve(event.definition)
    except RegistryError as exc:
        raise ReplayRejected(1, str(exc)) from None
    return Instance(
        instance_id=event.instance_id,
        status=InstanceStatus.RUNNING,
        definition=event.definition,
        started_at=event.occurred_at,
        updated_at=event.occurred_at,
        sequence=1,
        input=event.data,
        parent_id=event.successor_id,
        parent_step=event.step,
        spec=spec,
        trace_context=event.trace_context,
        started_by=event.started_by,
    )


def _check_position(state: Instance, event: Event) -> None:
    if event.instance_id != state.instance_id:
        raise ReplayRejected(event.sequence, "event belongs to another instance")
    if event.sequence != state.sequence + 1:
        raise ReplayRejected(event.sequence, f"expected sequence {state.sequence + 1}")
    if event.occurred_at < state.updated_at:
        raise ReplayRejected(event.sequence, "time goes backwards")
    if state.status.terminal:
        raise ReplayRejected(event.sequence, f"instance is already {state.status.label}")


def _check_command_pairing(command: AuditEntry | None, event: Event) -> None:
    if command is not None:
        effect = EFFECTS[command.action].kind
        if event.kind is not effect:
            raise ReplayRejected(
                event.sequence,
                f"operator command {command.action!r} must be followed by {effect.label}",
            )
    elif event.kind in OPERATOR_ONLY_KINDS:
        raise ReplayRejected(
            event.sequence, f"{event.kind.label} needs an operator command recorded just before it"
        )
