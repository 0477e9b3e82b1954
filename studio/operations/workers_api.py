"""``/api/workers``: registered workers with their targets and the team's leases."""

from __future__ import annotations

from litestar.di import NamedDependency

from studio.operations import workers
from studio.operations.schemas import WorkerOut, worker_out
from studio.principal import Principal
from studio.runtime import Runtime


async def list_workers(
    principal: NamedDependency[Principal], runtime: NamedDependency[Runtime]
) -> list[WorkerOut]:
    return [
        worker_out(v, principal.team_id)
        for v in await workers.worker_views(runtime.queries, principal.team_id)
    ]
