"""The JSON shapes of instances in the API: list rows, the detail, history, and input.

Converted from the same service records the pages render (``InstanceDetail``), so the
API and the instance page say the same things: each step's state, every attempt with
its lease, and the actions the state allows with what each would do.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from litestar.openapi.datastructures import ResponseSpec

from engine.api.queries import HistoryPage, InstanceRow
from engine.decide.previews import Preview
from engine.model.identifiers import local_instance_id
from engine.model.instance import instance_to_json
from studio.choices import ActionName, CommandAction, InstanceStatusName, OutcomeResolution
from studio.instances.detail import AttemptRow, InstanceDetail, TrailRow
from studio.instances.history import event_document
from studio.projection import projected


@dataclass
class InstanceOut:
    id: str
    definition: str
    version: str
    fingerprint: str
    status: InstanceStatusName
    sequence: int
    created_at: datetime
    updated_at: datetime
    archived_at: datetime | None


@dataclass
class InstancePageOut:
    items: list[InstanceOut]
    next: str | None


@dataclass
class StartIn:
    definition: str
    version: str
    instance_id: str | None = None
    """Optional and idempotent: the same id, version and input again returns the
    instance (200, where a new one is 201). Left out or null, one is made; an empty
    one is refused, since a retry could not find the instance again."""
    input: Any = None


@dataclass
class StepStateOut:
    step: str
    kind: str
    state: str
    note: str


@dataclass
class AttemptOut:
    step: str
    track: str
    attempt: int
    idempotency_key: str
    outcome: str
    """running, succeeded, failed, unknown (in doubt), resolved: ..., scheduled,
    dead-lettered, or held (recorded started, but an incident hold parked its work before
    any handler ran it: it runs once the hold is released)."""
    code: str
    started_at: datetime | None
    next_attempt_at: datetime | None
    work_state: str | None
    lease_owner: str | None
    fencing_token: int | None
    lease_expires_at: datetime | None
    earlier_attempts: int
    """On a step's first listed attempt, how many earlier ones the list leaves out (it
    keeps each step's newest; the history has them all); else 0."""


@dataclass
class RerunOut:
    step: str
    attempt: int
    idempotency_key: str
    same_key: bool
    compensation: bool


@dataclass
class InDoubtOut:
    step: str
    attempt: int
    idempotency_key: str
    fate: str
    settled_as: str


@dataclass
class ConsequencesOut:
    """The engine's preview of a command: what it records, runs again, compensates,
    keeps, and what becomes of attempts in doubt."""

    records: list[str]
    reruns: list[RerunOut]
    compensations: list[str]
    """Steps whose compensation runs, in the order it runs."""
    kept: list[str]
    """Completed steps whose compensation does not run (their effects stay)."""
    in_doubt: list[InDoubtOut]


@dataclass
class ResolutionOut(ConsequencesOut):
    """What settling an unknown outcome one way would do."""

    resolution: OutcomeResolution


@dataclass
class OfferOut(ConsequencesOut):
    """An action the instance allows now, with the engine's preview of what it does
    (the same preview a bulk action shows for each instance). ``resolve_activity``'s
    preview is of settling the outcome as failed; ``resolutions`` has each way the
    engine would accept (empty for every other action)."""

    action: CommandAction
    step: str | None
    label: str
    effect: list[str]
    resolutions: list[ResolutionOut]


def consequences_out(preview: Preview) -> dict[str, Any]:
    """What a preview says records, runs again, is compensated, kept, or becomes of
    attempts in doubt, as the API's fields."""
    return {
        "records": list(preview.records),
        "reruns": [
            RerunOut(r.step, r.attempt, r.key, r.same_key, r.compensation) for r in preview.reruns
        ],
        "compensations": list(preview.compensations),
        "kept": list(preview.kept),
        "in_doubt": [
            InDoubtOut(d.step, d.attempt, d.key, d.fate.value, d.settled_as)
            for d in preview.in_doubt
        ],
    }


@dataclass
class AuditOut:
    command_id: str
    action: ActionName
    actor: str
    reason: str
    occurred_at: datetime
    sequence: int


