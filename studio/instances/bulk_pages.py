"""Bulk operator actions on the instances list: preview, confirm, results.

The list's form asks for a preview (a GET: nothing changes) of an action on the checked
instances or on every instance the filters match; the preview page shows the blast
radius and the confirmation form, which carries the bulk id drawn with the preview and
the instances it covered. Confirming redirects to the bulk's result page, which stays
reachable afterwards; a refused confirmation (no reason) shows the preview again with
the reason it was refused. The service is ``studio.instances.bulk``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from litestar import Request, Response
from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery
from litestar.response import Template

from engine.decide.audit import DANGEROUS
from engine.decide.bulk_actions import BULK_ACTIONS
from engine.decide.operator_actions import Action
from engine.decide.previews import Verdict
from engine.model.limits import MAX_BULK_INSTANCES, MAX_REASON_LENGTH
from studio.errors import Invalid
from studio.forms import REFUSALS, again
from studio.instances import bulk
from studio.instances.interventions import new_id
from studio.instances.service import InstanceFilters
from studio.principal import Principal
from studio.rendering import page, see_other
from studio.runtime import Runtime


async def preview_page(
    request: Request,
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    filters: NamedDependency[InstanceFilters],
    action: FromQuery[str] = "",
    select: FromQuery[str] = "filter",
    pick: FromQuery[list[str] | None] = None,
    bulk_step: FromQuery[str] = "",
    resolution: FromQuery[str] = "",
    to_version: FromQuery[str] = "",
) -> Template:
    """The blast radius of ``action`` on the checked instances (``select=hand``) or on
    those the filters match (``to_version``: where a migration moves them)."""
    values = {"action": action, "step": bulk_step, "resolution": resolution, "version": to_version}
    return await _preview(request, principal, runtime, filters, values, pick or [], select)


async def _preview(
    request: Request,
    principal: Principal,
    runtime: Runtime,
    filters: InstanceFilters,
    values: dict[str, str],
    picked: list[str],
    select: str,
    error: str = "",
    status: int = 200,
) -> Template:
    context: dict[str, Any] = {"found": None, "asked": None, "label": "Bulk action"}
    try:
        asked = bulk.ask_from_form(values)
        context |= {"asked": asked, "label": BULK_ACTIONS[asked.action].label}
        by_hand = select == "hand"
        if by_hand:
            selection = await bulk.select_by_hand(runtime, principal.team_id, picked)
        else:
            selection = await bulk.select_by_filter(runtime, principal.team_id, filters)
        context["found"] = await bulk.preview(runtime, selection, asked)
        context["by_hand"] = by_hand
    except Invalid as wrong:
        if not error:  # a refused confirmation keeps its own reason and status
            error, status = str(wrong), wrong.status
    return page(
        request,
        "instances/bulk_preview.html",
        "instances",
        status=status,
        filters=filters,
        values=values,
        error=error,
        bulk_id=values.get("bulk_id") or new_id(),
        limit=MAX_BULK_INSTANCES,
        scan=bulk.MAX_BULK_SCAN,
        reason_limit=MAX_REASON_LENGTH,
        verdicts=Verdict,
        danger=context["asked"] is not None and context["asked"].action in DANGEROUS,
        **context,
    )


async def confirm(
    request: Request, principal: NamedDependency[Principal], runtime: NamedDependency[Runtime]
) -> Response:
    """Take the previewed action (once per bulk id) and show its results."""
    form = await request.form()
    values = {k: v for k, v in form.items() if isinstance(v, str) and k != "pick"}
    picked = [v for v in form.getall("pick", []) if isinstance(v, str)]
    try:
        asked = bulk.ask_from_form(values)
        selection = await bulk.select_by_hand(runtime, principal.team_id, picked)
        outcome = await bulk.act(
            runtime,
            principal.team_id,
            principal.actor,
            values.get("bulk_id", ""),
            asked,
            selection,
            values.get("reason", ""),
        )
    except REFUSALS as refused:  # the preview again, with the reason typed
        shown = again(refused, values)
        return await _preview(
            request, principal, runtime, InstanceFilters(), picked=picked, select="hand", **shown
        )
    return see_other(f"/instances/bulk/{outcome.bulk.bulk_id}")


async def result_page(
    request: Request,
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    bulk_id: FromPath[str],
) -> Template:
    """What a bulk action did to each of its instances, kept for later."""
    found, results = await bulk.outcome(runtime, principal.team_id, bulk_id)
    counts = Counter(r.outcome for r in results)
    return page(
        request,
        "instances/bulk_result.html",
        "instances",
        bulk=found,
        results=results,
        counts={k: counts.get(k, 0) for k in ("done", "unchanged", "refused")},
        pending=len(found.instance_ids) - len(results),
    )


def bulk_actions() -> list[tuple[Action, str]]:
    """The actions the list's bulk form offers, in the table's order."""
    return [(a, b.label) for a, b in BULK_ACTIONS.items()]
