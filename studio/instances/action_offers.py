"""Which operator actions an instance allows right now, and what each would do.

An action is offered only when the engine would accept it: each candidate is judged by
the engine's preview (``engine.decide.previews``: the audited command and the decision
that follows, dry-run on a throwaway Draft exactly as ``Client.command`` builds them),
the same judgement a bulk action shows for every instance it selects, so the rules live
in one place, the engine's replay. The preview also says what the command would record,
which attempts run again with which keys, what is compensated in which order and what
becomes of attempts in doubt; the sentences here say what it means for people. Nothing
here touches the store.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from engine.decide.audit import DANGEROUS, LIFECYCLE
from engine.decide.bulk_actions import RESOLUTIONS
from engine.decide.operator_actions import Action
from engine.decide.previews import ActionRequest, Preview, preview
from engine.model.definitions import Step, StepKind
from engine.model.instance import AttemptProgress, AttemptStatus, Instance
from engine.model.registry import Registry
from engine.modes.steps.orchestration import compensable
from studio.drawings import drawing_of

A = AttemptStatus
__all__ = ["KINDS", "RESOLUTIONS", "Offer", "offer", "offers"]
PROBE_EFFECTS: dict[Action, dict[str, Any]] = {
    Action.RESOLVE_COMPENSATION: {"code": "resolved-by-operator"},
}
"""Effect arguments a probe needs where the operator supplies them on confirming (an
unknown outcome is probed once per resolution: ``resolution_previews``)."""
PROBED_RESOLUTION = "failed"
"""The resolution whose preview stands for a ``resolve_activity`` offer as a whole."""


@dataclass(frozen=True)
class ActionKind:
    action: Action
    label: str
    needs_step: bool = False


KINDS = {
    k.action: k
    for k in (
        *(ActionKind(action, label) for action, label in LIFECYCLE.items()),
        ActionKind(Action.RETRY_ACTIVITY, "Retry", needs_step=True),
        ActionKind(Action.RESOLVE_ACTIVITY, "Resolve outcome of", needs_step=True),
        ActionKind(Action.APPROVE, "Approve", needs_step=True),
        ActionKind(Action.COMPENSATE, "Compensate", needs_step=True),
        ActionKind(Action.RESOLVE_COMPENSATION, "Resolve compensation of", needs_step=True),
    )
}
"""What the studio offers (migration between versions is not offered here)."""


@dataclass(frozen=True)
class Offer:
    """An action the instance allows now, with what it would do."""

    action: Action
    step: str
    label: str
    effect: tuple[str, ...]
    preview: Preview
    danger: bool
    resolutions: dict[str, Preview] = field(default_factory=dict)
    """For ``resolve_activity``: what settling the outcome each way the engine would
    accept does (``preview`` is the one settled as failed: ``PROBED_RESOLUTION``)."""

    @property
    def records(self) -> tuple[str, ...]:
        """The events the command would record, e.g. ``compensation_scheduled charge``."""
        return self.preview.records

    @property
    def key(self) -> str:
        """``action`` or ``action:step``: how forms and tests name an offer."""
        return f"{self.action.value}:{self.step}" if self.step else self.action.value


def offers(instance: Instance, registry: Registry, now: datetime) -> list[Offer]:
    """Every action the instance allows at ``now``, lifecycle actions first."""
    found = []
    for action, step in candidates(instance):
        made = offer(instance, registry, now, action, step)
        if made is not None:
            found.append(made)
    return found


def offer(
    instance: Instance, registry: Registry, now: datetime, action: Action, step: str = ""
) -> Offer | None:
    """The offer of ``action`` (on ``step``), or None when the engine would refuse it."""
    kind = KINDS.get(action)
    if kind is None or kind.needs_step != bool(step):
        return None
    choices = {}
    if action is Action.RESOLVE_ACTIVITY:
        choices = resolution_previews(instance, registry, now, step)
        judged = choices.get(PROBED_RESOLUTION)
    else:
        request = ActionRequest(action, step, PROBE_EFFECTS.get(action, {}))
        judged = preview(instance, registry, now, request)
    if judged is None or not judged.applies:
        return None
    label = f"{kind.label} {step}" if step else kind.label
    effect = describe(instance, action, step)
    return Offer(action, step, label, effect, judged, action in DANGEROUS, choices)


def resolution_previews(
    instance: Instance, registry: Registry, now: datetime, step: str
) -> dict[str, Preview]:
    """What settling ``step``'s unknown outcome would do, for each resolution the engine
    would accept (the one settled as ``PROBED_RESOLUTION`` stands for the offer)."""
    found = {}
    for resolution in RESOLUTIONS:
        request = ActionRequest(Action.RESOLVE_ACTIVITY, step, {"resolution": resolution})
        judged = preview(instance, registry, now, request)
        if judged.applies:
            found[resolution] = judged
    return found


def candidates(instance: Instance) -> list[tuple[Action, str]]:
    """Actions worth probing: lifecycle ones, and step actions where progress suggests."""
    spec = instance.spec
    if spec is None or instance.status.terminal:
        return []
    found: list[tuple[Action, str]] = [(a, "") for a in LIFECYCLE]
    to_compensate = {progress.step for progress, _ in compensation_order(instance)}
    for progress in instance.activities.values():
        if progress.status in (A.FAILED, A.UNKNOWN):
            found.append((Action.RETRY_ACTIVITY, progress.step))
        if progress.status is A.UNKNOWN:
            found.append((Action.RESOLVE_ACTIVITY, progress.step))
        if progress.step in to_compensate:
            found.append((Action.COMPENSATE, progress.step))
    for progress in instance.compensations.values():
        if progress.status in (A.FAILED, A.UNKNOWN):
            found.append((Action.RESOLVE_COMPENSATION, progress.step))
    for step in spec.steps:
        if step.kind is StepKind.APPROVAL and step.name not in instance.signals:
            found.append((Action.APPROVE, step.name))
    return found


def compensation_order(instance: Instance) -> list[tuple[AttemptProgress, Step]]:
    """Succeeded activities still to compensate, in the order unwinding would run them
    (latest completion first), each with its step."""
    return [
        (progress, instance.step(progress.step))
        for progress in compensable(instance)
        if progress.step not in instance.compensations
    ]


def describe(instance: Instance, action: Action, step: str = "") -> tuple[str, ...]:
    """What ``action`` means for this instance, in sentences, before anyone confirms."""
    return tuple(_DESCRIBERS[action](instance, step))


def _in_flight(instance: Instance) -> list[str]:
    return [
        f"{p.step} (attempt {p.attempt})"
        for p in instance.activities.values()
        if p.status is A.RUNNING
    ]


def _waits(instance: Instance) -> list[str]:
    spec = instance.spec
    assert spec is not None
    current = drawing_of(spec).frontier(instance)
    names = []
    for step in spec.steps:
        if step.name not in current:
            continue
        if step.kind in (StepKind.SIGNAL, StepKind.APPROVAL) and step.name not in instance.signals:
            names.append(f"{step.name} ({step.kind.value})")
        elif step.kind is StepKind.TIMER:
            timer = instance.timers.get(step.name)
            if timer is not None and timer.fired_at is None:
                names.append(f"{step.name} (timer)")
    return names


def _pause(instance: Instance, step: str) -> list[str]:
    lines = [
        "No new work starts while the instance is paused: due attempts and timers wait, "
        "signals are still accepted and kept.",
    ]
    running = _in_flight(instance)
    if running:
        lines.append(f"Already running, and will finish and record their outcome: "
                     f"{', '.join(running)}.")  # fmt: skip
    lines.append("Resume continues from here.")
    return lines


def _resume(instance: Instance, step: str) -> list[str]:
    return ["The instance continues where it stopped; work that waited is released at once."]


def _stops(instance: Instance) -> list[str]:
    waits = _waits(instance)
    return [f"Stops waiting for: {', '.join(waits)}."] if waits else []


def _cancel(instance: Instance, step: str) -> list[str]:
    lines = ["Cancels the instance: nothing new is scheduled.", *_stops(instance)]
    running = _in_flight(instance)
    if running:
        lines.append(f"Attempts in flight settle first: {', '.join(running)}.")
    unknown = [p.step for p in instance.activities.values() if p.status is A.UNKNOWN]
    if unknown:
        lines.append(
            f"Outcome unknown for {', '.join(unknown)}: resolve it before it can be compensated."
        )
    order = compensation_order(instance)
    if order:
        steps = ", then ".join(
            f"{p.step} (by {s.compensation.target})"  # type: ignore[union-attr]
            for p, s in order
        )
        lines.append(f"Then compensates, one at a time, latest first: {steps}.")
    else:
        lines.append("Nothing needs compensating.")
    lines.append("It ends as cancelled once every compensation has settled.")
    return lines


def _terminate(instance: Instance, step: str) -> list[str]:
    lines = ["Ends the instance at once as terminated.", *_stops(instance)]
    order = compensation_order(instance)
    if order:
        kept = ", ".join(p.step for p, _ in order)
        lines.append(f"Nothing is compensated: {kept} keep their effects.")
    running = _in_flight(instance)
    if running:
        lines.append(f"Attempts in flight are abandoned; their outcomes are ignored: "
                     f"{', '.join(running)}.")  # fmt: skip
    return lines


def _retry(instance: Instance, step: str) -> list[str]:
    progress = instance.activities[step]
    target = instance.step(step).target  # type: ignore[union-attr]
    lines = [f"Schedules attempt {progress.attempt + 1} of {step} now (target {target})."]
    if progress.status is A.UNKNOWN:
        lines.append(
            f"It reuses the idempotency key {progress.idempotency_key}: the last outcome is "
            "unknown, and a handler that already took effect can recognise the key."
        )
    else:
        lines.append(f"Attempt {progress.attempt} failed with {progress.code or 'an error'}; "
                     "the retry uses a new idempotency key.")  # fmt: skip
    return lines


def _resolve_activity(instance: Instance, step: str) -> list[str]:
    progress = instance.activities[step]
    return [
        f"Attempt {progress.attempt} of {step} (key {progress.idempotency_key}) has an unknown "
        "outcome. You settle it:",
        "succeeded: it took effect; give its result, and the instance continues.",
        "failed: it failed for good; the instance fails and compensates what it completed.",
        "absent: it never took effect; it is retried as the step's retry policy allows.",
    ]


def _approve(instance: Instance, step: str) -> list[str]:
    return [f"Records the approval of {step} (with the payload you give); "
            "the instance continues past it."]  # fmt: skip


def _compensate(instance: Instance, step: str) -> list[str]:
    spec = instance.step(step)  # type: ignore[union-attr]
    target = spec.compensation.target  # type: ignore[union-attr]
    return [
        f"Runs the compensation of {step} now ({target}) with the input the activity had.",
        "The instance itself keeps its status.",
    ]


def _resolve_compensation(instance: Instance, step: str) -> list[str]:
    progress = instance.compensations[step]
    return [
        f"The compensation of {step} is {progress.status.label} after attempt "
        f"{progress.attempt}. You mark it settled by hand, with a code and the evidence.",
        "Unwinding then goes on with the next compensation.",
    ]


_DESCRIBERS = {
    Action.PAUSE: _pause,
    Action.RESUME: _resume,
    Action.CANCEL: _cancel,
    Action.TERMINATE: _terminate,
    Action.RETRY_ACTIVITY: _retry,
    Action.RESOLVE_ACTIVITY: _resolve_activity,
    Action.APPROVE: _approve,
    Action.COMPENSATE: _compensate,
    Action.RESOLVE_COMPENSATION: _resolve_compensation,
}
