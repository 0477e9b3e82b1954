"""Instance pages: the list, the start form, one instance, its history and its export.

Everything works as plain links and forms; htmx makes the history pager and the lazy
state panel swap in place. The instance page opens with its first history page from
one keyset read; for a very long history that has not been replayed yet, the replayed
state (graph, attempts, actions) is fetched right after the page opens, so the page
never waits on a long replay. Live updates are in ``studio.instances.live_pages``;
actions and signals in ``studio.instances.intervention_pages``.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from litestar import Request, Response
from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery
from litestar.response import Redirect, Stream, Template

from engine.api.queries import InstanceRow
from engine.decide import lifecycle
from engine.decide.bulk_actions import BULK_ACTIONS, RESOLUTIONS
from engine.model.events import EventKind
from engine.model.identifiers import local_instance_id
from engine.model.limits import MAX_BULK_INSTANCES
from studio.accounts import saved_views
from studio.definitions import service as definitions
from studio.errors import Invalid
from studio.formats import attachment
from studio.forms import REFUSALS, again, beside, shown
from studio.instance_urls import instance_id_of, instance_url
from studio.instances import bulk, family, list_order
from studio.instances import detail as instance_detail
from studio.instances import history as instance_history
from studio.instances import service as instances
from studio.instances.detail import InstanceDetail
from studio.instances.history import HistoryFilter
from studio.instances.list_order import format_cursor
from studio.instances.sections import (
    LEGEND,
    graph_of,
    marks_of,
    node_class,
    node_title,
    render_section,
    render_sections,
    structure_of,
)
from studio.instances.service import InstanceFilters
from studio.machines.overlay import LEGEND as MACHINE_LEGEND
from studio.operations import holds
from studio.principal import Principal
from studio.reads import Reads
from studio.rendering import form_values, is_htmx, page, see_other
from studio.runtime import Runtime

PAGE = "instances/page.html"
LIST = "/instances"
"""The list's path, which names its saved view (``studio.accounts.saved_views``)."""
FILTER_FIELDS = frozenset(f.name for f in fields(InstanceFilters))
"""The fields of a posted view that are the list's own (not ``_csrf``)."""


async def list_page(
    request: Request,
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    reads: NamedDependency[Reads],
    filters: NamedDependency[InstanceFilters],
    after: FromQuery[str | None] = None,
) -> Template | Redirect:
    """The list as the query asks (it saves nothing: ``save_view`` does); with no query
    at all, the person's saved view."""
    if saved := await saved_views.remembered(runtime.store, principal, LIST, request.url.query):
        return see_other(saved)
    return await show_list(request, principal, runtime, reads, filters, after)


async def save_view(
    request: Request, principal: NamedDependency[Principal], runtime: NamedDependency[Runtime]
) -> Redirect:
    """Remember the view the person chose on the list (the Filter form's fields, or a
    tab's, a column heading's or Clear's) as their view of it, and show it. A view whose
    filters cannot be taken is refused (422, saying which) and not saved."""
    values = await form_values(request)
    filters = InstanceFilters(**{k: v for k, v in values.items() if k in FILTER_FIELDS})
    query = filters.query()
    await saved_views.remember(runtime.store, principal, LIST, query)
    return see_other(f"{LIST}?{query}")


async def show_list(
    request: Request,
    principal: Principal,
    runtime: Runtime,
    reads: Reads,
    filters: InstanceFilters,
    after: str | None = None,
    status: int = 200,
    **refusal: Any,
) -> Template:
    """The list's page after ``after``; with ``refusal`` (``forms.again``, and
    ``field_errors``) its bulk form was refused: the same page again, with the boxes
    ticked, the action and fields as chosen, and each reason beside its field."""
    found = await instances.list_page(reads, principal.team_id, filters, after)
    return page(
        request,
        "instances/list.html",
        "instances",
        status=status,
        page_rows=await family.arranged(reads, found.rows, filters.nest == "1"),
        next_cursor=format_cursor(found.next_cursor),
        filters=filters,
        after=after or "",
        versions=await definitions.team_versions(runtime, principal.team_id),
        first_page=after is None,
        bulk_actions=[(a, b.label) for a, b in BULK_ACTIONS.items()],
        bulk_limit=MAX_BULK_INSTANCES,
        resolutions=RESOLUTIONS,
        recent_bulks=await bulk.recent(runtime, principal.team_id),
        holds_shown=await holds.banner(runtime, principal.team_id, filters.definition),
        sort_columns=list_order.COLUMNS,
        **shown(refusal),
    )


