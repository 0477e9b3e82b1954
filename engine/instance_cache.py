"""Replayed instances kept in memory and advanced incrementally.

A worker replays an instance once, then folds in only the events committed since
(its own, which it already holds, or others' read from the store after the cached
position). Entries are evicted least-recently-used. The registry is reloaded from the
catalog when history names a version this process has not seen yet.
"""

from __future__ import annotations

from collections import OrderedDict

from engine.errors import ReplayRejected
from engine.instance import Instance
from engine.limits import MAX_INSPECTION_HISTORY_EVENTS
from engine.registry import Registry
from engine.replay import apply
from engine.store import catalog, reads
from engine.store.errors import HistoryLimitExceeded
from engine.store.store import Store

DEFAULT_CACHE_ENTRIES = 10_000


class RegistrySource:
    """The published registry, reloaded on demand when a new version shows up."""

    def __init__(self, store: Store, registry: Registry | None = None) -> None:
        self.store = store
        self.registry = registry

    async def get(self) -> Registry:
        if self.registry is None:
            self.registry = await catalog.load_registry(self.store)
        return self.registry

    async def refresh(self) -> Registry:
        self.registry = await catalog.load_registry(self.store)
        return self.registry


class InstanceCache:
    """LRU cache of replayed instances, advanced from the store by keyset pages."""

    def __init__(
        self, store: Store, registries: RegistrySource, max_entries: int = DEFAULT_CACHE_ENTRIES
    ) -> None:
        self.store = store
        self.registries = registries
        self.max_entries = max_entries
        self._entries: OrderedDict[str, Instance] = OrderedDict()

    async def load(self, instance_id: str) -> Instance:
        """The instance at its latest committed position."""
        try:
            return await self._advance(instance_id, await self.registries.get())
        except ReplayRejected:  # perhaps a version published after the registry was loaded
            return await self._advance(instance_id, await self.registries.refresh())

    async def _advance(self, instance_id: str, registry: Registry) -> Instance:
        state = self._entries.get(instance_id)
        after = state.sequence if state else 0
        while True:
            page = await reads.history_page(self.store, instance_id, after)
            for event in page.events:
                state = apply(registry, state, event)
            if state is not None and state.sequence > MAX_INSPECTION_HISTORY_EVENTS:
                raise HistoryLimitExceeded(f"instance {instance_id} is too long to replay")
            if not page.has_more:
                break
            after = page.events[-1].sequence
        assert state is not None
        self.put(state)
        return state

    def put(self, instance: Instance) -> None:
        """Remember ``instance`` (e.g. the state a just-committed draft ended in)."""
        current = self._entries.get(instance.instance_id)
        if current is not None and current.sequence > instance.sequence:
            return
        self._entries[instance.instance_id] = instance
        self._entries.move_to_end(instance.instance_id)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def forget(self, instance_id: str) -> None:
        self._entries.pop(instance_id, None)
