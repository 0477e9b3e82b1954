"""What each step of a replayed instance is doing, as the graph and the steps table show it.

Every step gets one state, which becomes its node's class (``state-<state>``) and a
short note for its title: scheduled, running, succeeded, failed, unknown (the outcome
of an attempt is in doubt), retry-waiting, compensating, compensated,
compensation-failed, compensation-unknown, resolved (settled by an operator),
waiting-signal, waiting-timer, waiting-approval, waiting (a join, race or child),
cancelled (a wait that never will happen: a race branch that lost, a timer of an
instance that ended), pending (not reached yet) or not-reached (the instance ended or
is unwinding before it got there). An instance that moves no further has no pending
step: each says why it never happened (``engine.model.description``).

Progress comes from the replayed state only. Which waits are *current* follows the
orchestration walk (top-level steps in definition order; the first one not done is
where the instance stands, a fork together with its branches): a signal step nobody
has signalled is "waiting" only there, and "pending" before the instance reaches it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from engine.decide.operator_actions import Action
from engine.model.definitions import Step, StepKind
from engine.model.description import ending, lost_race, never_happens
from engine.model.fan_out import FanOut
from engine.model.identifiers import local_instance_id
from engine.model.instance import (
    AttemptProgress,
    AttemptStatus,
    ChildStatus,
    Instance,
    InstanceStatus,
    SignalProgress,
)
from engine.modes.steps import step_kinds
from studio.formats import format_when

A = AttemptStatus
ADVANCING = frozenset({InstanceStatus.RUNNING, InstanceStatus.PAUSED})
ACTIVITY_STATES = {
    A.READY: "scheduled",
    A.RUNNING: "running",
    A.SUCCEEDED: "succeeded",
    A.FAILED: "failed",
    A.UNKNOWN: "unknown",
    A.RETRY_WAITING: "retry-waiting",
    A.MANUALLY_RESOLVED: "resolved",
}
COMPENSATION_STATES = {
    A.READY: "compensating",
    A.RUNNING: "compensating",
    A.RETRY_WAITING: "compensating",
    A.SUCCEEDED: "compensated",
    A.MANUALLY_RESOLVED: "compensated",
    A.FAILED: "compensation-failed",
    A.UNKNOWN: "compensation-unknown",
}
CHILD_STATES = {
    ChildStatus.SCHEDULED: "scheduled",
    ChildStatus.START_RUNNING: "running",
    ChildStatus.ACTIVE: "running",
    ChildStatus.START_FAILED: "failed",
    ChildStatus.START_UNKNOWN: "unknown",
    ChildStatus.RETRY_WAITING: "retry-waiting",
    ChildStatus.SUCCEEDED: "succeeded",
    ChildStatus.FAILED: "failed",
}
WAITS = {
    StepKind.SIGNAL: "waiting-signal",
    StepKind.APPROVAL: "waiting-approval",
    StepKind.TIMER: "waiting-timer",
}
STATES = (
    "pending", "scheduled", "running", "succeeded", "failed", "unknown", "retry-waiting",
    "compensating", "compensated", "compensation-failed", "compensation-unknown", "resolved",
    "waiting-signal", "waiting-timer", "waiting-approval", "waiting", "cancelled",
    "not-reached",
)  # fmt: skip
"""Every state, in the order the legend lists them."""


@dataclass(frozen=True)
class StepState:
    """A step's state for the graph and the table: one of ``STATES`` (its CSS class) and
    a note saying what it waits for or how it ended; a child step's also names its child
    (by the stored id, which only ``described`` turns into the one a team knows)."""

    state: str
    note: str
    child_id: str = ""

    @property
    def css(self) -> str:
        return f"state-{self.state}"

    def described(self, team: str) -> str:
        """The note in words for ``team``: its own instance ids, never their stored form."""
        if not self.child_id:
            return self.note
        return f"child {local_instance_id(team, self.child_id)}: {self.note}"


PENDING = StepState("pending", "not reached")


def step_states(instance: Instance) -> dict[str, StepState]:
    """The state of every step of the instance's pinned definition, by step name."""
    spec = instance.spec
    if spec is None:
        return {}
    current = frontier(instance)
    return {step.name: _state_of(instance, step, step.name in current) for step in spec.steps}


def frontier(instance: Instance) -> set[str]:
    """The steps the instance is at: the first top-level step not done (a fork with its
    branches). Empty once it has ended or while it unwinds."""
    spec = instance.spec
    if spec is None or instance.status not in ADVANCING:
        return set()
    for step in spec.steps:
        if step.name in spec.owners or _done(instance, step):
            continue
        if step.kind in (StepKind.PARALLEL, StepKind.RACE):
            return {step.name, *step.branches}
        return {step.name}
    return set()


def _succeeded(progress: AttemptProgress | None) -> bool:
    return progress is not None and progress.status is A.SUCCEEDED


