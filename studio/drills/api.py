"""``/api/drills``: the catalogue, starting a campaign, its job, runs, and comparing two."""

from __future__ import annotations

from typing import Annotated

from litestar.di import NamedDependency
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
from studio.principal import Principal
from studio.reads import Reads
from studio.runtime import Runtime


async def catalogue(profile: FromQuery[DrillProfile] = "ci") -> list[DrillFamilyOut]:
    return [family_out(f) for f in drills.catalogue_view(profile)]


async def list_runs(
    principal: NamedDependency[Principal],
    reads: NamedDependency[Reads],
    before: FromQuery[str | None] = None,
) -> DrillRunPageOut:
    found, older = await drills.runs_page(reads.store, principal.team_id, before)
    return DrillRunPageOut([run_out(r) for r in found], older or None)


async def start_run(
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    data: Annotated[DrillStartIn, examples.DRILLS],
) -> DrillJobOut:
    """Start a campaign in the background (202); follow it at ``/api/drills/jobs/{id}``."""
    job = runtime.drills.start(principal.team_id, principal.actor, data.drills, data.profile)
    return job_out(job, "")


async def get_job(
    principal: NamedDependency[Principal], runtime: NamedDependency[Runtime], job_id: FromPath[str]
) -> DrillJobOut:
    job = runtime.drills.get(principal.team_id, job_id)
    return job_out(job, await drills.recorded_run(runtime.store, job))


async def get_run(
    principal: NamedDependency[Principal], reads: NamedDependency[Reads], run_id: FromPath[str]
) -> DrillRunDetailOut:
    return run_detail_out(await drills.run_detail(reads.store, principal.team_id, run_id))


async def compare(
    principal: NamedDependency[Principal],
    reads: NamedDependency[Reads],
    left: FromQuery[str] = "",
    right: FromQuery[str] = "",
) -> ComparisonOut:
    return comparison_out(await drills.compare(reads.store, principal.team_id, left, right))


async def stop_job(
    principal: NamedDependency[Principal], runtime: NamedDependency[Runtime], job_id: FromPath[str]
) -> DrillJobOut:
    """Ask a running drill job to stop (202): follow it at ``/api/drills/jobs/{id}`` until
    its status is ``stopped`` (its drill under way cleaned up); 409 once it has ended."""
    job = runtime.drills.stop(principal.team_id, job_id, principal.actor)
    return job_out(job, await drills.recorded_run(runtime.store, job))
