"""``/api/instances``, ``/api/dead-letters``, ``/api/workers``: what the pages list."""

from __future__ import annotations

from litestar import Request
from litestar.params import FromQuery

from studio.api.schemas import (
    DeadLetterPageOut,
    InstancePageOut,
    WorkerOut,
    dead_letter_out,
    instance_out,
    worker_out,
)
from studio.services import operations, workers
from studio.services.operations import format_cursor
from studio.web.rendering import principal_of, store_of


async def list_instances(
    request: Request, view: FromQuery[str] = "active", after: FromQuery[str | None] = None
) -> InstancePageOut:
    principal = principal_of(request)
    found = await operations.instances(store_of(request), principal.team_id, view, after)
    return InstancePageOut(
        [instance_out(r) for r in found.rows], format_cursor(found.next_cursor) or None
    )


async def list_dead_letters(
    request: Request, after: FromQuery[str | None] = None
) -> DeadLetterPageOut:
    principal = principal_of(request)
    items, next_cursor = await operations.team_dead_letters(
        store_of(request), principal.team_id, after
    )
    return DeadLetterPageOut([dead_letter_out(d) for d in items], next_cursor or None)


async def list_workers(request: Request) -> list[WorkerOut]:
    return [worker_out(w) for w in await workers.list_workers(store_of(request))]
