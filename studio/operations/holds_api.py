"""``/api/holds``: the team's holds with their backlogs, placing one, releasing one."""

from __future__ import annotations

from typing import Annotated

from litestar.di import NamedDependency
from litestar.params import FromPath

from studio import api_examples as examples
from studio.errors import Invalid
from studio.operations import holds
from studio.operations.hold_schemas import HoldIn, HoldOut, ReleasedOut, ReleaseIn, hold_out
from studio.principal import Principal
from studio.runtime import Runtime


async def list_holds(
    principal: NamedDependency[Principal], runtime: NamedDependency[Runtime]
) -> list[HoldOut]:
    """The team's holds, those in force first, each with its backlog and releases."""
    return [hold_out(h) for h in await runtime.queries.holds(principal.team_id)]


async def place_hold(
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    data: Annotated[HoldIn, examples.HOLD],
) -> HoldOut:
    if data.scope == "team" and data.definition.strip():  # which was meant cannot be told
        message = "a hold of the whole team names no definition: send one or the other"
        raise Invalid(message, [{"path": "definition", "message": message}])
    hold = await holds.place(
        runtime, principal.team_id, principal.actor, data.scope, data.definition, data.reason
    )
    return hold_out(hold)


async def release_hold(
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    hold_id: FromPath[str],
    data: Annotated[ReleaseIn, examples.RELEASE],
) -> ReleasedOut:
    released = await holds.release(
        runtime, principal.team_id, principal.actor, hold_id, data.reason, data.count, data.rate
    )
    return ReleasedOut(hold_out(released.hold), released.due)
