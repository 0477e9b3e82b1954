"""``/api/definitions/{name}/versions/{version}/plans``: a version's drill plans: list,
save (a new version each time), get, export, run, follow a run, and the coverage."""

from __future__ import annotations

from typing import Any

from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody

from studio.plans import documents
from studio.plans import service as plans
from studio.plans.saved import listed
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
    name: FromPath[str],
    version: FromPath[str],
) -> list[PlanOut]:
    definition = await plans.definition_of(runtime, principal.team_id, name, version)
    found = await listed(runtime.store, principal.team_id, documents.ref(definition))
    return [plan_out(p) for p in found]


async def save_plan(
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    name: FromPath[str],
    version: FromPath[str],
    data: JSONBody[PlanIn],
) -> PlanOut:
    """Save the plan as the next version of its name (201); 422 lists every problem."""
    definition = await plans.definition_of(runtime, principal.team_id, name, version)
    document = {"definition": documents.ref(definition), **data.document}
    working = documents.from_document(document, definition)
    return plan_out(await plans.save(runtime, principal, definition, working))


async def get_plan(
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    name: FromPath[str],
    version: FromPath[str],
    plan: FromPath[str],
) -> PlanOut:
    """The plan's latest version."""
    _, found = await plans.plan_on_version(runtime, principal.team_id, name, version, plan, None)
    return plan_out(found)


async def get_plan_version(
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    name: FromPath[str],
    version: FromPath[str],
    plan: FromPath[str],
    number: FromPath[str],
) -> PlanOut:
    _, found = await plans.plan_on_version(runtime, principal.team_id, name, version, plan, number)
    return plan_out(found)


async def export_plan(
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    name: FromPath[str],
    version: FromPath[str],
    plan: FromPath[str],
    number: FromPath[str],
) -> dict[str, Any]:
    """The plan document alone, as ``wayline drill run --plan`` reads it."""
    _, found = await plans.plan_on_version(runtime, principal.team_id, name, version, plan, number)
    return found.document


async def run_plan(
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    name: FromPath[str],
    version: FromPath[str],
    plan: FromPath[str],
    number: FromPath[str],
) -> PlanRunOut:
    """Start a run in a throwaway schema (202); follow it at ``.../plans/jobs/{id}``."""
    definition, found = await plans.plan_on_version(
        runtime, principal.team_id, name, version, plan, number
    )
    job = plans.run(runtime, principal, definition, found)
    view, run_id = await plans.run_view(runtime, job)
    return run_out(job, view, run_id)


async def get_plan_run(
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    name: FromPath[str],
    version: FromPath[str],
    job_id: FromPath[str],
) -> PlanRunOut:
    await plans.definition_of(runtime, principal.team_id, name, version)
    job = plans.job_of(runtime, principal.team_id, job_id)
    view, run_id = await plans.run_view(runtime, job)
    return run_out(job, view, run_id)


async def plan_coverage(
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    name: FromPath[str],
    version: FromPath[str],
) -> list[StepCoverageOut]:
    definition = await plans.definition_of(runtime, principal.team_id, name, version)
    return [coverage_out(s) for s in await plans.coverage(runtime, principal.team_id, definition)]
