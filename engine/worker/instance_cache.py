"""Replayed instances kept in memory and advanced incrementally: the one replay cache.

A reader replays an instance once, then folds in only the events committed since (its
own, which it already holds, or others' read from the store after the cached position),
so following a running instance costs the events it appends and nothing more. Entries
are evicted least-recently-used. The registry is reloaded from the catalog when history
names a version this process has not seen yet.

What an entry holds is the reader's choice, through a ``Folding``: the worker and the
client keep the replayed ``Instance`` only (``InstanceCache``); the studio keeps, beside
it, every attempt and the latest events, folded from the same read of history.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from engine.model.definitions import DefinitionRef
from engine.model.errors import ReplayRejected
from engine.model.events import Event
from engine.model.instance import Instance
from engine.model.limits import MAX_INSPECTION_HISTORY_EVENTS
from engine.model.registry import Registry
from engine.replay.fold import apply
from engine.store import catalog, reads
from engine.store.errors import HistoryLimitExceeded
from engine.store.store import Store

DEFAULT_CACHE_ENTRIES = 10_000

Entry = TypeVar("Entry")
Events = tuple[Event, ...]
"""One page of history, in order."""


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

    async def holding(self, ref: DefinitionRef) -> Registry:
        """The registry, read again when it lacks ``ref``: a version published after it
        was read (by another process: a code run's spawn of a workflow published once
        its dead letter showed it missing) is still found."""
        registry = await self.get()
        if registry.get(ref.name, ref.version) is None:
            registry = await self.refresh()
        return registry


class Folding(Protocol[Entry]):
    """How an entry is built from history, a page of events at a time."""

    def fold(self, registry: Registry, entry: Entry | None, events: Events) -> Entry | None:
        """``entry`` (None: nothing replayed yet) with ``events`` folded in."""
        ...

    def state(self, entry: Entry) -> Instance:
        """The replayed instance the entry holds (its id and position key the cache)."""
        ...

    resume: Callable[[Instance], Entry] | None
    """The entry of a snapshot's state, to fold only the events after it; None when an
    entry needs every event (the studio's log of every attempt)."""


class StateOnly:
    """The replayed instance and nothing else: what deciding the next step needs, and
    what a snapshot holds, so a cold load starts from the newest one."""

    @staticmethod
    def fold(registry: Registry, entry: Instance | None, events: Events) -> Instance | None:
        for event in events:
            entry = apply(registry, entry, event)
        return entry

    @staticmethod
    def state(entry: Instance) -> Instance:
        return entry

    @staticmethod
    def resume(state: Instance) -> Instance:
        """A snapshot's state is the whole entry."""
        return state


class ReplayCache(Generic[Entry]):
    """LRU cache of replayed entries, advanced from the store by keyset pages."""

    def __init__(
        self,
        store: Store,
        registries: RegistrySource,
        folding: Folding[Entry],
        max_entries: int = DEFAULT_CACHE_ENTRIES,
    ) -> None:
        self.store = store
        self.registries = registries
        self.folding = folding
        self.max_entries = max_entries
        self.events_read = 0
        """Events read from history so far (for tests and the benchmark's profile)."""
        self.snapshots_read = 0
        """Snapshots a cold load started from so far (for tests and the benchmark)."""
        self._entries: OrderedDict[str, Entry] = OrderedDict()
        self._locks: dict[str, asyncio.Lock] = {}

    def cached(self, instance_id: str) -> Entry | None:
        return self._entries.get(instance_id)

    async def load(self, instance_id: str, at_least: int = 0) -> Entry:
        """The entry at the instance's latest committed position.

        With ``at_least`` (a sequence known to exist, e.g. from the instance row), a
        cached entry that far along is returned without reading the store at all. Loads
        of one instance take turns, so concurrent readers share one read of history.
        """
        entry = self._entries.get(instance_id)
        if entry is not None and at_least and self.folding.state(entry).sequence >= at_least:
            self._entries.move_to_end(instance_id)
            return entry
        self._prune_locks()
        async with self._locks.setdefault(instance_id, asyncio.Lock()):
            try:
                return await self._advance(instance_id, await self.registries.get())
            except ReplayRejected:  # a version published after the registry was read
                self._entries.pop(instance_id, None)
                return await self._advance(instance_id, await self.registries.refresh())

    def put(self, entry: Entry) -> None:
        """Remember ``entry`` (e.g. the state a just-committed draft ended in), unless
        the cache already holds that instance further along."""
        state = self.folding.state(entry)
        current = self._entries.get(state.instance_id)
        if current is not None and self.folding.state(current).sequence > state.sequence:
            return
        self._entries[state.instance_id] = entry
        self._entries.move_to_end(state.instance_id)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def forget(self, instance_id: str) -> None:
        self._entries.pop(instance_id, None)

    def _prune_locks(self) -> None:
        """Forget idle locks of evicted instances (one lock per instance being read)."""
        if len(self._locks) > 2 * self.max_entries:
            for key in [k for k, lock in self._locks.items() if not lock.locked()]:
                if key not in self._entries:
                    del self._locks[key]

    async def _advance(self, instance_id: str, registry: Registry) -> Entry:
        entry = self._entries.get(instance_id)
        if entry is None:
            entry, page = await self._opened(instance_id, registry)
        else:
            after = self.folding.state(entry).sequence
            page = await reads.history_page(self.store, instance_id, after)
        while True:
            self.events_read += len(page.events)
            entry = self.folding.fold(registry, entry, page.events)
            if entry is not None and (
                self.folding.state(entry).sequence > MAX_INSPECTION_HISTORY_EVENTS
            ):
                raise HistoryLimitExceeded(
                    f"instance {instance_id} has more than {MAX_INSPECTION_HISTORY_EVENTS} "
                    "events; its history can be read but not replayed"
                )
            if page.next_after is None:
                break
            page = await reads.history_page(self.store, instance_id, page.next_after)
        assert entry is not None
        self.put(entry)
        return entry

    async def _opened(
        self, instance_id: str, registry: Registry
    ) -> tuple[Entry | None, reads.HistoryPage]:
        """A cold load's start: the entry of the instance's newest usable snapshot, when
        the folding can start from one (``Folding.resume``), and the first page of
        history after it, read together (``reads.opening``); else no entry and the
        first page of the whole history."""
        resume = self.folding.resume
        if resume is None:
            return None, await reads.history_page(self.store, instance_id)
        opened = await reads.opening(self.store, registry, instance_id)
        if opened.state is None:
            return None, opened.page
        self.snapshots_read += 1
        return resume(opened.state), opened.page


class InstanceCache(ReplayCache[Instance]):
    """The replay cache of the worker and the client: replayed instances only."""

    def __init__(
        self, store: Store, registries: RegistrySource, max_entries: int = DEFAULT_CACHE_ENTRIES
    ) -> None:
        super().__init__(store, registries, StateOnly(), max_entries)
