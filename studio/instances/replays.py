"""What the studio keeps of a replayed instance, in the engine's replay cache.

An instance page needs the replayed state (status, progress per step, audit), every
attempt (``studio.instances.attempts``), a machine's walk (``studio.machines.walk``)
and, for live pages, the events that arrived since the page was drawn. All of them
come from one read of history: the engine's ``ReplayCache`` replays an instance once
and then reads only the events after its cached position; this module's ``Folding``
folds each event into all of them at once.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine import Store
from engine.model.events import Event
from engine.model.instance import Instance
from engine.model.registry import Registry
from engine.replay.fold import apply
from engine.worker.instance_cache import Events, RegistrySource, ReplayCache
from studio.instances import attempts
from studio.instances.attempts import AttemptLog
from studio.machines import walk as machine_walk
from studio.machines.walk import Walk

DEFAULT_ENTRIES = 1_000
RECENT_EVENTS = 200
"""Events kept per entry so that every live page can be sent what it has not seen."""


@dataclass(frozen=True)
class Replayed:
    """An instance as replayed up to ``state.sequence``."""

    state: Instance
    attempts: AttemptLog
    recent: tuple[Event, ...]
    walk: Walk = machine_walk.EMPTY
    """A machine's edges taken and failed advances (empty for other modes)."""

    def events_after(self, sequence: int) -> tuple[Event, ...] | None:
        """The events after ``sequence``, or None when they are no longer all kept."""
        if sequence >= self.state.sequence:
            return ()
        newer = tuple(e for e in self.recent if e.sequence > sequence)
        if not newer or newer[0].sequence != sequence + 1:
            return None
        return newer


class StudioFolding:
    """Folds each page of events into the state, the attempt log and the recent events.

    It never starts from a snapshot of the state (``resume``): the attempt log and a
    machine's walk are folded from every event, which a snapshot does not keep."""

    resume = None

    @staticmethod
    def fold(registry: Registry, entry: Replayed | None, events: Events) -> Replayed | None:
        state = entry.state if entry else None
        log = entry.attempts if entry else attempts.EMPTY
        walk = entry.walk if entry else machine_walk.EMPTY
        for event in events:
            before, state = state, apply(registry, state, event)
            log = attempts.fold(log, event)
            walk = machine_walk.fold(walk, before, event)
        if state is None:
            return None
        recent = (*entry.recent, *events) if entry else tuple(events)
        return Replayed(state, log, recent[-RECENT_EVENTS:], walk)

    @staticmethod
    def state(entry: Replayed) -> Instance:
        return entry.state


def replay_cache(store: Store, registries: RegistrySource) -> ReplayCache[Replayed]:
    """The studio's cache: the engine's, holding ``Replayed`` entries."""
    return ReplayCache(store, registries, StudioFolding(), DEFAULT_ENTRIES)
