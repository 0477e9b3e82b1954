"""Where the studio's pages read: the primary, or a replica (``WAYLINE_READ_DSN``).

The instance list, an instance's page (and its live updates), its history and the
drill reports read through a ``Reads``: the queries, replay cache, store and watcher of
followed instances of one server. Without a replica
that is the primary's (``Runtime.primary``), exactly as before; with one, the app
opens a read-only store on the replica and those pages get its ``Reads`` as the
``reads`` dependency, after measuring its lag (``studio.read_lag``).

No decision is ever made from a replica, by construction rather than by care: the
replica's ``Reads`` exists only as that dependency, which only read routes ask for
(``tests/studio/test_replica_reads.py`` checks every route that changes anything),
while actions, their confirmation pages and the answers after them take the
``Runtime``, which holds the primary and nothing else. An action therefore re-reads
the instance on the primary (and the engine's Client decides from the primary's
history), whatever stale page the operator acted from.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from engine import Queries, Store
from engine.worker.instance_cache import RegistrySource, ReplayCache
from studio.instances.live import InstanceWatcher
from studio.instances.replays import Replayed, replay_cache


@dataclass(frozen=True)
class Reads:
    """One server's reads: what a read page needs of the engine."""

    store: Store
    queries: Queries
    replays: ReplayCache[Replayed]
    registries: RegistrySource
    """The primary's published definitions, which a replica's instances are pinned to
    (a version is immutable once published, so the primary's catalog is never newer in
    a way that matters to an instance the replica holds)."""
    watcher: InstanceWatcher
    """What live pages follow: on a replica, its own poll, so a page read there moves on
    as the replica does (a command's nudge reaches only the primary's)."""

    @classmethod
    def replica(cls, store: Store, registries: RegistrySource, interval: timedelta) -> Reads:
        """Reads on a replica's (read-only) store, with their own replay cache and
        watcher polling every ``interval``."""
        queries = Queries(store)
        return cls(
            store,
            queries,
            replay_cache(store, registries),
            registries,
            InstanceWatcher(queries, interval),
        )

    async def close_replica(self) -> None:
        """Stop a replica's watcher and close its store (the primary's are the Runtime's)."""
        await self.watcher.close()
        await self.store.close()