@dataclass
class ResolutionAuditOut:
    """A resolution of one of the instance's dead letters: part of its operator audit
    trail that no event records (its ``audit`` holds the commands its history records)."""

    kind: Literal["dead_letter_retried", "dead_letter_discarded"]
    """As a retention export names it."""
    command_id: str
    actor: str
    reason: str
    occurred_at: datetime
    work_id: str
    fencing_token: int
    step: str | None = None
    """The step of the resolved work (null for work of no step, or no longer listed)."""
    retry_at: datetime | None = None
    """A retry's: when the work was due again."""
    deadline: datetime | None = None
    """A retry's: the work's new deadline."""


@dataclass
class ChildrenProgressOut:
    """An instance's children counted by outcome (``engine.model.fan_out``)."""

    total: int
    done: int
    """Children that change no more: ended, never to start, or removed since."""
    counts: dict[str, int]
    """By outcome: an instance status (``completed``, ``running``...), ``failed to
    start``, ``not started``, ``starting`` or ``removed``; only those there are."""
    summary: str
    """``children: 2 of 3 done (1 failed), 1 running``"""


@dataclass
class InstanceDetailOut:
    id: str
    status: InstanceStatusName
    definition: dict[str, str]
    sequence: int
    position: str
    started_at: datetime
    updated_at: datetime
    input: Any
    result: Any
    failure_code: str
    failure_step: str
    parent_id: str | None
    parent_step: str | None
    steps: list[StepStateOut]
    attempts: list[AttemptOut]
    timers: list[dict[str, Any]]
    signals: list[dict[str, Any]]
    race_winners: dict[str, str]
    children: list[dict[str, Any]]
    compensations: list[dict[str, Any]]
    audit: list[AuditOut]
    started_by: str | None = None
    """Who started it: a username, ``token:<id>`` for an API token, or the command
    line's actor (``cli`` unless it named one); null when nobody was recorded (a child,
    started by its parent, or a start older than the record)."""
    successor_id: str | None = None
    """The run it continued as new as (``ctx.continue_as_new``); null when it did not."""
    predecessor_id: str | None = None
    """The run it continues (it was started as that run's successor); null for none."""
    dead_letter_resolutions: list[ResolutionAuditOut] = field(default_factory=list)
    """Who retried or discarded its dead letters, when and why, newest first (the newest
    50): the rest of its operator audit trail, beside ``audit``."""
    actions: list[OfferOut] = field(default_factory=list)
    journal: dict[str, Any] | None = None
    """A code-first run's journal: its ``entries`` (what each durable call recorded),
    open ``waits``, signals ``set_aside`` and the ``divergence`` that parks it ('' if
    none); null for other modes."""
    children_progress: ChildrenProgressOut | None = None
    """How far its fan-out has got, as the page's line above its children says it; null
    when it started no child. Each of ``children`` has its own ``instance_status`` (null
    while it was never created), its ``outcome`` (one of the keys ``counts`` takes) and
    what is ``said`` of it (``cancelled with its parent``, ``no longer awaited (...)``,
    or '')."""


JOINED = {
    200: ResponseSpec(
        data_container=InstanceDetailOut,
        description="The same id, version and input had already started the instance: "
        "nothing was started, and the instance is answered as it is now.",
    )
}
"""The other success of starting: 201 starts the instance, 200 finds it started."""


@dataclass
class HistoryOut:
    events: list[dict[str, Any]]
    next_after: int | None


@dataclass
class SignalIn:
    """A signal; ``reason`` is required and kept in the audit trail with the caller."""

    step: str
    reason: str
    payload: Any = None
    signal_id: str | None = None
    """Deduplicates: the same id again (same caller and reason) is accepted once."""


@dataclass
class CommandIn:
    """An operator command; ``reason`` is required and kept in the audit trail."""

    action: CommandAction
    reason: str
    step: str | None = None
    command_id: str | None = None
    """Deduplicates: the same command id again acts once."""
    payload: Any = None
    resolution: OutcomeResolution | None = None
    """How ``resolve_activity`` settles an outcome in doubt."""
    result: Any = None
    code: str | None = None
    evidence: Any = None


def instance_out(row: InstanceRow, team: str) -> InstanceOut:
    """An instance of ``team`` in a list (every id here is the one the team knows)."""
    return InstanceOut(
        local_instance_id(team, row.instance_id),
        row.definition.name,
        row.definition.version,
        row.definition.fingerprint,
        row.status.label,
        row.sequence,
        row.created_at,
        row.updated_at,
        row.archived_at,
    )


