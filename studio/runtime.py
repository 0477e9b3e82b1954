"""What the studio's services share while the app runs: one place to reach the engine.

The app builds one Runtime at startup on its store: an engine Client (starts, signals,
operator commands, publishing, resolving dead letters, with its own instance cache),
the engine's Queries (every read of the engine's tables), the replay cache the pages
read, the watcher that live pages follow, and the drill jobs running in the background.
Pages and the API receive it by dependency injection (``studio.dependencies``), so both
act through the same objects. A Runtime holds the primary only: a read replica's
``Reads`` is another dependency (``studio.reads``), never reachable from here.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine import Client, Queries, Store
from engine.worker.instance_cache import ReplayCache
from studio.drills.jobs import DrillJobs
from studio.instances.live import InstanceWatcher
from studio.instances.replays import Replayed, replay_cache
from studio.reads import Reads
from studio.settings import StudioSettings


@dataclass
class Runtime:
    """The parts the module's docstring names, built once (``Runtime.on``) and shared by
    every request, so caches and the watcher are not rebuilt per page."""

    store: Store
    client: Client
    queries: Queries
    replays: ReplayCache[Replayed]
    watcher: InstanceWatcher
    drills: DrillJobs
    settings: StudioSettings

    @classmethod
    def on(cls, store: Store, settings: StudioSettings) -> Runtime:
        client = Client(store)
        queries = Queries(store)
        return cls(
            store=store,
            client=client,
            queries=queries,
            replays=replay_cache(store, client.registries),
            watcher=InstanceWatcher(queries, settings.poll_interval),
            drills=DrillJobs(store, settings),
            settings=settings,
        )

    @property
    def primary(self) -> Reads:
        """Reads on the primary: what an action re-reads before it acts, and what every
        page reads when there is no replica."""
        return Reads(self.store, self.queries, self.replays, self.client.registries, self.watcher)

    async def close(self) -> None:
        await self.watcher.close()
        await self.drills.close()
