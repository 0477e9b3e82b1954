"""What an instance has done, in words: ``wayline inspect`` and the studio's pages.

A timer, signal or approval that has not happened is either still ahead, or it never
will: its race was won by another branch (the engine cancels the losers' timers) or
the instance has ended or is unwinding. Calling the latter "pending" would be false,
so every description asks ``never_happens`` before it says a wait is still open.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from engine.model.canonical import format_instant
from engine.model.definitions import StepKind
from engine.model.events import Event, EventKind
from engine.model.instance import AttemptStatus as A
from engine.model.instance import (
    ChildProgress,
    ChildStatus,
    Instance,
    InstanceStatus,
    TimerProgress,
    WaitProgress,
)

S = InstanceStatus
K = EventKind
ATTEMPT_ENDINGS = {
    K.ATTEMPT_SUCCEEDED: "succeeded",
    K.ATTEMPT_FAILED: "failed",
    K.ATTEMPT_UNKNOWN: "unknown",
    K.ACTIVITY_RESOLVED: "resolved",
}
"""How an activity's attempt ended, by the event that says so: what an earlier
attempt's line reads (the replayed instance keeps only each step's latest attempt)."""
ENDINGS = {
    S.COMPLETED: "the instance completed",
    S.FAILED: "the instance failed",
    S.CANCELLED: "the instance was cancelled",
    S.TERMINATED: "the instance was terminated",
    S.CONTINUED_AS_NEW: "the instance continued as new",
    S.CANCELLING: "the instance is being cancelled",
    S.FAILING: "the instance is failing",
}
"""Why nothing more happens, by status: every status but running and paused."""


def lost_race(instance: Instance, step: str) -> str:
    """Why a race branch will not happen ('' unless it is a branch of a race another
    branch won)."""
    spec = instance.spec
    owner = spec.owners.get(step) if spec is not None else None
    if owner is None or spec.step(owner).kind is not StepKind.RACE:  # type: ignore[union-attr]
        return ""
    winner = instance.race_winners.get(owner)
    return f"race {owner} was won by {winner}" if winner and winner != step else ""


def ending(instance: Instance) -> str:
    """Why the instance moves no further ('' while it is running or paused)."""
    return ENDINGS.get(instance.status, "")


def never_happens(instance: Instance, step: str) -> str:
    """Why a wait that has not happened never will ('' while it still may)."""
    return lost_race(instance, step) or ending(instance)


AWAITED = frozenset(
    {
        ChildStatus.SCHEDULED,
        ChildStatus.START_RUNNING,
        ChildStatus.ACTIVE,
        ChildStatus.START_UNKNOWN,
        ChildStatus.RETRY_WAITING,
    }
)
"""A child's states in which its parent still awaits it (its start or its outcome)."""


def unawaited_child(instance: Instance, child: ChildProgress) -> str:
    """Why ``instance`` no longer awaits ``child`` ('' while it does, or once the child's
    outcome is recorded). A child's end is reported to its parent only while the parent
    has not ended (``engine.decide.child_outcomes``), so an ended parent's child keeps the
    state it had then; the child's own history says how it ended."""
    if child.status in AWAITED and instance.status.terminal:
        return f"no longer awaited ({ending(instance)})"
    return ""


def _timer_outcome(instance: Instance, timer: TimerProgress) -> str:
    if timer.fired_at is not None:
        return f"fired {format_instant(timer.fired_at)}"
    reason = never_happens(instance, timer.step)
    return f"cancelled ({reason})" if reason else "pending"


def _wait_outcome(instance: Instance, wait: WaitProgress) -> str:
    """A code-first run's wait: done, open, or cancelled with why once the run has
    ended or unwinds (it will never resume from it), as a timer's line says."""
    if wait.done:
        return "done"
    reason = ending(instance)
    return f"cancelled ({reason})" if reason else "open"


def _earlier(event: Event) -> str:
    code = f" code={event.code}" if event.code else ""
    said = _said(event.data)
    return f"    attempt {event.attempt}: {ATTEMPT_ENDINGS[event.kind]}{code}{said}"


