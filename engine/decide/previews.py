"""What an operator action would do to one instance, before anyone confirms it.

A preview is the action's dry run: the audited command and the decision that follows
it, built on a throwaway Draft from the instance's replayed state exactly as
``Client.command`` builds them, so the rules live in one place (replay) and the
preview cannot promise what the engine would refuse. What it reports is read off that
dry run, never restated per action: the work it creates says which activities run
again and with which idempotency keys, the state after it says what is compensated in
which order and what became of each attempt in doubt. The single-instance confirmation
and the bulk preview both show this, and a bulk action judges every instance with it
again, on the state it commits against.

Pure: no I/O, no clock (``now`` is a parameter).
"""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from engine.decide.operator_actions import Action
from engine.decide.operator_commands import record_command
from engine.model.definitions import DefinitionRef
from engine.model.errors import DecisionRejected, EventInvalid, ReplayRejected, TransitionInvalid
from engine.model.instance import AttemptProgress, AttemptStatus, Instance, InstanceStatus
from engine.model.registry import Registry
from engine.model.transitions import Draft, WorkKind
from engine.modes import Decision, decide
from engine.modes.steps.orchestration import compensable

A = AttemptStatus
S = InstanceStatus
DRY_RUN_ID = "dry-run"
REFUSALS = (
    DecisionRejected,
    ReplayRejected,
    TransitionInvalid,
    EventInvalid,
    ValueError,
    AssertionError,
)
"""What a dry run raises when the engine would refuse the command: a step name no event
can carry is an EventInvalid or a ValueError, a step a builder cannot act on (a retry
of a step without a retry policy) fails the builder's precondition."""

ALREADY: dict[Action, frozenset[InstanceStatus]] = {
    Action.PAUSE: frozenset({S.PAUSED}),
    Action.RESUME: frozenset({S.RUNNING}),
    Action.CANCEL: frozenset({S.CANCELLING, S.CANCELLED}),
    Action.TERMINATE: frozenset({S.TERMINATED}),
}
"""Statuses in which a lifecycle action has nothing left to do: refusing it there is
no problem to report, the instance is already where the action would take it."""

UNWINDING = frozenset({S.CANCELLING, S.FAILING})


class AlreadyThere(ValueError):
    """A dry run found nothing to do: the instance already is where the action would
    take it (for an action whose 'already' is not a status, such as a migration)."""


class Verdict(StrEnum):
    APPLIES = "applies"
    UNCHANGED = "unchanged"
    """The instance already is where the action would take it."""
    REFUSED = "refused"


class Fate(StrEnum):
    """What an action does to an attempt whose outcome is unknown."""

    STAYS_IN_DOUBT = "stays in doubt, awaiting resolution"
    HOLDS_UNWINDING = "stays in doubt and holds compensation back until it is resolved"
    ABANDONED = "is abandoned in doubt: the instance ends and an effect it had stays"
    RUNS_AGAIN = "runs again with the same idempotency key"
    RUNS_AGAIN_NEW_KEY = "runs again with a new idempotency key"
    SETTLED = "is settled"


@dataclass(frozen=True)
class Rerun:
    """An attempt the action schedules: its step, number and idempotency key."""

    step: str
    attempt: int
    key: str
    same_key: bool
    """True when it reuses the previous attempt's key (its outcome was unknown, so a
    handler that already took effect can recognise it); False for a new key."""
    compensation: bool = False


@dataclass(frozen=True)
class InDoubt:
    """An attempt whose outcome is unknown, and what the action does to it."""

    step: str
    attempt: int
    key: str
    fate: Fate
    settled_as: str = ""
    """For ``Fate.SETTLED``: the status it is settled as (succeeded, failed, ...)."""


@dataclass(frozen=True)
class ActionRequest:
    """An operator action as asked for: the action, the step it concerns ('' for a
    lifecycle action) and the arguments of its effect (a resolution, a result...)."""

    action: Action
    step: str = ""
    effect: Mapping[str, Any] = field(default_factory=dict)

    def on(self, step: str) -> ActionRequest:
        return ActionRequest(self.action, step, self.effect)


DryRun = Callable[[Instance, Registry, datetime, ActionRequest], Draft]
"""Build an action's transitions on a throwaway draft; raise one of REFUSALS when refused."""


