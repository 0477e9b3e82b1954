"""Replayed instances the studio shows, kept in memory and advanced incrementally.

An instance page needs the replayed state (status, progress per step, audit), every
attempt (``studio.attempts``) and, for live pages, the events that arrived since the
page was drawn. All three come from one read of history: the cache replays an
instance once, then reads only the events after its cached position, so following a
running instance costs the events it appends and nothing more. The engine's own
``InstanceCache`` keeps the state only, which is why the studio folds its own.
Entries are evicted least-recently-used; the registry is reloaded when history names
a version published after it was read.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass

from engine.errors import ReplayRejected
from engine.events import Event
from engine.instance import Instance
from engine.instance_cache import RegistrySource
from engine.limits import MAX_INSPECTION_HISTORY_EVENTS
from engine.registry import Registry
from engine.replay import apply
from engine.store import reads
from engine.store.errors import HistoryLimitExceeded
from engine.store.store import Store
from studio import attempts
from studio.attempts import AttemptLog

DEFAULT_ENTRIES = 1_000
RECENT_EVENTS = 200
"""Events kept per entry so that every live page can be sent what it has not seen."""


@dataclass(frozen=True)
class Replayed:
    """An instance as replayed up to ``state.sequence``."""

    state: Instance
    attempts: AttemptLog
    recent: tuple[Event, ...]

    def events_after(self, sequence: int) -> tuple[Event, ...] | None:
        """The events after ``sequence``, or None when they are no longer all kept."""
        if sequence >= self.state.sequence:
            return ()
        newer = tuple(e for e in self.recent if e.sequence > sequence)
        if not newer or newer[0].sequence != sequence + 1:
            return None
        return newer


class ReplayCache:
    """LRU of replayed instances, advanced from the store by keyset pages."""

    def __init__(
        self, store: Store, registries: RegistrySource, max_entries: int = DEFAULT_ENTRIES
    ) -> None:
        self.store = store
        self.registries = registries
        self.max_entries = max_entries
        self.events_read = 0
        """Events read from history so far (for tests and curiosity)."""
        self._entries: OrderedDict[str, Replayed] = OrderedDict()
        self._locks: dict[str, asyncio.Lock] = {}

    def cached(self, instance_id: str) -> Replayed | None:
        return self._entries.get(instance_id)

    async def load(self, instance_id: str, at_least: int = 0) -> Replayed:
        """The instance at its latest committed position.

        With ``at_least`` (a sequence known to exist, e.g. from the instance row), a
        cached entry that far along is returned without reading the store at all.
        """
        entry = self._entries.get(instance_id)
        if entry is not None and at_least and entry.state.sequence >= at_least:
            self._entries.move_to_end(instance_id)
            return entry
        self._prune_locks()
        async with self._locks.setdefault(instance_id, asyncio.Lock()):
            try:
                return await self._advance(instance_id, await self.registries.get())
            except ReplayRejected:  # a version published after the registry was read
                self._entries.pop(instance_id, None)
                return await self._advance(instance_id, await self.registries.refresh())

    def _prune_locks(self) -> None:
        """Forget idle locks of evicted instances (one lock per instance being read)."""
        if len(self._locks) > 2 * self.max_entries:
            for key in [k for k, lock in self._locks.items() if not lock.locked()]:
                if key not in self._entries:
                    del self._locks[key]

    async def _advance(self, instance_id: str, registry: Registry) -> Replayed:
        entry = self._entries.get(instance_id)
        state = entry.state if entry else None
        log = entry.attempts if entry else attempts.EMPTY
        recent = list(entry.recent) if entry else []
        after = state.sequence if state else 0
        while True:
            page = await reads.history_page(self.store, instance_id, after)
            self.events_read += len(page.events)
            for event in page.events:
                state = apply(registry, state, event)
                log = attempts.fold(log, event)
            recent = [*recent, *page.events][-RECENT_EVENTS:]
            if state is not None and state.sequence > MAX_INSPECTION_HISTORY_EVENTS:
                raise HistoryLimitExceeded(
                    f"instance {instance_id} has more than {MAX_INSPECTION_HISTORY_EVENTS} "
                    "events; the studio shows its history but cannot replay it"
                )
            if not page.has_more:
                break
            after = page.events[-1].sequence
        assert state is not None
        fresh = Replayed(state, log, tuple(recent))
        self._put(fresh)
        return fresh

    def _put(self, entry: Replayed) -> None:
        current = self._entries.get(entry.state.instance_id)
        if current is not None and current.state.sequence > entry.state.sequence:
            return
        self._entries[entry.state.instance_id] = entry
        self._entries.move_to_end(entry.state.instance_id)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
