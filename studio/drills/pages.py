"""Drill pages: choose and start a campaign, watch it, read scorecards, compare two.

Starting a campaign answers at once with its job page; the campaign runs in the
background (``studio.drills.jobs``). The job page polls its own progress
fragment once a second while the campaign runs (bounded: the progress is in memory;
the database is read only until the run's row is found) and, when it ends, the
fragment becomes the scorecard and the polling stops.
"""

from __future__ import annotations

import contextlib
from typing import Any

from litestar import Request
from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery
from litestar.response import Redirect, Template

from studio.drills import service as drills
from studio.errors import Conflict
from studio.forms import REFUSALS, again, posted, shown
from studio.instance_urls import instance_id_of
from studio.instances import history as instance_history
from studio.principal import Principal
from studio.reads import Reads
from studio.rendering import is_htmx, page, see_other
from studio.runtime import Runtime


async def drills_page(
    request: Request,
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    profile: FromQuery[str] = "ci",
    before: FromQuery[str | None] = None,
) -> Template:
    return await _drills(request, principal, runtime, profile, before)


async def _drills(
    request: Request,
    principal: Principal,
    runtime: Runtime,
    profile: str,
    before: str | None = None,
    **refused: Any,
) -> Template:
    """The Drills page; with ``refused`` (``forms.again``) it answers its run or compare
    form that was refused, with the message beside that form and the choices kept."""
    past, older = await drills.runs_page(runtime.store, principal.team_id, before)
    running = runtime.drills.running()
    return page(
        request,
        "drills/drills.html",
        "drills",
        profile=profile,
        profiles=drills.profiles(),
        families=drills.catalogue_view(profile),
        runs=past,
        older=older,
        running=running if running and running.team == principal.team_id else None,
        **shown(refused),
    )


async def start_run(
    request: Request, principal: NamedDependency[Principal], runtime: NamedDependency[Runtime]
) -> Template | Redirect:
    values = await posted(request)
    wanted = [v for v in values.all("drill") if v]
    profile = values.get("profile", "ci")
    try:
        job = runtime.drills.start(principal.team_id, principal.actor, wanted, profile)
    except REFUSALS as refused:  # nothing chosen, or a campaign runs (one at a time)
        if profile not in drills.profiles():
            raise
        shown = again(refused, values, "run")
        return await _drills(request, principal, runtime, profile, **shown)
    return see_other(f"/drills/jobs/{job.job_id}")


async def stop_job(
    principal: NamedDependency[Principal], runtime: NamedDependency[Runtime], job_id: FromPath[str]
) -> Redirect:
    """Stop a drill job, back on its page (which says it stopped, or how it ended when it
    ended first: a Stop that comes late has nothing to undo)."""
    job = runtime.drills.get(principal.team_id, job_id)
    with contextlib.suppress(Conflict):
        runtime.drills.stop(principal.team_id, job_id, principal.actor)
    return see_other(job.page)


async def job_page(
    request: Request,
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    job_id: FromPath[str],
) -> Template:
    job = runtime.drills.get(principal.team_id, job_id)
    run_id = await drills.recorded_run(runtime.store, job)
    context: dict[str, Any] = {"job": job, "run_id": run_id}
    if not job.running and run_id:
        context |= _run_context(await drills.run_detail(runtime.store, principal.team_id, run_id))
    template = "drills/_job.html" if is_htmx(request) else "drills/job.html"
    return page(request, template, "drills", **context)


def _run_context(detail: Any) -> dict[str, Any]:
    findings = {d["id"]: drills.findings(d) for d in detail.results}
    card = detail.scorecard or {}
    tables = drills.scorecard_tables(card)
    return {
        "run": detail,
        "card": card,
        "tables": tables,
        "findings": findings,
        "units": drills.SCORECARD_UNITS,
    }


async def run_page(
    request: Request,
    principal: NamedDependency[Principal],
    reads: NamedDependency[Reads],
    run_id: FromPath[str],
) -> Template:
    detail = await drills.run_detail(reads.store, principal.team_id, run_id)
    return page(request, "drills/run.html", "drills", **_run_context(detail))


async def compare_page(
    request: Request,
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    reads: NamedDependency[Reads],
    left: FromQuery[str] = "",
    right: FromQuery[str] = "",
) -> Template:
    """Two runs side by side; refused (a run compared with itself, or one missing), the
    Drills page again with the reason beside its compare form, A and B as chosen."""
    try:
        comparison = await drills.compare(reads.store, principal.team_id, left, right)
    except REFUSALS as refused:
        shown = again(refused, await posted(request), "compare")
        return await _drills(request, principal, runtime, "ci", **shown)
    return page(request, "drills/compare.html", "drills", c=comparison)


async def captured_instance(
    request: Request,
    principal: NamedDependency[Principal],
    reads: NamedDependency[Reads],
    run_id: FromPath[str],
    drill_id: FromPath[str],
    ref: FromPath[str],
) -> Template:
    detail = await drills.run_detail(reads.store, principal.team_id, run_id)
    captured = drills.captured_instance(detail, drill_id, instance_id_of(ref))
    drill = next((d for d in detail.results if d["id"] == drill_id), None)
    return page(
        request,
        "drills/instance.html",
        "drills",
        captured=captured,
        drill=drill,
        events=instance_history.event_views(captured.events),
        findings=drills.findings(drill) if drill else [],
    )