@dataclass(frozen=True)
class Preview:
    """What ``request`` would do to one instance, judged from its replayed state."""

    instance_id: str
    request: ActionRequest
    definition: DefinitionRef
    status: InstanceStatus
    verdict: Verdict
    reason: str = ""
    """Why it is refused or unchanged ('' when it applies)."""
    becomes: InstanceStatus | None = None
    reruns: tuple[Rerun, ...] = ()
    compensations: tuple[str, ...] = ()
    """Steps whose compensation would run, in the order they would run."""
    kept: tuple[str, ...] = ()
    """Completed steps with a compensation that would not run (terminate keeps effects)."""
    in_doubt: tuple[InDoubt, ...] = ()
    records: tuple[str, ...] = ()
    """The events the command would record, e.g. ``compensation_scheduled charge``."""
    moves_to: DefinitionRef | None = None
    """The version the instance would run afterwards, when the action changes it."""

    @property
    def applies(self) -> bool:
        return self.verdict is Verdict.APPLIES


def preview(
    instance: Instance,
    registry: Registry,
    now: datetime,
    request: ActionRequest,
    run: DryRun | None = None,
) -> Preview:
    """Judge ``request`` on ``instance`` at ``now`` by its dry run (``dry_run`` unless
    the action builds its transitions otherwise, as a migration does)."""
    base = {
        "instance_id": instance.instance_id,
        "request": request,
        "definition": instance.definition,
        "status": instance.status,
    }
    try:
        draft = (run or dry_run)(instance, registry, now, request)
    except REFUSALS as refused:
        verdict = _refusal(instance, request.action)
        reason = refused.reason if isinstance(refused, ReplayRejected) else str(refused)
        if verdict is Verdict.UNCHANGED:
            reason = f"already {instance.status.label}"
        if isinstance(refused, AlreadyThere):
            verdict = Verdict.UNCHANGED
        return Preview(**base, verdict=verdict, reason=reason)
    after = draft.state
    assert after is not None
    compensations = _compensations(draft, instance, after)
    return Preview(
        **base,
        verdict=Verdict.APPLIES,
        becomes=after.status,
        reruns=_reruns(draft, instance),
        compensations=compensations,
        kept=_kept(instance, after, compensations),
        in_doubt=_in_doubt(draft, instance, after),
        records=tuple(f"{e.kind.label} {e.step}".strip() for e in draft.events),
        moves_to=after.definition if after.definition != instance.definition else None,
    )


def refused(instance: Instance, request: ActionRequest, reason: str) -> Preview:
    """A preview of an action that cannot even be asked of ``instance`` (no step to act on)."""
    return Preview(
        instance.instance_id,
        request,
        instance.definition,
        instance.status,
        Verdict.REFUSED,
        reason,
    )


def standing(instance: Instance, registry: Registry, now: datetime) -> Decision:
    """What the instance's mode decides on its state now, on a throwaway draft: where it
    stands (what it waits for, or what is due). DecisionRejected in a mode that does
    not decide; an ended instance's decision is ENDED."""
    return decide(Draft(registry, instance, max(now, instance.updated_at)))


def dry_run(instance: Instance, registry: Registry, now: datetime, request: ActionRequest) -> Draft:
    """The command and the decision after it, on a throwaway draft; raises when refused."""
    effect = dict(request.effect)
    if request.step:
        effect["step"] = request.step
    draft = Draft(registry, instance, max(now, instance.updated_at))
    record_command(draft, DRY_RUN_ID, request.action, "preview", "preview", **effect)
    with contextlib.suppress(DecisionRejected):  # a mode the engine does not orchestrate
        decide(draft)
    return draft


def _refusal(instance: Instance, action: Action) -> Verdict:
    return Verdict.UNCHANGED if instance.status in ALREADY.get(action, ()) else Verdict.REFUSED


def _dispatches(draft: Draft) -> list[tuple[WorkKind, dict[str, Any]]]:
    """The attempts the dry run schedules, as a worker would read them off their work."""
    kinds = (WorkKind.ACTIVITY, WorkKind.COMPENSATION)
    return [(w.kind, json.loads(w.payload or "{}")) for w in draft.work if w.kind in kinds]


def _reruns(draft: Draft, before: Instance) -> tuple[Rerun, ...]:
    """Attempts of steps that had run before and are scheduled again."""
    found = []
    for kind, dispatch in _dispatches(draft):
        compensation = kind is WorkKind.COMPENSATION
        track = before.compensations if compensation else before.activities
        previous = track.get(dispatch["step"])
        if previous is None or previous.attempt == 0:
            continue
        same = dispatch["key"] == previous.idempotency_key
        found.append(
            Rerun(dispatch["step"], dispatch["attempt"], dispatch["key"], same, compensation)
        )
    return tuple(found)