async def start_page(
    request: Request,
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    definition: FromQuery[str] = "",
    version: FromQuery[str] = "",
) -> Template:
    return await _start_form(request, principal, runtime, definition, version)


async def _start_form(
    request: Request,
    principal: Principal,
    runtime: Runtime,
    name: str,
    version: str,
    status: int = 200,
    **extra: Any,
) -> Template:
    published = await definitions.team_versions(runtime, principal.team_id)
    versions = [v for v in published if not v.deprecated]
    named = [v for v in versions if v.definition.name == name]  # oldest first
    chosen = next((v for v in named if v.definition.version == version), None)
    if chosen is None and named:  # a name alone: its latest version
        chosen = named[-1]
    if chosen is None and not name:
        chosen = instances.start_default(versions, published)
    limit = lifecycle.start_input_limit(chosen.definition) if chosen else None
    return page(
        request,
        "instances/new.html",
        "instances",
        status=status,
        versions=versions,
        chosen=chosen,
        limit=limit,
        limits={
            f"{v.definition.name}@{v.definition.version}": lifecycle.start_input_limit(v.definition)
            for v in versions
        },
        values=extra.pop("values", {}),
        **extra,
    )


async def start_instance(
    request: Request, principal: NamedDependency[Principal], runtime: NamedDependency[Runtime]
) -> Response:
    values = await form_values(request)
    name, version = values.get("definition", ""), values.get("version", "")
    if "@" in name and not version:  # the form's one select names both
        name, _, version = name.partition("@")
    try:
        started, _ = await instances.start(
            runtime,
            principal.team_id,
            name,
            version,
            values.get("instance_id", ""),
            values.get("input", ""),
            principal.actor,
        )
    except REFUSALS as refused:  # the form again, with what was typed, each reason at its field
        shown = again(refused, values) | {"field_errors": beside(refused)}
        return await _start_form(request, principal, runtime, name, version, **shown)
    return see_other(instance_url(local_instance_id(principal.team_id, started.instance_id)))


async def instance_page(
    request: Request,
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    reads: NamedDependency[Reads],
    row: NamedDependency[InstanceRow],
    chosen: NamedDependency[HistoryFilter],
) -> Template:
    """One instance: its state (or a placeholder fetched after a long history) and the
    first page of its history, which the page then follows live."""
    return await _whole_page(request, principal.team_id, runtime, reads, row, chosen)


async def refused_page(
    request: Request,
    principal: Principal,
    runtime: Runtime,
    detail: InstanceDetail,
    status: int,
    **shown: Any,
) -> Template:
    """The instance page again for a form posted without htmx and refused (``detail``
    read from the primary, as every action's answer is): ``shown`` is what the parts'
    templates show besides (the refused form with its reason, or the action panel's
    notice), and ``status`` the refusal's."""
    return await _whole_page(
        request, principal.team_id, runtime, runtime.primary, detail.row, HistoryFilter(),
        detail, status, **shown,
    )  # fmt: skip


async def _whole_page(
    request: Request, team: str, runtime: Runtime, reads: Reads, row: InstanceRow,
    chosen: HistoryFilter, detail: InstanceDetail | None = None, status: int = 200,
    **shown: Any,
) -> Template:  # fmt: skip
    """The instance page; its state is read now (``detail`` when already read) unless
    the history is long enough for the page to fetch it after."""
    lazy = detail is None and instance_detail.needs_lazy_state(reads, row)
    context: dict[str, Any] = {"row": row, "lazy": lazy}
    if not lazy:
        detail = detail or await instance_detail.detail(reads, team, row.instance_id)
        context |= _state_context(request, detail, **shown)
    # Read after the state: the page follows live from the state's sequence, so the
    # history must hold at least that much (rows seen twice are not appended twice).
    context |= await _history_section(reads, team, row.instance_id, row, chosen)
    if (
        "history_refused" in context and status == 200
    ):  # the page, with its history's cursor refused
        status = 422
    context["holds_shown"] = await runtime.queries.instance_holds(team, row.instance_id)
    return page(
        request,
        PAGE,
        "instances",
        status=status,
        **context,
        live_interval=runtime.settings.live_interval.total_seconds(),
    )


