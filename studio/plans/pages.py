"""The drill plan editor on a published version's graph (a machine's state diagram, a
code-first workflow's outline): pick a step on the graph (a state; a step call or a
signal wait of the outline), a boundary and a fault, and the pin shows as a marker on
its node; save the plan (a new version each time), export it, compare two versions.

The working plan lives in the page's form (``studio.plans.documents``): clicking a node
or pinning a fault re-renders the workspace (graph and form) with htmx and stores
nothing; only saving does. Viewers see the plans and the graph but no form.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from litestar import Request, Response
from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery
from litestar.response import Template

from engine.model.definitions import Definition, Mode
from studio.drills.jobs import DrillJob
from studio.errors import Invalid, StudioError
from studio.formats import attachment
from studio.plans import diff as plan_diff
from studio.plans import documents, outcome, outline_nodes, saved
from studio.plans import service as plans
from studio.plans.documents import FormData, WorkingPlan
from studio.plans.pictures import picture
from studio.plans.saved import SavedPlan
from studio.principal import Principal
from studio.rendering import is_htmx, page, see_other
from studio.roles import Access
from studio.runtime import Runtime
from verification import plan as harness
from verification import plan_code, plan_machines

BEHAVIOURS = harness.BEHAVIOURS
MACHINE_BEHAVIOURS = plan_machines.MACHINE_BEHAVIOURS
FAULT_WORDS = {
    "kill": "kill the worker (SIGKILL)",
    "exit": "the worker exits",
    "raise": "raise in the worker",
    "pause": "pause past the lease",
    "sever_before_commit": "cut the COMMIT before the server got it",
    "sever_after_commit": "cut the COMMIT after the server got it",
    "duplicate_signal": "deliver the signal again",
    "restart_database": "restart the database (crash; runs from the CLI only)",
}
"""How the fault picker names each fault kind (its value is the plan's)."""
MACHINE_FAULTS = harness.WORKER_FAULTS | {harness.RESTART_DATABASE}
"""What a machine's advance can be hit with: no signal to duplicate."""


def plans_url(definition: Definition) -> str:
    return f"/definitions/{definition.name}/versions/{definition.version}/plans"


def blank(definition: Definition) -> WorkingPlan:
    document = {"definition": documents.ref(definition),
                "input": harness.default_input(definition), "stubs": {}, "pins": []}  # fmt: skip
    if definition.mode is Mode.CODE:
        document["app"] = ""
    return WorkingPlan("", document)


def _picking(definition: Definition, picked: str) -> dict[str, Any]:
    """What the picker offers on the picked node: its boundaries and faults, and on a
    code-first outline what it pins (a step's calls, a wait's signals)."""
    faults = dict(FAULT_WORDS)
    if definition.mode is Mode.MACHINE:
        faults = {f: w for f, w in faults.items() if f in MACHINE_FAULTS}
    if definition.mode is not Mode.CODE:
        return {"boundaries": documents.boundaries_for(definition, picked), "faults": faults,
                "pinnable": None}  # fmt: skip
    node = outline_nodes.pinnable(definition, picked)
    key = node.key() if node else ""
    boundaries = documents.boundaries_for(definition, key) if key else []
    applies = harness.Plan(definition=documents.ref(definition))
    faults = {
        f: w for f, w in faults.items()
        if any(not harness.cell_problem(applies, definition, harness.Pin(key, b, f))
               for b in boundaries)
    }  # fmt: skip
    return {"boundaries": boundaries, "faults": faults, "pinnable": node}


def workspace(
    principal: Principal,
    definition: Definition,
    working: WorkingPlan,
    picked: str = "",
    errors: dict[str, str] | None = None,
    hit: str = "1",
    call: str = "1",
) -> dict[str, Any]:
    """What the editor's workspace (graph, state diagram or outline, and form) needs;
    ``errors`` by field name ('' for the plan as a whole), with the working plan's own."""
    errors = {**working.field_errors, **(errors or {})}
    editable = principal.can(Access.OPERATOR)
    machine = definition.mode is Mode.MACHINE
    code = definition.mode is Mode.CODE
    markers = outline_nodes.by_node(definition, {
        step: [outcome.PinState(p.label, p.boundary, p.fault, "pinned") for p in pins]
        for step, pins in working.markers().items()
    })  # fmt: skip
    kinds = {s.name: s.kind.value for s in definition.steps}
    return {
        "definition": definition,
        "url": plans_url(definition),
        "picture": picture(definition, {}, picked),
        "machine": machine,
        "code": code,
        "markers": markers,
        "working": working,
        "picked": picked,
        **_picking(definition, picked),
        "behaviours": MACHINE_BEHAVIOURS if machine else BEHAVIOURS,
        "activities": documents.stubbed_steps(definition),
        "answered": documents.answered_steps(definition),
        "kinds": dict.fromkeys(plan_code.signals(definition), "signal") if code else kinds,
        "editable": editable,
        "error": errors.get(""),
        "errors": errors,
        "hit": hit,
        "max_hit": harness.MAX_HIT,
        "max_times": harness.MAX_FAIL_TIMES,
        "call": call,
        "max_call": plan_code.MAX_OCCURRENCE,
        "app": working.typed.get("app") or working.document.get("app", ""),
    }


async def plans_page(
    request: Request,
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    drilled: NamedDependency[Definition],
    plan: FromQuery[str | None] = None,
    v: FromQuery[int | None] = None,
    saved_notice: FromQuery[int | None] = None,
) -> Template:
    working = blank(drilled)
    if plan:
        found = await plans.saved_plan(runtime, principal.team_id, plan, v)
        working = documents.from_document(found.document, drilled)
    return await _page(
        request, principal, runtime, drilled, working,
        notice=f"Saved {plan} v{v}." if saved_notice and plan and v else "",
    )  # fmt: skip


async def _page(
    request: Request,
    principal: Principal,
    runtime: Runtime,
    definition: Definition,
    working: WorkingPlan,
    status: int = 200,
    picked: str = "",
    errors: dict[str, str] | None = None,
    notice: str = "",
    hit: str = "1",
    call: str = "1",
    refused_run: RefusedRun | None = None,
) -> Template:
    listed = await saved.listed(runtime.store, principal.team_id, documents.ref(definition))
    return page(
        request,
        "plans/page.html",
        "definitions",
        status=status,
        ws=workspace(principal, definition, working, picked, errors, hit, call),
        saved=listed,
        notice=notice,
        commands={p.label: plans.run_command(p) for p in listed},
        refused_run=refused_run,
    )


@dataclass(frozen=True)
class RefusedRun:
    """A saved plan's Run that was refused, as the plans page says it beside the saved
    plans: which plan, why, and the team's drill job under way when that is why."""

    plan: SavedPlan
    reason: str
    running: DrillJob | None


async def refuse_run(
    request: Request,
    principal: Principal,
    runtime: Runtime,
    definition: Definition,
    plan: SavedPlan,
    refused: StudioError,
) -> Template:
    """The plans page again with ``plan`` loaded and why its run was refused beside the
    saved plans (a run under way, a plan the studio cannot run), not an error page that
    leaves the plans behind; the job under way is linked when it is the team's."""
    running = runtime.drills.running()
    mine = running if running is not None and running.team == principal.team_id else None
    working = documents.from_document(plan.document, definition)
    return await _page(
        request, principal, runtime, definition, working, status=refused.status,
        refused_run=RefusedRun(plan, str(refused), mine),
    )  # fmt: skip


async def _form(request: Request) -> FormData:
    """The working plan's fields, from the query of a node click or a posted form."""
    source = await request.form() if request.method == "POST" else request.query_params
    values: dict[str, list[str]] = {}
    for key, value in source.multi_items():
        if isinstance(value, str) and key != "_csrf":
            values.setdefault(key, []).append(value)
    return FormData(values)


async def compose(
    request: Request,
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    drilled: NamedDependency[Definition],
) -> Template:
    """The workspace again after a node was picked or a pin added or removed."""
    form = await _form(request)
    picked = (form.get("step") or form.get("picked") or [""])[0]
    errors: dict[str, str] = {}
    hit, call = form.one("hit", "1"), form.one("call", "1")
    if form.one("action") == "pin":
        step, errors = documents.pin_step(form, drilled, picked)
        if not errors:
            form, errors = documents.with_pin(FormData({**dict(form), "step": [step]}), drilled)
        hit = hit if errors.get("hit") else "1"
        call = call if errors.get("call") else "1"
    elif form.one("unpin"):
        form = documents.without_pin(form, form.one("unpin"))
    working = documents.from_form(form, drilled)
    if not is_htmx(request):
        return await _page(request, principal, runtime, drilled, working, picked=picked,
                           errors=errors, hit=hit, call=call)  # fmt: skip
    context = workspace(principal, drilled, working, picked, errors, hit, call)
    return page(request, "plans/_workspace.html", "definitions", ws=context)


async def save_plan(
    request: Request,
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    drilled: NamedDependency[Definition],
) -> Template | Response[Any]:
    working = documents.from_form(await _form(request), drilled, saving=True)
    try:
        kept = await plans.save(runtime, principal, drilled, working)
    except Invalid as invalid:
        return await _page(request, principal, runtime, drilled, working, status=422,
                           errors={"": str(invalid)})  # fmt: skip
    shown = urlencode({"plan": kept.name, "v": kept.version, "saved_notice": 1})
    return see_other(f"{plans_url(drilled)}?{shown}")


async def export_plan(planned: NamedDependency[tuple[Definition, SavedPlan]]) -> Response[str]:
    """The plan version as ``wayline drill run --plan`` reads it, as a download."""
    _, found = planned
    filename = plans.export_name(found)
    return Response(
        json.dumps(found.document, indent=2) + "\n",
        media_type="application/json",
        headers={"Content-Disposition": attachment(filename)},
    )


async def diff_page(
    request: Request,
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    drilled: NamedDependency[Definition],
    plan: FromPath[str],
    left: FromQuery[int],
    right: FromQuery[int],
) -> Template:
    one = await plans.saved_plan(runtime, principal.team_id, plan, left)
    two = await plans.saved_plan(runtime, principal.team_id, plan, right)
    return page(
        request, "plans/diff.html", "definitions", definition=drilled,
        url=plans_url(drilled), diff=plan_diff.diff(one, two),
    )  # fmt: skip
