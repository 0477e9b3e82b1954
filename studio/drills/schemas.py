"""The JSON shapes of the drills API: the catalogue, jobs, recorded runs, comparisons."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from studio.choices import DrillJobStatus, DrillProfile, DrillRunStatus
from studio.drills.jobs import DrillJob
from studio.drills.service import Comparison, Family
from studio.projection import projected
from verification.runs import RunDetail, RunSummary


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
    stopped_by: str | None = None
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


def family_out(family: Family) -> DrillFamilyOut:
    drills = [DrillOut(d.drill_id, d.title, d.owned_server) for d in family.drills]
    return DrillFamilyOut(family.family, family.title, drills)


def job_out(job: DrillJob, run_id: str) -> DrillJobOut:
    absent = {"run_id": run_id or None, "error": job.error or None,
              "stopped_by": job.stopped_by or None}  # fmt: skip
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