def _compensations(draft: Draft, before: Instance, after: Instance) -> tuple[str, ...]:
    """Compensations scheduled now, then (while unwinding) the rest in unwinding order."""
    order = [d["step"] for kind, d in _dispatches(draft) if kind is WorkKind.COMPENSATION]
    if after.status in UNWINDING and before.status not in UNWINDING:
        order += [p.step for p in compensable(after) if p.step not in after.compensations]
    return tuple(dict.fromkeys(order))


def _kept(before: Instance, after: Instance, compensations: tuple[str, ...]) -> tuple[str, ...]:
    """Compensable steps an ending action leaves uncompensated."""
    if not after.status.terminal or before.status.terminal:
        return ()
    return tuple(
        p.step
        for p in compensable(before)
        if p.step not in before.compensations and p.step not in compensations
    )


def _in_doubt(draft: Draft, before: Instance, after: Instance) -> tuple[InDoubt, ...]:
    reruns = {r.step: r for r in _reruns(draft, before) if not r.compensation}
    found = []
    for progress in _unknown(before):
        fate, settled_as = _fate(progress, after, reruns.get(progress.step))
        found.append(
            InDoubt(progress.step, progress.attempt, progress.idempotency_key, fate, settled_as)
        )
    return tuple(found)


def _fate(before: AttemptProgress, after: Instance, rerun: Rerun | None) -> tuple[Fate, str]:
    """What became of ``before``'s unknown outcome in the dry run's state ``after``."""
    if rerun is not None:
        return (Fate.RUNS_AGAIN if rerun.same_key else Fate.RUNS_AGAIN_NEW_KEY), ""
    now = after.activities.get(before.step, before)
    if now.status is not A.UNKNOWN:
        return Fate.SETTLED, now.status.label
    if after.status.terminal:
        return Fate.ABANDONED, ""
    return (Fate.HOLDS_UNWINDING if after.status in UNWINDING else Fate.STAYS_IN_DOUBT), ""


def _unknown(instance: Instance) -> list[AttemptProgress]:
    return [p for p in instance.activities.values() if p.status is A.UNKNOWN]


def in_doubt_step(instance: Instance) -> str | None:
    """The one activity of ``instance`` whose outcome is unknown, or None when there is
    none; ValueError when several are (an operator must name the step)."""
    unknown = [p.step for p in _unknown(instance)]
    if len(unknown) > 1:
        raise ValueError(f"several activities are in doubt ({', '.join(unknown)}): name the step")
    return unknown[0] if unknown else None


# Many instances ------------------------------------------------------------------------


@dataclass(frozen=True)
class BlastRadius:
    """What an action would do across instances: the preview's totals."""

    total: int
    verdicts: Mapping[Verdict, int]
    refusals: Mapping[str, tuple[str, ...]]
    """Each reason an instance is refused or unchanged, with the instances it concerns."""
    same_key_reruns: int
    new_key_reruns: int
    compensations: Mapping[str, int]
    """How many instances would compensate each step."""
    in_doubt: Mapping[Fate, int]
    versions: Mapping[DefinitionRef, int]
    """The version skew: how many selected instances are pinned to each version."""

    @property
    def applies(self) -> int:
        return self.verdicts.get(Verdict.APPLIES, 0)


def blast_radius(previews: Iterable[Preview]) -> BlastRadius:
    """Sum ``previews`` up (each instance counted once, in the order given)."""
    previews = list(previews)
    refusals: dict[str, list[str]] = {}
    for p in previews:
        if not p.applies:
            refusals.setdefault(f"{p.verdict.value}: {p.reason}", []).append(p.instance_id)
    reruns = [r for p in previews for r in p.reruns]
    return BlastRadius(
        total=len(previews),
        verdicts=Counter(p.verdict for p in previews),
        refusals={reason: tuple(ids) for reason, ids in refusals.items()},
        same_key_reruns=sum(r.same_key for r in reruns),
        new_key_reruns=sum(not r.same_key for r in reruns),
        compensations=Counter(step for p in previews for step in p.compensations),
        in_doubt=Counter(d.fate for p in previews for d in p.in_doubt),
        versions=Counter(p.definition for p in previews),
    )
