"""``/api/workers``: registered workers with their targets and the team's leases."""

from __future__ import annotations

from litestar import Request

from studio.operations import workers
from studio.operations.schemas import WorkerOut, worker_out
from studio.rendering import principal_of, runtime_of


async def list_workers(request: Request) -> list[WorkerOut]:
    principal = principal_of(request)
    return [
        worker_out(v, principal.team_id)
        for v in await workers.worker_views(runtime_of(request).queries, principal.team_id)
    ]