def _done(instance: Instance, step: Step) -> bool:
    kind = step.kind
    if kind is StepKind.ACTIVITY:
        return _succeeded(instance.activities.get(step.name))
    if kind is StepKind.TIMER:
        timer = instance.timers.get(step.name)
        return timer is not None and timer.fired_at is not None
    if kind in (StepKind.SIGNAL, StepKind.APPROVAL):
        return step.name in instance.signals
    if kind is StepKind.CHILD:
        child = instance.children.get(step.name)
        return child is not None and child.status is ChildStatus.SUCCEEDED
    if kind is StepKind.PARALLEL:
        return all(b in instance.activities for b in step.branches)
    if kind is StepKind.JOIN:
        return all(_succeeded(instance.activities.get(b)) for b in step.branches)
    return step.name in instance.race_winners  # a race


def _state_of(instance: Instance, step: Step, current: bool) -> StepState:
    lost = lost_race(instance, step.name)
    if lost:
        return StepState("cancelled", lost)
    state = _BY_KIND[step.kind](instance, step, current)
    ended = ending(instance)
    return StepState("not-reached", ended) if ended and state.state == "pending" else state


def _activity(instance: Instance, step: Step, current: bool) -> StepState:
    progress = instance.activities.get(step.name)
    if progress is None:
        return PENDING
    compensation = instance.compensations.get(step.name)
    if compensation is not None:
        state = COMPENSATION_STATES[compensation.status]
        return StepState(state, f"compensation {compensation.status.label}")
    return StepState(ACTIVITY_STATES[progress.status], _attempt_note(progress))


def _attempt_note(progress: AttemptProgress) -> str:
    if not progress.attempt:
        return "waiting for a worker to start it"
    attempt = f"attempt {progress.attempt}"
    if progress.status is A.UNKNOWN:
        return f"{attempt}: outcome unknown, needs an operator or a retry"
    if progress.status is A.RETRY_WAITING:
        return f"{attempt} {progress.code or 'failed'}; next at {format_when(progress.retry_at)}"
    if progress.status is A.FAILED:
        return f"{attempt} failed: {progress.code}"
    return f"{attempt} {progress.status.label}"


def _timer(instance: Instance, step: Step, current: bool) -> StepState:
    timer = instance.timers.get(step.name)
    if timer is None:
        return PENDING
    if timer.fired_at is not None:
        return StepState("succeeded", f"fired at {format_when(timer.fired_at)}")
    reason = never_happens(instance, step.name)
    if reason:
        return StepState("cancelled", f"{reason}; was due at {format_when(timer.due_at)}")
    return StepState("waiting-timer", f"due at {format_when(timer.due_at)}")


def _signal(instance: Instance, step: Step, current: bool) -> StepState:
    received = instance.signals.get(step.name)
    if received is not None:
        return StepState("succeeded", _received(instance, received))
    if current:
        return StepState(WAITS[step.kind], f"waiting for {step.kind.value}")
    return PENDING


PERSON_SAID = {Action.APPROVE: "approved", Action.SIGNAL: "sent"}
"""The audited commands by which a person fills a signal or approval step, and the verb
its note says them with."""


def _received(instance: Instance, received: SignalProgress) -> str:
    """Who approved or sent it and when (the audited command, whose id keys the signal,
    is in the audit trail): its id alone meant nothing to a reader. A signal a system
    sent says its id."""
    command = next(
        (
            a
            for a in instance.audit
            if a.command_id == received.signal_id and a.action in PERSON_SAID
        ),
        None,
    )
    if command is None:
        return f"received {received.signal_id}"
    said = PERSON_SAID[Action(command.action)]
    return f"{said} by {command.actor} {format_when(command.occurred_at)}"


def _child(instance: Instance, step: Step, current: bool) -> StepState:
    child = instance.children.get(step.name)
    if child is None:
        return PENDING
    if said := FanOut(instance).said(child):
        return StepState("cancelled", said, child.child_id)
    return StepState(CHILD_STATES[child.status], child.status.label, child.child_id)


def _parallel(instance: Instance, step: Step, current: bool) -> StepState:
    branches = [instance.activities.get(b) for b in step.branches]
    done = sum(_succeeded(p) for p in branches)
    if done == len(branches):
        return StepState("succeeded", f"all {done} branches succeeded")
    if any(p is not None for p in branches):
        return StepState("running", f"{done} of {len(branches)} branches succeeded")
    return PENDING


def _join(instance: Instance, step: Step, current: bool) -> StepState:
    done = sum(_succeeded(instance.activities.get(b)) for b in step.branches)
    if done == len(step.branches):
        return StepState("succeeded", "every branch succeeded")
    if current:
        return StepState("waiting", f"{done} of {len(step.branches)} branches succeeded")
    return PENDING


def _race(instance: Instance, step: Step, current: bool) -> StepState:
    winner = instance.race_winners.get(step.name)
    if winner:
        return StepState("succeeded", f"won by {winner}")
    if current:
        return StepState("waiting", "no branch has finished yet")
    return PENDING


_BY_KIND: dict[StepKind, Callable[[Instance, Step, bool], StepState]] = step_kinds.table(
    activity=_activity, timer=_timer, wait=_signal, child=_child,
    parallel=_parallel, join=_join, race=_race,
)  # fmt: skip
