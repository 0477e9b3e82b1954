"""The dead-letters page: triage groups, the list, and resolving one or many.

One form holds the page's dead letters as checkboxes (a group's box selects the group)
and the resolution: retry (when, and the new deadline) or discard, with a required
reason and the command id the page was drawn with. The answer is the page again with
one result per chosen item above the list, so a partial failure is visible item by
item, and posting the same form again only replays what was done.
"""

from __future__ import annotations

from typing import Any

from litestar import Request
from litestar.di import NamedDependency
from litestar.params import FromQuery
from litestar.response import Template

from studio.forms import REFUSALS, again, posted, shown
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
    status: int = 200,
    **refusal: Any,
) -> Template:
    """The page; with ``refusal`` (``forms.again``), its resolve form refused, shown
    again with the reason and every choice and field as it was posted."""
    found = await dead_letters.page(runtime, principal.team_id, code, after)
    return page(
        request,
        "operations/dead_letters.html",
        "dead-letters",
        status=status,
        found=found,
        results=results or [],
        command_id=new_id(),
        first_page=after is None,
        defaults=(dead_letters.DEFAULT_RETRY_IN, dead_letters.DEFAULT_DEADLINE_IN),
        **shown(refusal),
    )


async def resolve(
    request: Request, principal: NamedDependency[Principal], runtime: NamedDependency[Runtime]
) -> Template:
    values = await posted(request)
    code = values.get("code")
    try:
        fences = [Fence.parse(v) for v in values.all("item")]
        resolution = Resolution(
            values.get("action"),
            values.get("reason"),
            values.get("command_id"),
            values.get("retry_in"),
            values.get("deadline_in"),
        )
        results = await dead_letters.resolve(
            runtime, principal.team_id, principal.actor, fences, resolution
        )
    except REFUSALS as refused:
        return await _render(request, principal, runtime, code, None, **again(refused, values))
    return await _render(request, principal, runtime, code, None, results)
