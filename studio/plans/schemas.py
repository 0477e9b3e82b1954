"""The JSON shapes of the drill plans API: a plan version, a run, the coverage."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from studio.drills.jobs import DrillJob
from studio.plans.heatmap import StepCoverage
from studio.plans.outcome import RunView
from studio.plans.saved import SavedPlan


@dataclass
class PlanIn:
    document: dict[str, Any]
    """The plan as ``wayline drill run --plan`` reads it; ``name`` names it and
    ``definition`` (this version's ``NAME@VERSION``) may be left out."""


@dataclass
class PlanOut:
    name: str
    version: int
    definition: str
    pins: int
    saved_by: str
    saved_at: datetime
    document: dict[str, Any]


@dataclass
class PlanRunOut:
    job_id: str
    plan: str
    plan_version: int
    status: str
    """running, finished or error."""
    verdict: str | None
    run_id: str | None
    instance_url: str | None
    nodes: list[dict[str, Any]]
    instance: list[str]
    invariants: list[dict[str, Any]]
    recovery_seconds: float | None
    findings: list[str]


@dataclass
class CellOut:
    boundary: str
    fault: str
    status: str
    """passed, failed, unattributed (a fault fired there, and what its run found cannot
    be put on this cell: ``why`` says so), never fired, planned or not drilled."""
    why: str | None
    """Why a drilled cell has its verdict (a finding about its step, or why none is)."""
    when: datetime | None
    source: str
    run_id: str | None


@dataclass
class StepCoverageOut:
    step: str
    kind: str
    applicable: int
    drilled: int
    cells: list[CellOut]


def plan_out(plan: SavedPlan) -> PlanOut:
    return PlanOut(
        plan.name, plan.version, plan.definition, len(plan.document.get("pins", [])),
        plan.saved_by, plan.saved_at, plan.document,
    )  # fmt: skip


def run_out(job: DrillJob, view: RunView, run_id: str) -> PlanRunOut:
    return PlanRunOut(
        job.job_id,
        job.plan.name,
        job.plan.version,
        view.status,
        view.verdict or None,
        run_id or None,
        view.instance_url(run_id) or None,
        [asdict(node) for node in view.nodes.values()],
        view.instance,
        [
            {"key": key, "name": name, "checked": checked, "broke": broke}
            for key, name, checked, broke in view.invariants
        ],
        view.recovery_seconds,
        view.findings,
    )


def coverage_out(step: StepCoverage) -> StepCoverageOut:
    cells = [
        CellOut(
            c.boundary,
            c.fault,
            c.status or "not drilled",
            c.why or None,
            c.when,
            c.source,
            c.run_id or None,
        )
        for c in step.cells.values()
        if c.applicable
    ]
    return StepCoverageOut(step.step, step.kind, step.applicable, step.drilled, cells)
