"""What Litestar hands a route besides its parameters: the runtime, the principal, the
instance list's filters, the instance a page shows, an instance history's filter, the
draft editor, the published version a route names and the saved plan a drill-plan
route is below (``app.py`` provides them by these names).

A page and an API route ask for ``runtime: Runtime`` and ``principal: Principal`` by
name and get them through dependency injection, so neither reaches into the app's
state, and the JSON API needs nothing of the HTML layer to run.
"""

from __future__ import annotations

from typing import Annotated, get_args

from litestar import Request
from litestar.datastructures import State
from litestar.di import NamedDependency, Provide
from litestar.params import FromPath, FromQuery, Parameter

from engine.api.queries import InstanceRow, PublishedVersion
from engine.model.definitions import Definition
from studio import read_lag
from studio.access import maybe_principal
from studio.choices import InstanceStatusName, InstanceView
from studio.definitions import service as definitions
from studio.definitions.editor_pages import draft_editor
from studio.instance_urls import instance_id_of
from studio.instances.history import PAGE_EVENTS, HistoryFilter
from studio.instances.list_order import SORTS
from studio.instances.service import InstanceFilters, require_row
from studio.plans import service as plans
from studio.plans.saved import SavedPlan
from studio.principal import Principal
from studio.reads import Reads
from studio.runtime import Runtime


def provide_runtime(state: State) -> Runtime:
    """The one Runtime the app built at startup (``studio.app``)."""
    return state.runtime


async def provide_reads(state: State, request: Request) -> Reads:
    """Where a read page reads (``studio.reads``): the replica, its lag measured first
    for the page's notice and the answer's header (``studio.read_lag``), else the
    primary. Only read routes ask for it; actions take the ``Runtime``."""
    runtime: Runtime = state.runtime
    replica: Reads | None = state.replica
    if replica is None:
        return runtime.primary
    request.scope.setdefault("state", {})[read_lag.STATE_KEY] = await read_lag.measure(
        runtime.queries, replica.queries
    )
    return replica


def provide_principal(request: Request) -> Principal:
    """The request's principal; routes needing one run after the access guard set it."""
    found = maybe_principal(request)
    assert found is not None, "route reached without a principal"
    return found


def instance_filters(
    view: Annotated[str, Parameter(schema_extra={"enum": list(get_args(InstanceView))})] = "active",
    definition: FromQuery[str] = "",
    version: FromQuery[str] = "",
    status: Annotated[
        str, Parameter(schema_extra={"enum": ["", *get_args(InstanceStatusName)]})
    ] = "",
    started_from: FromQuery[str] = "",
    started_before: FromQuery[str] = "",
    instance: FromQuery[str] = "",
    step: FromQuery[str] = "",
    failure_code: FromQuery[str] = "",
    sort: Annotated[str, Parameter(schema_extra={"enum": ["", *SORTS]})] = "",
    nest: Annotated[str, Parameter(schema_extra={"enum": ["", "1"]})] = "",
) -> InstanceFilters:
    """The instance list's filters from the query string: the ``filters`` dependency of
        the Instances page and of ``GET /api/instances``, which take the same URLs.

        ``view`` and ``status`` are checked by ``InstanceFilters`` (a 422 that says what is
        allowed, on the page as in the API); the OpenAPI document lists their values, and
    those of ``sort``."""
    return InstanceFilters(
        view,
        definition,
        version,
        status,
        started_from,
        started_before,
        instance,
        step,
        failure_code,
        sort,
        nest,
    )


async def instance_row(
    principal: NamedDependency[Principal], reads: NamedDependency[Reads], ref: FromPath[str]
) -> InstanceRow:
    """The instance the path's ``ref`` names, if the principal's team has it (else 404):
    the ``row`` dependency of the pages that show one instance, which all start there
    (read pages only: it is read where they read, perhaps a replica)."""
    return await require_row(reads, principal.team_id, instance_id_of(ref))


def history_filter(
    after: FromQuery[int] = 0,
    kind: FromQuery[list[str] | None] = None,
    step: FromQuery[str] = "",
    limit: FromQuery[int] = PAGE_EVENTS,
) -> HistoryFilter:
    """An instance history's filter from the query string: the ``chosen`` dependency of
    the instance page and of its history section, which take the same URLs."""
    return HistoryFilter(tuple(kind or ()), step, after, limit)


async def published_version(
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    name: FromPath[str],
    version: FromPath[str],
) -> PublishedVersion:
    """The published version the path names, if it is the team's (else 404): the
    ``published_version`` dependency of the routes of one version, which start there."""
    return await definitions.version_of(runtime, principal.team_id, name, version)


def drilled_version(published_version: NamedDependency[PublishedVersion]) -> Definition:
    """The path's published version, if it is of a mode plans drill (else 422): the
    ``drilled`` dependency of the routes below a version's plans."""
    return plans.plannable(published_version)


async def planned_version(
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    drilled: NamedDependency[Definition],
    plan: FromPath[str],
    number: FromPath[str],
) -> tuple[Definition, SavedPlan]:
    """The drilled version and the plan version the path names (the ``planned``
    dependency): asking for ``drilled`` first checks the version before the plan."""
    return drilled, await plans.saved_plan(runtime, principal.team_id, plan, number)


DEPENDENCIES = {
    "runtime": Provide(provide_runtime, sync_to_thread=False),
    "reads": Provide(provide_reads),
    "principal": Provide(provide_principal, sync_to_thread=False),
    "filters": Provide(instance_filters, sync_to_thread=False),
    "row": Provide(instance_row),
    "chosen": Provide(history_filter, sync_to_thread=False),
    "editor": Provide(draft_editor, sync_to_thread=False),
    "published_version": Provide(published_version),
    "drilled": Provide(drilled_version, sync_to_thread=False),
    "planned": Provide(planned_version),
}
