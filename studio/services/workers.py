"""Workers as the studio shows them, and the activity targets they advertise."""

from __future__ import annotations

from datetime import timedelta

from engine.store import workers
from engine.store.store import Store
from engine.store.workers import WorkerInfo

TARGET_FRESHNESS = timedelta(minutes=15)
"""Targets count as advertised while their worker spoke within this long."""


async def list_workers(store: Store) -> list[WorkerInfo]:
    return await workers.list_workers(store)


async def known_targets(store: Store, freshness: timedelta = TARGET_FRESHNESS) -> list[str]:
    """Activity targets that running workers can execute, for offering and flagging."""
    return await workers.advertised_targets(store, store.now() - freshness)