def failure_message(state: Instance) -> str:
    """The message the failure recorded ('' when none): a code workflow's own exception
    (``TypeError: ...``), shown with the failure so its reason is read where it is."""
    detail = state.value("result") if state.failure_code else None
    return recorded_message(detail)


def recorded_message(detail: Any) -> str:
    """The ``message`` of a recorded detail (a failed attempt's ``{"message": ...}``, a
    code workflow's exception), '' when it has none."""
    message = detail.get("message") if isinstance(detail, dict) else None
    return message if isinstance(message, str) else ""


def _said(data: str | None) -> str:
    """``: MESSAGE`` for an ended attempt whose recorded detail (JSON text) carries one."""
    if data is None or not data.startswith("{"):
        return ""
    message = recorded_message(json.loads(data))
    return f": {message}" if message else ""


def failure_line(state: Instance) -> str:
    """``failure STEP: CODE: MESSAGE`` of a failed instance: the message its failure
    recorded, else the one its failed activity's last attempt recorded (the
    ``ActivityFailure``'s), so the line says why wherever it is read."""
    message = failure_message(state)
    failed = state.activities.get(state.failure_step)
    if not message and failed is not None and failed.status is A.FAILED:
        message = _said(failed.result).removeprefix(": ")
    return f"failure {state.failure_step}: {state.failure_code}{': ' if message else ''}{message}"


def describe_instance(state: Instance, earlier: Mapping[str, Sequence[Event]] | None = None) -> str:
    """A human summary: status, pin, who started it, per-step progress, attempts, audit
    trail.
    ``earlier``: by step, the events that ended its attempts before the latest (from
    its history, ``ATTEMPT_ENDINGS``), each said under the step's line."""
    lines = [
        f"instance {state.instance_id}: {state.status.label}",
        f"definition {state.definition} {state.definition.fingerprint}",
        f"position {state.sequence}, updated {format_instant(state.updated_at)}",
    ]
    if state.started_by:
        lines.append(f"started {format_instant(state.started_at)} by {state.started_by}")
    if state.failure_code:
        lines.append(failure_line(state))
    for p in state.activities.values():
        extra = f" code={p.code}" if p.code else ""
        if p.status in (A.FAILED, A.UNKNOWN):
            extra += _said(p.result)
        lines.append(
            f"  activity {p.step}: {p.status.label} attempt {p.attempt} "
            f"key={p.idempotency_key or '-'}{extra}"
        )
        ended = (earlier or {}).get(p.step, ())
        lines += [_earlier(e) for e in ended if e.attempt < p.attempt]
    for p in state.compensations.values():
        lines.append(f"  compensation {p.step}: {p.status.label} attempt {p.attempt}")
    for t in state.timers.values():
        lines.append(f"  timer {t.step}: due {format_instant(t.due_at)} {_timer_outcome(state, t)}")
    for s in state.signals.values():
        lines.append(f"  signal {s.step}: received {s.signal_id}")
    for c in state.children.values():
        said = unawaited_child(state, c) or c.status.label
        lines.append(f"  child {c.step}: {said} instance {c.child_id}")
    for race, winner in state.race_winners.items():
        lines.append(f"  race {race}: won by {winner}")
    if (m := state.machine) is not None:
        fields = f" {m.data}" if m.data else ""
        lines.append(
            f"  machine state {m.state}{fields}: transition {m.transitions}, "
            f"failed attempts {m.attempts}"
        )
    for r in state.journal:
        lines.append(f"  journal {r.position} {r.verb} {r.key} (event {r.sequence})")
    for w in state.waits.values():
        lines.append(f"  wait {w.key}: {_wait_outcome(state, w)} on {', '.join(w.on)}")
    for s in state.inbox:
        left = "set aside" if state.status.terminal else "not taken yet"
        taken = f"taken by {s.consumed_by}" if s.consumed_by else left
        lines.append(f"  inbox {s.name} {s.signal_id}: {taken}")
    for a in state.audit:
        lines.append(
            f"  audit {format_instant(a.occurred_at)} {a.actor} {a.action}: "
            f"{a.reason} ({a.command_id})"
        )
    return "\n".join(lines)