async def state_panel(
    request: Request,
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    reads: NamedDependency[Reads],
    ref: FromPath[str],
) -> Template:
    """The replayed state of the page (graph, sections), fetched after a long history."""
    detail = await instance_detail.detail(reads, principal.team_id, instance_id_of(ref))
    htmx = is_htmx(request)
    shown = None
    if not htmx:
        shown = await runtime.queries.instance_holds(principal.team_id, detail.row.instance_id)
    return page(
        request,
        "instances/_state.html" if htmx else PAGE,
        "instances",
        row=detail.row,
        lazy=False,
        head_oob=render_section(request, "head", detail, oob=True) if htmx else None,
        holds_shown=shown,
        **_state_context(request, detail),
        **_history_context(detail.row, None, HistoryFilter(), []),
        live_interval=runtime.settings.live_interval.total_seconds(),
    )


def _state_context(request: Request, detail: InstanceDetail, **shown: Any) -> dict[str, Any]:
    marks = marks_of(detail)
    return {
        "d": detail,
        "sections": render_sections(request, detail, **shown),
        **shown,
        "graph": graph_of(detail),
        "marks": marks,
        "structure": structure_of(detail),
        "classes": lambda node: node_class(node, detail.states),
        "titles": lambda node: node_title(node, detail.states),
        "legend": LEGEND if marks is None else MACHINE_LEGEND,
    }


def _history_context(
    row: InstanceRow, history: Any, chosen: HistoryFilter, steps: list[str]
) -> dict[str, Any]:
    return {
        "instance_id": row.instance_id,
        "history": history,
        "events": instance_history.event_views(history.events, row.tenant_id) if history else [],
        "chosen": chosen,
        "last_sequence": row.sequence,
        "kinds": [k.label for k in EventKind],
        "steps": steps,
    }


async def _history_section(
    reads: Reads, team: str, instance_id: str, row: InstanceRow, chosen: HistoryFilter
) -> dict[str, Any]:
    """The history section's context: one page of the history, filtered as ``chosen``
    says, and the steps the filter offers (the pinned version's). A cursor past the
    last event is ``refused`` in the section (no page, and links to pages that are)."""
    steps = [s.name for s in (await instances.pinned_definition(reads, row)).steps]
    try:
        found = await instance_history.history_page(reads, team, instance_id, chosen)
    except Invalid as refused:
        return _history_context(row, None, chosen, steps) | {"history_refused": str(refused)}
    return _history_context(row, found, chosen, steps)


async def history(
    request: Request,
    principal: NamedDependency[Principal],
    reads: NamedDependency[Reads],
    row: NamedDependency[InstanceRow],
    chosen: NamedDependency[HistoryFilter],
) -> Template:
    """One filtered history page: the history section for htmx, else its own page."""
    section = await _history_section(reads, principal.team_id, row.instance_id, row, chosen)
    template = "instances/_history.html" if is_htmx(request) else "instances/history.html"
    status = 422 if "history_refused" in section else 200
    return page(request, template, "instances", status=status, row=row, **section)


async def export_history(
    principal: NamedDependency[Principal], reads: NamedDependency[Reads], ref: FromPath[str]
) -> Stream:
    instance_id = instance_id_of(ref)
    body = await instance_history.export(reads, principal.team_id, instance_id)
    filename = instance_id.replace("/", "_")
    return Stream(
        body,
        media_type="application/json",
        headers={"Content-Disposition": attachment(f"{filename}.history.json")},
    )
