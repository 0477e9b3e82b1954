"""Workers as the studio shows them: who is alive, what they run, which leases they hold.

The worker registry is shared by every team (workers are infrastructure), but the
leases shown are the team's own work only: another team's instance ids never appear.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from engine.store import work_views, workers
from engine.store.store import Store
from engine.store.work_views import WorkRow
from engine.store.workers import WorkerInfo

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
        return self.now - self.info.heartbeat_at < LIVE_WITHIN

    @property
    def silent_for(self) -> timedelta:
        return max(self.now - self.info.heartbeat_at, timedelta(0))


async def list_workers(store: Store) -> list[WorkerInfo]:
    return await workers.list_workers(store)


async def worker_views(store: Store, team: str) -> list[WorkerView]:
    """Registered workers, most recently heard first, each with the team's leases."""
    found = await workers.list_workers(store)
    leases = await work_views.held_leases(store, [w.worker_id for w in found], tenant=team)
    by_owner: dict[str, list[WorkRow]] = {}
    for lease in leases:
        by_owner.setdefault(lease.lease_owner, []).append(lease)
    now = store.now()
    return [WorkerView(w, by_owner.get(w.worker_id, []), now) for w in found]


async def known_targets(store: Store, freshness: timedelta = TARGET_FRESHNESS) -> list[str]:
    """Activity targets that running workers can execute, for offering and flagging."""
    return await workers.advertised_targets(store, store.now() - freshness)
