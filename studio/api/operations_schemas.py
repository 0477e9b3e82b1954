"""The JSON shapes of dead letters, drills and workers in the API."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from engine.model.identifiers import local_instance_id
from engine.queries import DeadLetterGroup, WorkRow
from studio.api.choices import DeadLetterAction, DrillJobStatus, DrillProfile, DrillRunStatus
from studio.api.projection import projected
from studio.services.dead_letters import DeadLetterView, ItemResult
from studio.services.drill_jobs import DrillJob
from studio.services.drills import Comparison, Family
from studio.services.workers import WorkerView
from verification.runs import RunDetail, RunSummary


@dataclass
class DeadLetterOut:
    work_id: str
    instance_id: str
    definition: str | None
    version: str | None
    target: str
    token: int
    attempts: int
    failure_code: str
    failed_at: datetime
    deadline: datetime


@dataclass
class DeadLetterGroupOut:
    failure_code: str
    definition: str
    version: str
    count: int
    first_failed_at: datetime
    last_failed_at: datetime


@dataclass
class DeadLetterPageOut:
    items: list[DeadLetterOut]
    groups: list[DeadLetterGroupOut]
    next: str | None


@dataclass
class FenceIn:
    work_id: str
    token: int


@dataclass
class ResolveIn:
    """Resolve dead letters; each item gets its own result."""

    action: DeadLetterAction
    reason: str
    items: list[FenceIn]
    command_id: str | None = None
    """Deduplicates: the same command id again only replays what was done."""
    retry_in: str = "0s"
    deadline_in: str = "1d"


@dataclass
class ItemResultOut:
    work_id: str
    token: int
    instance_id: str
    ok: bool
    outcome: str
    message: str


@dataclass
class DrillOut:
    id: str
    title: str
    owned_server: bool


@dataclass
class DrillFamilyOut:
    family: str
    title: str
    drills: list[DrillOut]


@dataclass
class DrillStartIn:
    drills: list[str]
    """Drill ids or families (``D1``), as ``wayline drill run --drill`` takes them."""
    profile: DrillProfile = "ci"


@dataclass
class DrillJobOut:
    job_id: str
    status: DrillJobStatus
    profile: DrillProfile
    seed: int
    total: int
    done: int
    failed: int
    run_id: str | None
    error: str | None
    finished: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class DrillRunOut:
    run_id: str
    status: DrillRunStatus
    profile: DrillProfile
    seed: int
    requested: list[str]
    target: str
    started_at: datetime
    finished_at: datetime | None
    drills_total: int
    passed: int
    failed: int
    not_run: int
    error: str


@dataclass
class DrillRunPageOut:
    items: list[DrillRunOut]
    next: str | None


@dataclass
class DrillRunDetailOut:
    run: DrillRunOut
    drills: list[dict[str, Any]]
    scorecard: dict[str, Any] | None
    scorecard_text: str | None


@dataclass
class ComparisonOut:
    left: DrillRunOut
    right: DrillRunOut
    drills: list[dict[str, str]]
    figures: list[dict[str, Any]]


@dataclass
class LeaseOut:
    work_id: str
    instance_id: str
    step: str
    attempt: int
    fencing_token: int
    expires_at: datetime | None


@dataclass
class WorkerOut:
    worker_id: str
    targets: list[str]
    started_at: datetime
    heartbeat_at: datetime
    concurrency: int
    hostname: str
    live: bool
    leases: list[LeaseOut]


def dead_letter_out(view: DeadLetterView, team: str) -> DeadLetterOut:
    d, ref = view.item, view.definition
    return projected(
        DeadLetterOut,
        d,
        instance_id=local_instance_id(team, d.instance_id),
        definition=ref.name if ref else None,
        version=ref.version if ref else None,
    )


def group_out(group: DeadLetterGroup) -> DeadLetterGroupOut:
    names = {"definition": group.definition_name, "version": group.definition_version}
    return projected(DeadLetterGroupOut, group, **names)


def result_out(result: ItemResult, team: str) -> ItemResultOut:
    instance_id = local_instance_id(team, result.instance_id)
    return ItemResultOut(
        result.work_id, result.token, instance_id, result.ok, result.outcome, result.message
    )


def family_out(family: Family) -> DrillFamilyOut:
    drills = [DrillOut(d.drill_id, d.title, d.owned_server) for d in family.drills]
    return DrillFamilyOut(family.family, family.title, drills)


def job_out(job: DrillJob, run_id: str) -> DrillJobOut:
    absent = {"run_id": run_id or None, "error": job.error or None}
    return projected(DrillJobOut, job, finished=list(job.finished), **absent)


def run_out(summary: RunSummary) -> DrillRunOut:
    return projected(DrillRunOut, summary, requested=list(summary.requested))


def run_detail_out(detail: RunDetail) -> DrillRunDetailOut:
    return DrillRunDetailOut(
        run_out(detail.summary), detail.results, detail.scorecard, detail.scorecard_text
    )


def comparison_out(comparison: Comparison) -> ComparisonOut:
    return ComparisonOut(
        run_out(comparison.left.summary),
        run_out(comparison.right.summary),
        [{"drill": d.drill_id, "left": d.left, "right": d.right} for d in comparison.drills],
        [{"label": label, "left": a, "right": b} for label, a, b in comparison.numbers],
    )


def lease_out(row: WorkRow, team: str) -> LeaseOut:
    instance_id = local_instance_id(team, row.instance_id)
    return LeaseOut(
        row.work_id, instance_id, row.step, row.attempt, row.token, row.lease_expires_at
    )


def worker_out(view: WorkerView, team: str) -> WorkerOut:
    info = view.info
    return WorkerOut(
        info.worker_id,
        list(info.targets),
        info.started_at,
        info.heartbeat_at,
        info.concurrency,
        info.hostname,
        view.live,
        [lease_out(lease, team) for lease in view.leases],
    )
