"""Replay of timers, signals, approvals and race winners.

A timer fires once, never early and never while paused. A signal step receives at
most one signal, while running or paused (it is buffered) but never while cancelling,
failing or after the end; an approval step is satisfied only by an audited approve
command. A race winner is the branch completed earliest (signal receive time or timer
fire time), ties broken by definition order, judged on the history before the
``race_won`` event; it never changes once recorded.
"""

from __future__ import annotations

import json
from datetime import datetime

from engine.decide.operator_actions import Action
from engine.model.deferred import with_entry
from engine.model.definitions import Step, StepKind
from engine.model.events import Event, EventKind
from engine.model.frozen import evolve
from engine.model.instance import (
    AuditEntry,
    Instance,
    InstanceStatus,
    SignalProgress,
    TimerProgress,
)
from engine.model.registry import Registry
from engine.replay.rules import (
    reject,
    require_first,
    require_size,
    require_status,
    require_step,
)

K = EventKind
S = InstanceStatus


def schedule_timer(
    state: Instance, event: Event, registry: Registry, command: AuditEntry | None
) -> Instance:
    step = require_first(state, event, StepKind.TIMER, state.timers)
    assert step.timeout is not None
    if event.due_at != event.occurred_at + step.timeout:
        raise reject(event, "timer due_at must be the time plus the timer duration")
    return with_timer(state, event)


def with_timer(state: Instance, event: Event) -> Instance:
    """``state`` with the timer ``event`` schedules, due at the event's ``due_at``: a
    step list's timer step and a code-first run's sleep keep the same progress."""
    assert event.due_at is not None
    progress = TimerProgress(event.step, event.due_at)
    return evolve(state, timers=with_entry(state.timers, event.step, progress))


def fire_timer(
    state: Instance, event: Event, registry: Registry, command: AuditEntry | None
) -> Instance:
    require_status(state, event, S.RUNNING)
    timer = state.timers.get(event.step)
    if timer is None:
        raise reject(event, f"timer {event.step!r} was never scheduled")
    if timer.fired_at is not None:
        raise reject(event, f"timer {event.step!r} already fired")
    if event.occurred_at < timer.due_at:
        raise reject(event, f"timer {event.step!r} fires before it is due")
    fired = evolve(timer, fired_at=event.occurred_at, fired_sequence=event.sequence)
    return evolve(state, timers=with_entry(state.timers, event.step, fired))


def receive_signal(
    state: Instance, event: Event, registry: Registry, command: AuditEntry | None
) -> Instance:
    require_status(state, event, S.RUNNING, S.PAUSED)
    step = require_step(state, event, StepKind.SIGNAL, StepKind.APPROVAL)
    _check_sender(step, event, command)
    if event.step in state.signals:
        raise reject(event, f"{event.step!r} already received a signal")
    require_size(event, step.input_limit, "signal payload")
    progress = SignalProgress(
        event.step, event.idempotency_key, event.occurred_at, event.sequence, event.data
    )
    return evolve(state, signals=with_entry(state.signals, event.step, progress))


def _check_sender(step: Step, event: Event, command: AuditEntry | None) -> None:
    if step.kind is StepKind.APPROVAL:
        if command is None or command.action != Action.APPROVE:
            raise reject(event, f"approval {step.name!r} needs an approve command")
        if event.idempotency_key != command.command_id:
            raise reject(event, "an approval is keyed by its command id")
    elif command is not None:
        if command.action != Action.SIGNAL:
            raise reject(event, f"{step.name!r} is a signal step; approve only answers approvals")
        if event.idempotency_key != command.command_id:
            raise reject(event, "a signal a person sends is keyed by its command id")


def win_race(
    state: Instance, event: Event, registry: Registry, command: AuditEntry | None
) -> Instance:
    race = require_first(state, event, StepKind.RACE, state.race_winners, "already has a winner")
    winner = json.loads(event.data or "null")
    expected = race_winner(state, race)
    if expected is None:
        raise reject(event, f"no branch of race {event.step!r} has completed")
    if winner != expected:
        raise reject(event, f"race {event.step!r} was won by {expected!r}, not {winner!r}")
    return evolve(state, race_winners=with_entry(state.race_winners, event.step, winner))


def race_winner(state: Instance, race: Step) -> str | None:
    """The earliest completed branch (definition order breaks ties), or None."""
    finished: list[tuple[datetime, int, str]] = []
    for order, branch in enumerate(race.branches):
        at = branch_completed_at(state, branch)
        if at is not None:
            finished.append((at, order, branch))
    return min(finished)[2] if finished else None


def branch_completed_at(state: Instance, branch: str) -> datetime | None:
    """When a race branch completed: its signal arrived or its timer fired."""
    if branch in state.signals:
        return state.signals[branch].received_at
    timer = state.timers.get(branch)
    return None if timer is None else timer.fired_at


RULES = {
    K.TIMER_SCHEDULED: schedule_timer,
    K.TIMER_FIRED: fire_timer,
    K.SIGNAL_RECEIVED: receive_signal,
    K.RACE_WON: win_race,
}
