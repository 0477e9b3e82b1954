"""Where the studio's pages read: the primary, or a replica (``WAYLINE_READ_DSN``).

The instance list, an instance's page, its history and the drill reports read through
a ``Reads``: the queries, replay cache and store of one server. Without a replica
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

from engine import Queries, Store
from engine.worker.instance_cache import RegistrySource, ReplayCache
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

    @classmethod
    def replica(cls, store: Store, registries: RegistrySource) -> Reads:
        """Reads on a replica's (read-only) store, with their own replay cache."""
        return cls(store, Queries(store), replay_cache(store, registries), registries)
