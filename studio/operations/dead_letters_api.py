"""``/api/dead-letters``: the team's dead letters with their groups, and resolving them."""

from __future__ import annotations

from typing import Annotated

from litestar.di import NamedDependency
from litestar.params import FromQuery

from engine.model.identifiers import team_instance_id
from studio import api_examples as examples
from studio.instances.interventions import new_id
from studio.instances.service import find_rows
from studio.operations import dead_letters
from studio.operations.dead_letters import Fence, Resolution
from studio.operations.schemas import (
    DeadLetterPageOut,
    ItemResultOut,
    ResolveIn,
    dead_letter_out,
    group_out,
    result_out,
)
from studio.principal import Principal
from studio.runtime import Runtime


async def list_dead_letters(
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    code: FromQuery[str] = "",
    after: FromQuery[str | None] = None,
) -> DeadLetterPageOut:
    found = await dead_letters.page(runtime, principal.team_id, code, after)
    return DeadLetterPageOut(
        [dead_letter_out(v, principal.team_id) for v in found.items],
        [group_out(g) for g in found.groups],
        found.next_cursor or None,
    )


async def resolve(
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    data: Annotated[ResolveIn, examples.RESOLVE],
) -> list[ItemResultOut]:
    """Retry or discard each item; one result per item (this answers 200 even when some
    items were refused: read each ``ok``)."""
    resolution = Resolution(
        data.action, data.reason, data.command_id or new_id(), data.retry_in, data.deadline_in
    )
    dead_letters.check_item_count(len(data.items))
    stored = await _stored_ids(runtime, principal.team_id, {i.instance_id for i in data.items})
    fences = [Fence(stored[i.instance_id], i.work_id, i.token) for i in data.items]
    results = await dead_letters.resolve(
        runtime, principal.team_id, principal.actor, fences, resolution
    )
    return [result_out(r, principal.team_id) for r in results]


async def _stored_ids(runtime: Runtime, team: str, local_ids: set[str]) -> dict[str, str]:
    """The stored id of each instance id as the team's list shows it (``find_rows``, on
    the primary: the resolution acts on it); one the team has not is taken as its own
    prefixed id, whose dead letters are then not found."""
    rows = await find_rows(runtime.primary, team, local_ids)
    return {
        local: row.instance_id if row is not None else team_instance_id(team, local)
        for local, row in rows.items()
    }
