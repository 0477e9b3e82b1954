"""Instances, dead letters, drills and workers pages.

For now these list what the engine holds for the team; the operator tools (instance
pages, actions, live updates, running drills) come with the next studio iteration.
"""

from __future__ import annotations

from litestar import Request
from litestar.params import FromQuery
from litestar.response import Template

from studio.services import operations, workers
from studio.services.operations import format_cursor
from studio.web.rendering import page, principal_of, store_of


async def instances_page(
    request: Request, view: FromQuery[str] = "active", after: FromQuery[str | None] = None
) -> Template:
    principal = principal_of(request)
    found = await operations.instances(store_of(request), principal.team_id, view, after)
    return page(
        request,
        "operations/instances.html",
        "instances",
        page_rows=found.rows,
        next_cursor=format_cursor(found.next_cursor),
        view=view,
    )


async def dead_letters_page(request: Request, after: FromQuery[str | None] = None) -> Template:
    principal = principal_of(request)
    items, next_cursor = await operations.team_dead_letters(
        store_of(request), principal.team_id, after
    )
    return page(
        request,
        "operations/dead_letters.html",
        "dead-letters",
        items=items,
        next_cursor=next_cursor,
    )


async def drills_page(request: Request) -> Template:
    return page(request, "operations/drills.html", "drills")


async def workers_page(request: Request) -> Template:
    store = store_of(request)
    return page(
        request,
        "operations/workers.html",
        "workers",
        workers=await workers.list_workers(store),
        now=store.now(),
    )
