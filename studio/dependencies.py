"""What Litestar hands a route besides its parameters: the runtime, the principal, the
instance list's filters, an instance history's filter and the draft editor (``app.py``
provides them by these names).

A page and an API route ask for ``runtime: Runtime`` and ``principal: Principal`` by
name and get them through dependency injection, so neither reaches into the app's
state, and the JSON API needs nothing of the HTML layer to run.
"""

from __future__ import annotations

from typing import Annotated, get_args

from litestar import Request
from litestar.datastructures import State
from litestar.di import Provide
from litestar.params import FromQuery, Parameter

from studio.access import maybe_principal
from studio.choices import InstanceStatusName, InstanceView
from studio.definitions.editor_pages import draft_editor
from studio.instances.history import PAGE_EVENTS, HistoryFilter
from studio.instances.service import InstanceFilters
from studio.principal import Principal
from studio.runtime import Runtime


def provide_runtime(state: State) -> Runtime:
    """The one Runtime the app built at startup (``studio.app``)."""
    return state.runtime


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
) -> InstanceFilters:
    """The instance list's filters from the query string: the ``filters`` dependency of
    the Instances page and of ``GET /api/instances``, which take the same URLs.

    ``view`` and ``status`` are checked by ``InstanceFilters`` (a 422 that says what is
    allowed, on the page as in the API); the OpenAPI document lists their values."""
    return InstanceFilters(
        view, definition, version, status, started_from, started_before, instance
    )


def history_filter(
    after: FromQuery[int] = 0,
    kind: FromQuery[list[str] | None] = None,
    step: FromQuery[str] = "",
    limit: FromQuery[int] = PAGE_EVENTS,
) -> HistoryFilter:
    """An instance history's filter from the query string: the ``chosen`` dependency of
    the instance page and of its history section, which take the same URLs."""
    return HistoryFilter(tuple(kind or ()), step, after, limit)


DEPENDENCIES = {
    "runtime": Provide(provide_runtime, sync_to_thread=False),
    "principal": Provide(provide_principal, sync_to_thread=False),
    "filters": Provide(instance_filters, sync_to_thread=False),
    "chosen": Provide(history_filter, sync_to_thread=False),
    "editor": Provide(draft_editor, sync_to_thread=False),
}
