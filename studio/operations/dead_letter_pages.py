"""The dead-letters page: triage groups, the list, and resolving one or many.

One form holds the page's dead letters as checkboxes (a group's box selects the group)
and the resolution: retry (when, and the new deadline) or discard, with a required
reason and the command id the page was drawn with. The answer is the page again with
one result per chosen item above the list, so a partial failure is visible item by
item, and posting the same form again only replays what was done.
"""

from __future__ import annotations

from litestar import Request
from litestar.di import NamedDependency
from litestar.params import FromQuery
from litestar.response import Template

from studio.errors import Invalid
from studio.instances.interventions import new_id
from studio.operations import dead_letters
from studio.operations.dead_letters import Fence, ItemResult, Resolution
from studio.principal import Principal
from studio.rendering import page
from studio.runtime import Runtime


async def dead_letters_page(
    request: Request,
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    code: FromQuery[str] = "",
    after: FromQuery[str | None] = None,
) -> Template:
    return await _render(request, principal, runtime, code, after)


async def _render(
    request: Request,
    principal: Principal,
    runtime: Runtime,
    code: str,
    after: str | None,
    results: list[ItemResult] | None = None,
    error: str = "",
    status: int = 200,
) -> Template:
    found = await dead_letters.page(runtime, principal.team_id, code, after)
    return page(
        request,
        "operations/dead_letters.html",
        "dead-letters",
        status=status,
        found=found,
        results=results or [],
        error=error,
        command_id=new_id(),
        first_page=after is None,
        defaults=(dead_letters.DEFAULT_RETRY_IN, dead_letters.DEFAULT_DEADLINE_IN),
    )


async def resolve(
    request: Request, principal: NamedDependency[Principal], runtime: NamedDependency[Runtime]
) -> Template:
    form = await request.form()
    values = {k: v for k, v in form.items() if isinstance(v, str)}
    chosen = [v for v in form.getall("item", []) if isinstance(v, str)]
    try:
        fences = [Fence.parse(v) for v in chosen]
        resolution = Resolution(
            values.get("action", ""),
            values.get("reason", ""),
            values.get("command_id", ""),
            values.get("retry_in", ""),
            values.get("deadline_in", ""),
        )
        results = await dead_letters.resolve(
            runtime, principal.team_id, principal.actor, fences, resolution
        )
    except Invalid as refused:
        return await _render(
            request,
            principal,
            runtime,
            values.get("code", ""),
            None,
            error=str(refused),
            status=422,
        )
    return await _render(request, principal, runtime, values.get("code", ""), None, results)
