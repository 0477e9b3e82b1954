"""Workers as the studio shows them: who is alive, what they run, which leases they hold.

The worker registry is shared by every team (workers are infrastructure), but the
leases shown are the team's own work only: another team's instance ids never appear.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from engine.api.queries import Queries, WorkerInfo, WorkRow

TARGET_FRESHNESS = timedelta(minutes=15)
"""Targets count as advertised while their worker spoke within this long."""
LIVE_WITHIN = timedelta(seconds=30)
"""A worker that sent a heartbeat this recently is shown as live (it beats every 5 s)."""


@dataclass(frozen=True)
class WorkerView:
    info: WorkerInfo
    leases: list[WorkRow]
    now: datetime

    @property
    def live(self) -> bool:
        """Beating, and not stopped: a worker stopped cleanly (``stopped_at``) is not
        live however fresh its last heartbeat, as its targets no longer count."""
        return self.info.stopped_at is None and self.now - self.info.heartbeat_at < LIVE_WITHIN

    @property
    def silent_for(self) -> timedelta:
        return max(self.now - self.info.heartbeat_at, timedelta(0))


async def worker_views(queries: Queries, team: str) -> list[WorkerView]:
    """Registered workers, most recently heard first, each with the team's leases."""
    found = await queries.workers()
    leases = await queries.held_leases([w.worker_id for w in found], tenant=team)
    by_owner: dict[str, list[WorkRow]] = {}
    for lease in leases:
        by_owner.setdefault(lease.lease_owner, []).append(lease)
    now = queries.now()
    return [WorkerView(w, by_owner.get(w.worker_id, []), now) for w in found]


async def known_targets(queries: Queries, freshness: timedelta = TARGET_FRESHNESS) -> list[str]:
    """Activity targets that running workers can execute, for offering and flagging."""
    return await queries.advertised_targets(queries.now() - freshness)
