"""``/api/instances/bulk``: preview an operator action on many instances, take it once,
read its results. The same service as the bulk pages (``studio.instances.bulk``)."""

from __future__ import annotations

from functools import partial
from typing import Annotated, Any

from litestar.di import NamedDependency
from litestar.params import FromPath

from engine.model.limits import MAX_BULK_INSTANCES
from studio import api_examples as examples
from studio.errors import Invalid
from studio.instances import bulk
from studio.instances.bulk import Selection
from studio.instances.bulk_schemas import (
    BulkIn,
    BulkOut,
    BulkPreviewIn,
    BulkPreviewOut,
    bulk_out,
    preview_out,
)
from studio.instances.interventions import new_id
from studio.instances.service import InstanceFilters
from studio.principal import Principal
from studio.runtime import Runtime


async def preview(
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    data: Annotated[BulkPreviewIn, examples.BULK_PREVIEW],
) -> BulkPreviewOut:
    """What the action would do to each instance (at most ``limit`` of them), and the
    totals; nothing changes. Answers a fresh ``bulk_id`` to take it with."""
    select = partial(_selection, runtime, principal.team_id, data)
    asked, selection = await bulk.chosen(runtime, principal.team_id, _asked(data), select)
    found = await bulk.preview(runtime, selection, asked)
    return preview_out(found, new_id(), MAX_BULK_INSTANCES, principal.team_id)


def _asked(data: BulkPreviewIn | BulkIn) -> dict[str, Any]:
    """``bulk.ask``'s arguments from a request body."""
    return {
        "action": data.action,
        "step": data.step or "",
        "resolution": data.resolution or "",
        "result": data.result,
        "version": data.version or "",
    }


async def _selection(runtime: Runtime, team: str, data: BulkPreviewIn) -> Selection:
    if data.instances is not None:
        return await bulk.select_by_hand(runtime, team, data.instances)
    chosen = data.filter
    try:
        filters = InstanceFilters(
            **({} if chosen is None else {**vars(chosen), "status": chosen.status or ""})
        )
    except Invalid as wrong:  # said at the field inside ``filter``
        problems = [{**p, "path": f"filter.{p['path']}"} for p in wrong.problems]
        raise Invalid(str(wrong), problems) from None
    return await bulk.select_by_filter(runtime, team, filters)


async def act(
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    data: Annotated[BulkIn, examples.BULK],
) -> BulkOut:
    """Take the action on each instance, judged again from its state now; one result
    per instance (done, unchanged, or refused and why). The same ``bulk_id`` again
    answers the kept results and acts on nothing twice; with another action, reason or
    selection it is a conflict."""
    select = partial(bulk.select_by_hand, runtime, principal.team_id, data.instances)
    asked, selection = await bulk.chosen(runtime, principal.team_id, _asked(data), select)
    outcome = await bulk.act(
        runtime, principal.team_id, principal.actor, data.bulk_id, asked, selection, data.reason
    )
    return bulk_out(outcome.bulk, list(outcome.results), principal.team_id, outcome.replayed)


async def get_bulk(
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    bulk_id: FromPath[str],
) -> BulkOut:
    """A bulk action of the team and what it did to each instance."""
    found, results = await bulk.outcome(runtime, principal.team_id, bulk_id)
    return bulk_out(found, results, principal.team_id, replayed=True)
