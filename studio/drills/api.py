"""``/api/drills``: the catalogue, starting a campaign, its job, runs, and comparing two."""

from __future__ import annotations

from typing import Annotated

from litestar import Request
from litestar.params import FromPath, FromQuery

from studio import api_examples as examples
from studio.choices import DrillProfile
from studio.drills import service as drills
from studio.drills.schemas import (
    ComparisonOut,
    DrillFamilyOut,
    DrillJobOut,
    DrillRunDetailOut,
    DrillRunPageOut,
    DrillStartIn,
    comparison_out,
    family_out,
    job_out,
    run_detail_out,
    run_out,
)
from studio.rendering import principal_of, runtime_of, store_of


async def catalogue(
    request: Request, profile: FromQuery[DrillProfile] = "ci"
) -> list[DrillFamilyOut]:
    return [family_out(f) for f in drills.catalogue_view(profile)]


async def list_runs(request: Request, before: FromQuery[str | None] = None) -> DrillRunPageOut:
    principal = principal_of(request)
    found, older = await drills.runs_page(store_of(request), principal.team_id, before)
    return DrillRunPageOut([run_out(r) for r in found], older or None)


async def start_run(
    request: Request, data: Annotated[DrillStartIn, examples.DRILLS]
) -> DrillJobOut:
    """Start a campaign in the background (202); follow it at ``/api/drills/jobs/{id}``."""
    principal = principal_of(request)
    job = runtime_of(request).drills.start(
        principal.team_id, principal.actor, data.drills, data.profile
    )
    return job_out(job, "")


async def get_job(request: Request, job_id: FromPath[str]) -> DrillJobOut:
    principal = principal_of(request)
    runtime = runtime_of(request)
    job = runtime.drills.get(principal.team_id, job_id)
    return job_out(job, await drills.recorded_run(runtime.store, job))


async def get_run(request: Request, run_id: FromPath[str]) -> DrillRunDetailOut:
    principal = principal_of(request)
    return run_detail_out(await drills.run_detail(store_of(request), principal.team_id, run_id))


async def compare(
    request: Request, left: FromQuery[str] = "", right: FromQuery[str] = ""
) -> ComparisonOut:
    principal = principal_of(request)
    return comparison_out(await drills.compare(store_of(request), principal.team_id, left, right))
