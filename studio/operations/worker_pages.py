"""The workers page: every registered worker, its targets, concurrency and leases.

The table refreshes itself every few seconds while the page is open (two indexed
reads: the registry and the leases of the listed workers), so a worker going silent
or a lease being taken over shows without reloading.
"""

from __future__ import annotations

from litestar import Request
from litestar.di import NamedDependency
from litestar.response import Template

from studio.operations import workers
from studio.principal import Principal
from studio.rendering import is_htmx, page
from studio.runtime import Runtime

REFRESH_SECONDS = 5


async def workers_page(
    request: Request, principal: NamedDependency[Principal], runtime: NamedDependency[Runtime]
) -> Template:
    views = await workers.worker_views(runtime.queries, principal.team_id)
    template = "operations/_workers.html" if is_htmx(request) else "operations/workers.html"
    return page(request, template, "workers", workers=views, refresh=REFRESH_SECONDS)
