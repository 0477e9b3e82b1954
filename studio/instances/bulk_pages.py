"""Bulk operator actions on the instances list: preview, confirm, results.

The list's form asks for a preview (a GET: nothing changes) of an action on the checked
instances or on every instance the filters match; the preview page shows the blast
radius and the confirmation form, which carries the bulk id drawn with the preview and
the instances it covered. A refused preview (nothing ticked, no version to migrate
to) is the list's page again as it was left, each reason beside its field; confirming
redirects to the bulk's result page, which stays reachable afterwards; a refused
confirmation (no reason) shows the preview again with the reason it was refused. The
service is ``studio.instances.bulk``.
"""

from __future__ import annotations

from collections import Counter
from functools import partial
from urllib.parse import parse_qsl

from litestar import Request, Response
from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery
from litestar.response import Template

from engine.decide.audit import DANGEROUS
from engine.decide.bulk_actions import BULK_ACTIONS
from engine.decide.previews import ActionRequest, Verdict
from engine.model.limits import MAX_BULK_INSTANCES, MAX_REASON_LENGTH
from studio.errors import Invalid, StudioError
from studio.forms import REFUSALS, again, beside, posted
from studio.instances import bulk, code_migration
from studio.instances.interventions import new_id
from studio.instances.pages import show_list
from studio.instances.service import InstanceFilters
from studio.principal import Principal
from studio.reads import Reads
from studio.rendering import page, see_other
from studio.runtime import Runtime

NOTHING_TICKED = (
    "no instance was ticked: tick 1 to {limit} in the list below, or preview for all "
    "matching the filters"
)
"""Said beside the list's ticks when "Preview for checked" finds none ticked."""


async def preview_page(
    request: Request,
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    reads: NamedDependency[Reads],
    filters: NamedDependency[InstanceFilters],
    action: FromQuery[str] = "",
    select: FromQuery[str] = "filter",
    pick: FromQuery[list[str] | None] = None,
    bulk_step: FromQuery[str] = "",
    resolution: FromQuery[str] = "",
    to_version: FromQuery[str] = "",
    after: FromQuery[str | None] = None,
) -> Template:
    """The blast radius of ``action`` on the checked instances (``select=hand``) or on
    those the filters match (``to_version``: where a migration moves them). Refused
    (nothing ticked, no version to migrate to, ...), the list's page again, as it was
    left: its boxes ticked, the action and fields as chosen, each reason beside its
    field (a bare message meant choosing and ticking everything again)."""
    values = {"action": action, "step": bulk_step, "resolution": resolution, "version": to_version}
    by_hand = select == "hand"
    try:
        asked, selection = await _chosen(runtime, principal, filters, values, pick or [], by_hand)
    except Invalid as refused:
        shown = again(refused, await posted(request), "bulk") | {"field_errors": beside(refused)}
        return await show_list(request, principal, runtime, reads, filters, after or None, **shown)
    found = await bulk.preview(runtime, selection, asked)
    commands = await code_migration.for_previews(runtime, principal, found.previews)
    return _preview(request, filters, values, found, by_hand, commands)


async def _chosen(
    runtime: Runtime,
    principal: Principal,
    filters: InstanceFilters,
    values: dict[str, str],
    picked: list[str],
    by_hand: bool,
) -> tuple[ActionRequest, bulk.Selection]:
    """The action of the form's ``values`` and the instances it covers (``bulk.chosen``:
    Invalid names every field to change)."""
    team = principal.team_id
    if by_hand:
        select = partial(bulk.select_by_hand, runtime, team, picked, NOTHING_TICKED)
    else:
        select = partial(bulk.select_by_filter, runtime, team, filters)
    return await bulk.chosen(runtime, team, bulk.form_request(values), select)


def _preview(
    request: Request,
    filters: InstanceFilters,
    values: dict[str, str],
    found: bulk.BulkPreview | None,
    by_hand: bool,
    code_commands: dict[str, str],
    error: str = "",
    status: int = 200,
    field_errors: dict[str, str] | None = None,
) -> Template:
    """The preview page of ``found`` with its confirmation form (none when a refused
    confirmation could not even be previewed again: ``error`` alone says why), each
    code run refused for its code with the command that migrates it."""
    asked = found.request if found else None
    return page(
        request,
        "instances/bulk_preview.html",
        "instances",
        status=status,
        filters=filters,
        values=values,
        error=error,
        field_errors=field_errors or {},
        bulk_id=values.get("bulk_id") or new_id(),
        limit=MAX_BULK_INSTANCES,
        scan=bulk.MAX_BULK_SCAN,
        reason_limit=MAX_REASON_LENGTH,
        verdicts=Verdict,
        found=found,
        asked=asked,
        by_hand=by_hand,
        code_commands=code_commands,
        label=BULK_ACTIONS[asked.action].label if asked else "Bulk action",
        danger=asked is not None and asked.action in DANGEROUS,
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
        return await _confirm_again(request, principal, runtime, values, picked, refused)
    return see_other(f"/instances/bulk/{outcome.bulk.bulk_id}")


async def _confirm_again(
    request: Request,
    principal: Principal,
    runtime: Runtime,
    values: dict[str, str],
    picked: list[str],
    refused: StudioError,
) -> Template:
    """The preview again, judged now, with the refused confirmation's reason and what
    was typed, saying how its instances were chosen and leading back to their list;
    what cannot be previewed (nothing picked) shows that reason alone."""
    filters = _list_left(values.get("back", ""))
    by_hand = values.get("chosen") != "filter"
    try:
        asked, selection = await _chosen(runtime, principal, filters, values, picked, True)
        found = await bulk.preview(runtime, selection, asked)
    except Invalid:
        found = None
    previews = found.previews if found else ()
    commands = await code_migration.for_previews(runtime, principal, previews)
    at = beside(refused) if found else {}  # a reason refused is said beside its field
    return _preview(
        request, filters, values, found, by_hand, commands, str(refused), refused.status, at
    )


def _list_left(query: str) -> InstanceFilters:
    """The instance list's filters that a preview was opened from (its URL query, as the
    confirmation form carries it); the unfiltered list when they no longer hold."""
    try:
        return InstanceFilters(**dict(parse_qsl(query)))
    except (TypeError, StudioError):
        return InstanceFilters()


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
