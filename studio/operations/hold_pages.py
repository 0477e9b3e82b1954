"""The holds page: the team's holds with their backlogs and releases, placing a hold,
and releasing one (all, a number of instances, or a rate). A successful post answers
with a redirect to the page (so reloading it does not release again); a refused one
shows the page with the reason."""

from __future__ import annotations

from typing import Any

from litestar import Request
from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery
from litestar.response import Redirect, Template

from engine.model.words import counted
from studio.definitions.service import team_versions
from studio.errors import StudioError
from studio.forms import again, posted, shown
from studio.operations import holds
from studio.principal import Principal
from studio.rendering import page, see_other
from studio.runtime import Runtime


async def holds_page(
    request: Request,
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    placed: FromQuery[str] = "",
    released: FromQuery[str] = "",
    due: FromQuery[int] = 0,
) -> Template:
    notice = f"Hold {placed} placed." if placed else ""
    if released:
        hold = await runtime.queries.hold(principal.team_id, released)
        answer = hold.released_answer(due) if hold else f"{counted(due, 'work item')} due again"
        notice = f"Hold {released}: {answer}."
    return await _render(request, principal, runtime, notice=notice)


async def _render(
    request: Request,
    principal: Principal,
    runtime: Runtime,
    notice: str = "",
    status: int = 200,
    **refusal: Any,
) -> Template:
    """The page; with ``refusal`` (``forms.again``), the place form or one hold's release
    form refused, shown again with the reason and what was posted."""
    versions = await team_versions(runtime, principal.team_id)
    names = sorted({v.definition.name for v in versions})
    names += [f"{v.definition.name}@{v.definition.version}" for v in versions]
    return page(
        request,
        "operations/holds.html",
        "holds",
        status=status,
        holds=await runtime.queries.holds(principal.team_id),
        names=names,
        notice=notice,
        **shown(refusal),
    )


async def place_hold(
    request: Request, principal: NamedDependency[Principal], runtime: NamedDependency[Runtime]
) -> Template | Redirect:
    values = await posted(request)
    try:
        hold = await holds.place(
            runtime,
            principal.team_id,
            principal.actor,
            values.get("scope"),
            values.get("definition"),
            values.get("reason"),
        )
    except StudioError as refused:  # a definition not found too: the form names it
        return await _render(request, principal, runtime, **again(refused, values, "place"))
    return see_other(f"/holds?placed={hold.hold_id}")


async def release_hold(
    request: Request,
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    hold_id: FromPath[str],
) -> Template | Redirect:
    values = await posted(request)
    try:
        count, rate = holds.form_amounts(values.get("mode"), values.get("amount"))
        released = await holds.release(
            runtime, principal.team_id, principal.actor, hold_id, values.get("reason"), count, rate
        )
    except StudioError as refused:  # released meanwhile, or gone: said on the page
        shown = again(refused, values, f"release-{hold_id}")
        return await _render(request, principal, runtime, **shown)
    return see_other(f"/holds?released={hold_id}&due={released.due}#hold-{hold_id}")
