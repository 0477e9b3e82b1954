"""``/api/instances``: list, start, one instance, its history, signals and commands.

The same services as the instance pages: what a script sees here is what the page
shows, and what it does here is audited the same way (the token's actor and the
reason given).
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from litestar import Response
from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery, Parameter

from engine.decide.operator_actions import Action
from engine.model.limits import MAX_HISTORY_PAGE_EVENTS
from studio import api_examples as examples
from studio.choices import EventKindName
from studio.errors import Invalid
from studio.instance_urls import instance_id_of
from studio.instances import detail as instance_detail
from studio.instances import history as instance_history
from studio.instances import interventions
from studio.instances import service as instances
from studio.instances.history import HistoryFilter
from studio.instances.interventions import CommandForm
from studio.instances.list_order import format_cursor
from studio.instances.schemas import (
    CommandIn,
    HistoryOut,
    InstanceDetailOut,
    InstancePageOut,
    SignalIn,
    StartIn,
    detail_out,
    history_out,
    instance_out,
)
from studio.instances.service import InstanceFilters
from studio.principal import Principal
from studio.reads import Reads
from studio.runtime import Runtime


async def list_instances(
    principal: NamedDependency[Principal],
    reads: NamedDependency[Reads],
    filters: NamedDependency[InstanceFilters],
    after: FromQuery[str | None] = None,
) -> InstancePageOut:
    """A keyset page of the team's instances (filters as on the Instances page)."""
    found = await instances.list_page(reads, principal.team_id, filters, after)
    return InstancePageOut(
        [instance_out(r, principal.team_id) for r in found.rows],
        format_cursor(found.next_cursor) or None,
    )


async def start_instance(
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    data: Annotated[StartIn, examples.START],
) -> Response[InstanceDetailOut]:
    """Start an instance (201); the same id, version and input again returns it
    unchanged (200). An id that is given must be one: an empty one would start a new
    instance under a made-up id on every retry."""
    if data.instance_id is not None and not data.instance_id.strip():
        raise Invalid.at("instance_id", EMPTY_ID)
    started, created = await instances.start(
        runtime,
        principal.team_id,
        data.definition,
        data.version,
        data.instance_id or "",
        _text(data.input),
        principal.actor,
    )
    out = await _detail(runtime.primary, principal.team_id, started.instance_id)
    return Response(out, status_code=201 if created else 200)


EMPTY_ID = (
    "the instance id is empty: give the id to start (a retry with it finds the same "
    "instance), or leave instance_id out (or null) to have one made"
)


async def _detail(reads: Reads, team_id: str, instance_id: str) -> InstanceDetailOut:
    """The instance as the API shows it, read now: from the primary after whatever was
    just done to it, so an answer shows its own action."""
    return detail_out(await instance_detail.detail(reads, team_id, instance_id), team_id)


def _text(value: Any) -> str:
    """A JSON value as the text the shared checks read ('' for none)."""
    return "" if value is None else json.dumps(value)


async def get_instance(
    principal: NamedDependency[Principal], reads: NamedDependency[Reads], ref: FromPath[str]
) -> InstanceDetailOut:
    """The replayed instance: steps, attempts with leases, waits, audit, allowed actions.

    ``ref`` is the instance id with each ``/`` written as ``~``. Read from the replica
    when the studio has one (its lag in the ``Wayline-Read-Lag`` header); the actions
    listed are what that state allowed, and an action is judged on the primary.
    """
    return await _detail(reads, principal.team_id, instance_id_of(ref))


async def get_history(
    principal: NamedDependency[Principal],
    reads: NamedDependency[Reads],
    ref: FromPath[str],
    after: Annotated[int, Parameter(ge=0)] = 0,
    kind: FromQuery[list[EventKindName] | None] = None,
    step: FromQuery[str] = "",
    limit: Annotated[int, Parameter(ge=1, le=MAX_HISTORY_PAGE_EVENTS)] = MAX_HISTORY_PAGE_EVENTS,
) -> HistoryOut:
    """One page of events after sequence ``after``, narrowed by kinds and step.

    ``after`` is a position of this instance's history, from 0 (its first page) to its
    last event (the end: no newer event yet); past that (a cursor copied from a longer
    instance) is 422, its problem at ``after`` saying how many events there are."""
    chosen = HistoryFilter(tuple(kind or ()), step, after, limit)
    page = await instance_history.history_page(
        reads, principal.team_id, instance_id_of(ref), chosen
    )
    return history_out(page, principal.team_id)


async def send_signal(
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    ref: FromPath[str],
    data: Annotated[SignalIn, examples.SIGNAL],
) -> InstanceDetailOut:
    """Deliver a signal to a signal step (or a code-first run's inbox), audited like a
    command with the caller and ``reason``. A retry with the same ``signal_id`` acts once
    (the id used for another action, by another caller or with another reason is a
    conflict); answers the instance after."""
    instance_id = instance_id_of(ref)
    signal = interventions.CommandForm(
        Action.SIGNAL.value, data.reason, data.step, data.signal_id or "", _text(data.payload)
    )
    await interventions.send_signal(
        runtime, principal.team_id, principal.actor, instance_id, signal
    )
    return await _detail(runtime.primary, principal.team_id, instance_id)


async def command(
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    ref: FromPath[str],
    data: Annotated[CommandIn, examples.COMMAND],
) -> InstanceDetailOut:
    """An audited operator command (the instance's ``actions`` list says which apply)."""
    instance_id = instance_id_of(ref)
    form = CommandForm(
        action=data.action,
        reason=data.reason,
        step=data.step or "",
        command_id=data.command_id or "",
        payload=_text(data.payload),
        resolution=data.resolution or "",
        result=_text(data.result),
        code=data.code or "",
        evidence=_text(data.evidence),
    )
    await interventions.command(runtime, principal.team_id, principal.actor, instance_id, form)
    return await _detail(runtime.primary, principal.team_id, instance_id)
