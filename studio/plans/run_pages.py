"""Running a saved drill plan from the studio, watching it on the graph, and the
version's coverage heatmap.

The run page polls (htmx, every second) while the drill runs: each pin's marker turns
when its fault fires; once the drill is recorded, each node shows its outcome in the
operator's words (``studio.plans.outcome``). The drilled instance lived in a throwaway
schema that is dropped after the run, so its link opens the history the harness
captured (the drill's replay corpus) on the drills pages, as long as the run's
artifacts are kept.
"""

from __future__ import annotations

from litestar import Request
from litestar.di import NamedDependency
from litestar.params import FromPath
from litestar.response import Redirect, Template

from engine.model.definitions import Definition
from studio.forms import REFUSALS
from studio.plans import heatmap, outcome, outline_nodes
from studio.plans import service as plans
from studio.plans.pages import plans_url, refuse_run
from studio.plans.pictures import picture
from studio.plans.saved import SavedPlan
from studio.principal import Principal
from studio.rendering import is_htmx, page, see_other
from studio.runtime import Runtime
from verification.plan import FAULTS


async def run_plan(
    request: Request,
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    planned: NamedDependency[tuple[Definition, SavedPlan]],
) -> Redirect | Template:
    """Start the run and open its page; refused (another drill job runs, or the studio
    cannot run this plan), the plans page again saying why beside the saved plans."""
    definition, found = planned
    try:
        job = plans.run(runtime, principal, definition, found)
    except REFUSALS as refused:
        return await refuse_run(request, principal, runtime, definition, found, refused)
    return see_other(f"{plans_url(definition)}/jobs/{job.job_id}")


def _notes(view: outcome.RunView) -> dict[str, str]:
    """The verdict written beside each node: its state, or that a fault fired there."""
    notes = {}
    for step, node in view.nodes.items():
        if node.findings:
            notes[step] = "violation: see below"
        elif node.state:
            notes[step] = node.state[0].partition(": ")[2]
        elif any(p.state == "fired" for p in node.pins):
            notes[step] = "fault fired"
    return notes


async def job_page(
    request: Request,
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    drilled: NamedDependency[Definition],
    job_id: FromPath[str],
) -> Template:
    job = plans.job_of(runtime, principal.team_id, job_id)
    view, run_id = await plans.run_view(runtime, job)
    markers = outline_nodes.by_node(drilled, {s: node.pins for s, node in view.nodes.items()})
    context = {
        "definition": drilled,
        "url": plans_url(drilled),
        "job": job,
        "view": view,
        "run_id": run_id,
        "picture": picture(drilled, {step: node.css for step, node in view.nodes.items()}),
        "markers": markers,
        "notes": _notes(view),
    }
    template = "plans/_run.html" if is_htmx(request) else "plans/run.html"
    return page(request, template, "definitions", **context)


async def coverage_page(
    request: Request,
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    drilled: NamedDependency[Definition],
) -> Template:
    steps = await plans.coverage(runtime, principal.team_id, drilled)
    on_nodes = outline_nodes.by_node(drilled, {s.step: [s] for s in steps})
    heat, notes = {}, {}
    for node, covered in on_nodes.items():
        cells, applicable = sum(s.drilled for s in covered), sum(s.applicable for s in covered)
        heat[node] = f"heat heat-{heatmap.heat_level(cells, applicable)}"
        notes[node] = f"{cells} of {applicable} cells drilled"
    return page(
        request,
        "plans/coverage.html",
        "definitions",
        definition=drilled,
        url=plans_url(drilled),
        steps=steps,
        picture=picture(drilled, heat),
        notes=notes,
        faults=FAULTS,
        levels=heatmap.HEAT_LEVELS,
    )
