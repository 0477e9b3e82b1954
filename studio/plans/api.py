"""``/api/definitions/{name}/versions/{version}/plans``: a version's drill plans: list,
save (a new version each time), get, export, run, follow a run, and the coverage.

The version (``drilled``) and the plan version (``planned``) the path names arrive as
dependencies (``studio.dependencies``), checked before the route runs."""

from __future__ import annotations

from typing import Any

from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody

from engine.model.definitions import Definition
from studio.drills.jobs import DrillJob
from studio.plans import documents
from studio.plans import service as plans
from studio.plans.saved import SavedPlan, listed
from studio.plans.schemas import (
    PlanIn,
    PlanOut,
    PlanRunOut,
    StepCoverageOut,
    coverage_out,
    plan_out,
    run_out,
)
from studio.principal import Principal
from studio.runtime import Runtime


async def list_plans(
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    drilled: NamedDependency[Definition],
) -> list[PlanOut]:
    found = await listed(runtime.store, principal.team_id, documents.ref(drilled))
    return [plan_out(p) for p in found]


async def save_plan(
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    name: FromPath[str],
    version: FromPath[str],
    data: JSONBody[PlanIn],
) -> PlanOut:
    """Save the plan as the next version of its name (201); 422 lists every problem.

    The version is looked up here, not as ``drilled``: Litestar resolves dependencies
    before it checks the body, and a body the schema refuses is answered 400 first."""
    definition = await plans.definition_of(runtime, principal.team_id, name, version)
    document = {"definition": documents.ref(definition), **data.document}
    working = documents.from_document(document, definition)
    return plan_out(await plans.save(runtime, principal, definition, working))


async def get_plan(
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    drilled: NamedDependency[Definition],
    plan: FromPath[str],
) -> PlanOut:
    """The plan's latest version (``drilled`` checks the version first)."""
    return plan_out(await plans.saved_plan(runtime, principal.team_id, plan, None))


async def get_plan_version(planned: NamedDependency[tuple[Definition, SavedPlan]]) -> PlanOut:
    _, found = planned
    return plan_out(found)


async def export_plan(planned: NamedDependency[tuple[Definition, SavedPlan]]) -> dict[str, Any]:
    """The plan document alone, as ``wayline drill run --plan`` reads it."""
    _, found = planned
    return found.document


async def run_plan(
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    planned: NamedDependency[tuple[Definition, SavedPlan]],
) -> PlanRunOut:
    """Start a run in a throwaway schema (202); follow it at ``.../plans/jobs/{id}``."""
    return await _followed(runtime, plans.run(runtime, principal, *planned))


async def get_plan_run(
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    drilled: NamedDependency[Definition],
    job_id: FromPath[str],
) -> PlanRunOut:
    """A run's progress and verdict (``drilled`` checks the version first)."""
    return await _followed(runtime, plans.job_of(runtime, principal.team_id, job_id))


async def _followed(runtime: Runtime, job: DrillJob) -> PlanRunOut:
    """The run as a start answers it and as following it shows it, now."""
    view, run_id = await plans.run_view(runtime, job)
    return run_out(job, view, run_id)


async def plan_coverage(
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    drilled: NamedDependency[Definition],
) -> list[StepCoverageOut]:
    steps = await plans.coverage(runtime, principal.team_id, drilled)
    return [coverage_out(s) for s in steps]