def attempt_out(row: AttemptRow) -> AttemptOut:
    record, work = row.record, row.work
    leased = work is not None and work.state.label == "leased"
    return projected(
        AttemptOut,
        row,
        idempotency_key=row.key,
        started_at=record.started_at if record else None,
        next_attempt_at=record.next_attempt_at if record else None,
        work_state=work.state.label if work else None,
        lease_owner=work.lease_owner if leased and work else None,
        fencing_token=work.token if work else None,
        lease_expires_at=work.lease_expires_at if leased and work else None,
    )


def _journal_out(detail: InstanceDetail) -> dict[str, Any] | None:
    journal = detail.journal
    if journal is None:
        return None
    entries = [
        {
            "position": r.record.position,
            "verb": r.record.verb,
            "key": r.record.key,
            "name": r.record.name,
            "occurrence": r.record.occurrence,
            "step_id": r.step_id or None,
            "state": r.state.state,
            "note": r.state.note,
        }
        for r in journal.rows
    ]
    waits = [{"key": w.key, "verb": w.verb, "on": list(w.on)} for w in journal.waits]
    aside = [{"name": s.name, "signal_id": s.signal_id} for s in journal.set_aside]
    return {"entries": entries, "waits": waits, "set_aside": aside, "divergence": detail.divergence}


def detail_out(detail: InstanceDetail, team: str) -> InstanceDetailOut:
    state = detail.state
    ref = state.definition
    document = instance_to_json(state)
    fan_out = detail.fan_out
    for child, seen in zip(document["children"], fan_out.children, strict=True):
        child.update(fan_out.child_json(seen))
        child["child_id"] = local_instance_id(team, child["child_id"])
    progress = fan_out.to_json()
    compensations = sorted(document["compensations"], key=lambda c: c["scheduled_sequence"])
    return InstanceDetailOut(
        id=local_instance_id(team, state.instance_id),
        status=state.status.label,
        definition={"name": ref.name, "version": ref.version, "fingerprint": ref.fingerprint},
        sequence=state.sequence,
        position=detail.position,
        started_at=state.started_at,
        started_by=state.started_by or None,
        updated_at=state.updated_at,
        input=state.value("input"),
        result=state.value("result"),
        failure_code=state.failure_code,
        failure_step=state.failure_step,
        parent_id=local_instance_id(team, state.parent_id) or None,
        parent_step=state.parent_step or None,
        successor_id=local_instance_id(team, state.successor_id) or None,
        predecessor_id=local_instance_id(team, detail.predecessor) or None,
        steps=[
            _step_out(detail, step.name, step.kind.value, team) for step in detail.definition.steps
        ],
        attempts=[attempt_out(a) for a in detail.attempts],
        timers=document["timers"],
        signals=document["signals"],
        race_winners=dict(state.race_winners),
        children=document["children"],
        compensations=compensations,
        audit=[projected(AuditOut, a) for a in state.audit],
        dead_letter_resolutions=[_resolution_out(row) for row in detail.resolved],
        journal=_journal_out(detail),
        children_progress=ChildrenProgressOut(**progress) if progress else None,
        actions=[
            OfferOut(
                action=o.action.value,
                step=o.step or None,
                label=o.label,
                effect=list(o.effect),
                resolutions=[
                    ResolutionOut(resolution=name, **consequences_out(choice))
                    for name, choice in o.resolutions.items()
                ],
                **consequences_out(o.preview),
            )
            for o in detail.offers
        ],
    )


def _step_out(detail: InstanceDetail, name: str, kind: str, team: str) -> StepStateOut:
    found = detail.states[name]
    return StepStateOut(name, kind, found.state, found.described(team))


def history_out(page: HistoryPage, team: str) -> HistoryOut:
    return HistoryOut([event_document(e, team) for e in page.events], page.next_after)


def _resolution_out(row: TrailRow) -> ResolutionAuditOut:
    found = row.resolution
    assert found is not None
    return ResolutionAuditOut(
        kind=row.action,
        command_id=found.command_id,
        actor=found.actor,
        reason=found.reason,
        occurred_at=found.occurred_at,
        work_id=found.work_id,
        fencing_token=found.token,
        step=(row.work.step or None) if row.work is not None else None,
        retry_at=found.retry_at,
        deadline=found.deadline,
    )
