"""What an instance has done, in words: ``wayline inspect`` and the studio's pages.

A timer, signal or approval that has not happened is either still ahead, or it never
will: its race was won by another branch (the engine cancels the losers' timers) or
the instance has ended or is unwinding. Calling the latter "pending" would be false,
so every description asks ``never_happens`` before it says a wait is still open.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.model.canonical import format_instant
from engine.model.definitions import StepKind
from engine.model.endings import ending
from engine.model.events import Event, EventKind
from engine.model.fan_out import FanOut
from engine.model.instance import AttemptStatus as A
from engine.model.instance import Instance, InstanceStatus, TimerProgress, WaitProgress
from engine.model.transitions import WorkKind

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


def lost_race(instance: Instance, step: str) -> str:
    """Why a race branch will not happen ('' unless it is a branch of a race another
    branch won)."""
    spec = instance.spec
    owner = spec.owners.get(step) if spec is not None else None
    if owner is None or spec.step(owner).kind is not StepKind.RACE:  # type: ignore[union-attr]
        return ""
    winner = instance.race_winners.get(owner)
    return f"race {owner} was won by {winner}" if winner and winner != step else ""


def never_happens(instance: Instance, step: str) -> str:
    """Why a wait that has not happened never will ('' while it still may)."""
    return lost_race(instance, step) or ending(instance)


IN_FLIGHT_POSITIONS = frozenset({S.RUNNING, S.CANCELLING, S.FAILING})
"""The statuses whose decision waits on an attempt in flight (a paused instance's
position is its pause, an ended one's its end)."""
TRACKS = {WorkKind.ACTIVITY: "activity", WorkKind.COMPENSATION: "compensation"}
"""The track of an attempt, by the kind of work that carries it."""


@dataclass(frozen=True)
class HeldStarts:
    """Attempts recorded started that no handler has run: eager dispatch started each in
    the statement that recorded the step before it, and an incident hold parked its work
    before any worker leased it (token 0; ``engine.worker.processors.StartOrSettle``
    runs it under its own key once the hold is released). Replay says such an attempt
    is running, since history records its start; while the hold keeps it, it waits for
    the release and has not run, and ``wayline inspect`` and the studio say so."""

    attempts: Mapping[tuple[str, str], int] = field(default_factory=dict)
    """By (track, step): the attempt recorded started and parked unleased."""
    holds: tuple[str, ...] = ()
    """What each hold that parks the instance covers (``HoldScope.label``)."""

    def __bool__(self) -> bool:
        return bool(self.attempts)

    @property
    def waiting(self) -> str:
        """``waiting for the hold on NAME: not run yet`` (what an attempt's line says)."""
        if not self.holds:  # released between the reads: its work is due again
            return "waiting for an incident hold's release: not run yet"
        what = "the holds" if len(self.holds) > 1 else "the hold"
        return f"waiting for {what} on {' and '.join(self.holds)}: not run yet"

    def of(self, track: str, step: str, attempt: int = 0) -> str:
        """The words for the step's attempt (``attempt``, when given) if it is held so,
        else ''."""
        held = self.attempts.get((track, step))
        return self.waiting if held is not None and attempt in (0, held) else ""

    def position(self, state: Instance) -> str:
        """Where ``state`` stands while the hold keeps these attempts: ``activity ship
        attempt 1 is recorded started, waiting for the hold on NAME: not run yet``, in
        place of the decision's ``activity ship is running``. '' with none, and when
        its position is not an attempt in flight (paused, ended)."""
        if state.status not in IN_FLIGHT_POSITIONS:
            return ""
        said = [
            f"{'compensation of' if track == 'compensation' else 'activity'} {step}"
            f" attempt {attempt}"
            for (track, step), attempt in self.attempts.items()
        ]
        if not said:
            return ""
        verb = "are" if len(said) > 1 else "is"
        return f"{' and '.join(said)} {verb} recorded started, {self.waiting}"


def held_starts(
    state: Instance, parked: Iterable[tuple[WorkKind | int, str, int]], holds: Sequence[str] = ()
) -> HeldStarts:
    """Of the attempts whose work an incident hold ``parked`` before any worker leased it
    (kind, step, attempt), those the instance records started and not ended."""
    found = {}
    for kind, step, attempt in parked:
        track = TRACKS.get(kind)  # type: ignore[call-overload]
        if track is None:
            continue
        progress = (state.activities if track == "activity" else state.compensations).get(step)
        if progress is not None and progress.status is A.RUNNING and progress.attempt == attempt:
            found[track, step] = attempt
    return HeldStarts(found, tuple(holds))


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


def _unlisted(instance_id: str, step: str, before: int) -> str:
    """The line that says a step's attempts 1 to ``before`` are not listed under it (only
    its newest earlier ones are), and the command that lists them all."""
    which = "attempt 1 is" if before == 1 else f"attempts 1 to {before} are"
    command = shlex.join(["wayline", "history", instance_id, "--step", step])
    return f"    {which} not listed here: {command} lists them"


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


def describe_instance(
    state: Instance,
    earlier: Mapping[str, Sequence[Event]] | None = None,
    held: HeldStarts | None = None,
    fan_out: FanOut | None = None,
    predecessor: str = "",
) -> str:
    """A human summary: status, pin, who started it, per-step progress, attempts, audit
    trail.
    ``earlier``: by step, the events that ended its attempts before the latest (from
    its history, ``ATTEMPT_ENDINGS``), each said under the step's line, after a line
    naming the attempts before the first of them and the ``wayline history`` command
    that lists them (when only the newest are given). ``held``: the
    attempts recorded started that an incident hold keeps from running, whose lines
    say so rather than "running". ``fan_out``: its children with their own statuses
    (``engine.store.reads.fan_out``), said after a line counting them by outcome;
    without it each child is said from this instance's history alone. ``predecessor``:
    the run this one continues, as ``Queries.predecessor`` reads it ('' for none)."""
    held = held or HeldStarts()
    fan_out = fan_out or FanOut(state)
    lines = [
        f"instance {state.instance_id}: {state.status.label}",
        f"definition {state.definition} {state.definition.fingerprint}",
        f"position {state.sequence}, updated {format_instant(state.updated_at)}",
    ]
    if state.started_by:
        lines.append(f"started {format_instant(state.started_at)} by {state.started_by}")
    if state.parent_id:  # as the studio's page says it: a child is found from its parent
        lines.append(f"parent {state.parent_id} (its step {state.parent_step})")
    if predecessor:  # as the studio's page says them: "Continued from", "Continued as"
        lines.append(f"continued from {predecessor}")
    if state.successor_id:
        lines.append(f"continued as {state.successor_id}")
    if state.failure_code:
        lines.append(failure_line(state))
    for p in state.activities.values():
        extra = f" code={p.code}" if p.code else ""
        if p.status in (A.FAILED, A.UNKNOWN):
            extra += _said(p.result)
        waiting = held.of("activity", p.step)
        status = "held" if waiting else p.status.label
        extra += f" (recorded started, {waiting})" if waiting else ""
        lines.append(
            f"  activity {p.step}: {status} attempt {p.attempt} "
            f"key={p.idempotency_key or '-'}{extra}"
        )
        ended = [e for e in (earlier or {}).get(p.step, ()) if e.attempt < p.attempt]
        if ended and ended[0].attempt > 1:
            lines.append(_unlisted(state.instance_id, p.step, ended[0].attempt - 1))
        lines += [_earlier(e) for e in ended]
    for p in state.compensations.values():
        waiting = held.of("compensation", p.step)
        status = f"held attempt {p.attempt} (recorded started, {waiting})" if waiting else ""
        lines.append(
            f"  compensation {p.step}: {status or f'{p.status.label} attempt {p.attempt}'}"
        )
    for t in state.timers.values():
        lines.append(f"  timer {t.step}: due {format_instant(t.due_at)} {_timer_outcome(state, t)}")
    for s in state.signals.values():
        lines.append(f"  signal {s.step}: received {s.signal_id}")
    if fan_out.children:
        lines.append(f"  {fan_out.summary}")
    for c in fan_out.children:
        lines.append(f"  child {c.step}: {fan_out.line(c)} instance {c.child_id}")
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
