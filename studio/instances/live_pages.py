"""The live stream of an instance page (server-sent events).

The page opens ``/instances/<ref>/live`` with the sequence it was drawn at. The stream
follows the instance through the shared watcher (``studio.instances.live``): while nothing
happens it costs one shared row probe per interval and sends a keep-alive comment now
and then; when the instance moves, it reads the new events (once, through the replay
cache) and sends one ``update``: the classes and titles of the graph's nodes, the
parts of the page whose digest changed, and the new history rows. When the instance
has ended it sends ``end`` and stops, and the page closes the stream. A stream lasts
at most ``live_stream_limit``; the browser then reconnects with ``Last-Event-ID`` and
carries on from where it was.

Before each update and each keep-alive the stream asks again whether its credentials
still allow reading the instance (``studio.access.still_allowed``): once the session
is signed out or ended by a password change, the token revoked, or the person removed
from the team or demoted out of it, it sends ``end`` with ``ACCESS_ENDED`` and stops,
and a reconnect is refused by the guard. Before, a page left open went on receiving the
instance's updates (its payloads, history and audit) after its session had ended.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from litestar import Request
from litestar.di import NamedDependency
from litestar.params import FromQuery
from litestar.response import ServerSentEvent, ServerSentEventMessage

from engine.api.queries import InstanceRow
from studio.access import still_allowed
from studio.instances import detail as instance_detail
from studio.instances import history as instance_history
from studio.instances.replays import Replayed
from studio.instances.sections import node_updates, render_sections
from studio.reads import Reads
from studio.rendering import fragment
from studio.roles import Access
from studio.runtime import Runtime
from studio.settings import StudioSettings

KEEP_ALIVE_SECONDS = 15.0
RECONNECT_MS = 1_000
ENDED = "ended"
"""The data of the ``end`` event of an instance that has ended (or of live updates off)."""
ACCESS_ENDED = "access-ended"
"""The data of the ``end`` event of a stream whose credentials no longer allow reading
the instance; the page says to reload (which leads to the sign-in form)."""


async def live(
    request: Request,
    runtime: NamedDependency[Runtime],
    reads: NamedDependency[Reads],
    row: NamedDependency[InstanceRow],
    after: FromQuery[int] = 0,
) -> ServerSentEvent:
    resumed = request.headers.get("last-event-id", "")
    known = int(resumed) if resumed.isdigit() else after
    stream = _stream(request, runtime.settings, reads, row, known)
    return ServerSentEvent(stream, retry_duration=RECONNECT_MS)


async def _stream(
    request: Request, settings: StudioSettings, reads: Reads, row: InstanceRow, known: int
) -> AsyncIterator[ServerSentEventMessage]:
    if not settings.live_interval or (row.status.terminal and known >= row.sequence):
        yield ServerSentEventMessage(event="end", data=ENDED)
        return
    loop = asyncio.get_running_loop()
    deadline = loop.time() + settings.live_stream_limit.total_seconds()
    sent: dict[str, str] = {}
    async with reads.watcher.follow(row.instance_id, known) as follower:
        while (remaining := deadline - loop.time()) > 0:
            moved = await follower.wait(min(KEEP_ALIVE_SECONDS, remaining))
            if not await still_allowed(request, row.tenant_id, Access.VIEWER):
                yield ServerSentEventMessage(event="end", data=ACCESS_ENDED)
                return
            if not moved:
                yield ServerSentEventMessage(data=None, comment="waiting")
                continue
            entry = await reads.replays.load(row.instance_id, at_least=follower.known)
            update = await _update(request, reads, row, entry, known, sent)
            known = entry.state.sequence
            follower.known = max(follower.known, known)
            yield ServerSentEventMessage(event="update", id=known, data=json.dumps(update))
            if entry.state.status.terminal:
                yield ServerSentEventMessage(event="end", data=ENDED)
                return


async def _update(
    request: Request,
    reads: Reads,
    row: InstanceRow,
    entry: Replayed,
    known: int,
    sent: dict[str, str],
) -> dict[str, Any]:
    """What changed since ``known``: node classes, changed parts, new history rows."""
    detail = await instance_detail.detail_of(reads, row, entry)
    parts = {}
    for section in render_sections(request, detail).values():
        if sent.get(section.element_id) != section.digest:
            parts[section.element_id] = {"digest": section.digest, "html": str(section.html)}
            sent[section.element_id] = section.digest
    events = entry.events_after(known)
    rows = None
    if events is not None:
        rows = [
            str(fragment(request, "instances/_event_row.html", e=view, instance_id=row.instance_id))
            for view in instance_history.event_views(events, row.tenant_id)
        ]
    return {
        "sequence": entry.state.sequence,
        "status": entry.state.status.label,
        "terminal": entry.state.status.terminal,
        "nodes": node_updates(detail),
        "parts": parts,
        "events": rows,
    }
