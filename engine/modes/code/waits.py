"""Resolving a code-first run's waits: pure, so whoever commits an arrival resolves it.

A wait needs no code to resolve: what it awaits is in history. So the client that
records a signal, the worker that records a spawned run's end, and the worker whose
decision is due at a wait's timeout all resolve waits in the same transaction
(``wait_resolved``), and only then does the code run again.

- ``wait_signal`` takes the oldest unconsumed signal of its name, or times out;
- ``race`` takes the first to arrive of what it awaits (the earliest persisted signal
  in the inbox, a spawned run that ended; ties by argument order), or times out as a
  whole; the losers' signals stay in the inbox, consumable by a later wait;
- ``all`` takes its entries in argument order, each with the whole timeout from when
  the entry before it resolved: an entry that times out gives None and the next begins.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from engine.model.canonical import canonical_json
from engine.model.events import EventKind
from engine.model.instance import Instance, WaitProgress
from engine.model.transitions import Draft
from engine.modes.code.fold import BY_SIGNAL, BY_SPAWN, BY_TIMEOUT, ENDED_CHILD
from engine.modes.code.journal import Verb


@dataclass(frozen=True)
class Arrival:
    """Something a wait's entry can take: a signal in the inbox or a spawned run's end."""

    name: str
    by: str
    sequence: int
    signal_id: str = ""


MAX_RESOLUTIONS = 40
"""Wait entries one transition resolves (an ``all`` over hundreds of signals already in
the inbox), so it stays within ``MAX_TRANSITION_EVENTS``: ``resolve`` says when it
stopped there, and the next decision goes on."""


def resolve(draft: Draft) -> bool:
    """Resolve every open wait whose entries have arrived or timed out, oldest first,
    at most ``MAX_RESOLUTIONS``; whether some were left for the next decision."""
    state = draft.state
    assert state is not None
    budget = MAX_RESOLUTIONS - sum(e.kind is EventKind.WAIT_RESOLVED for e in draft.events)
    for key in [w.key for w in state.waits.values() if not w.done]:
        while budget > 0 and _resolve_next(draft, key):
            budget -= 1
        if budget <= 0:
            return True
    return False


def _resolve_next(draft: Draft, key: str) -> bool:
    """Resolve the next entry of wait ``key`` if it can be; whether it was."""
    state = draft.state
    assert state is not None
    wait = state.waits[key]
    if wait.done:
        return False
    index = len(wait.resolved)
    names = wait.on if wait.verb == Verb.RACE else (wait.on[index],)
    found = [a for name in names if (a := arrival(state, wait, name)) is not None]
    if found:
        first = min(found, key=lambda a: (a.sequence, names.index(a.name)))
        _record(draft, wait, index, first.name, first.by, first.signal_id)
        return True
    if wait.due_at is not None and draft.now >= wait.due_at:
        _record(draft, wait, index, names[0], BY_TIMEOUT)
        return True
    return False


def arrival(state: Instance, wait: WaitProgress, name: str) -> Arrival | None:
    """What ``name`` offers ``wait`` now: the oldest unconsumed signal of that name, or
    the end of the spawned run whose handle it is (recorded before the wait)."""
    spawn = next((r for r in state.journal if r.key == name and r.verb == Verb.SPAWN), None)
    if spawn is not None:
        child = state.children.get(name)
        if child is None or child.status not in ENDED_CHILD:
            return None
        return Arrival(name, BY_SPAWN, wait.sequence)
    for signal in state.inbox:
        if signal.name == name and not signal.consumed_by:
            return Arrival(name, BY_SIGNAL, signal.sequence, signal.signal_id)
    return None


def _record(
    draft: Draft, wait: WaitProgress, index: int, name: str, by: str, signal_id: str = ""
) -> None:
    more = wait.verb == Verb.ALL and index + 1 < len(wait.on)
    due: datetime | None = None
    if more and wait.timeout is not None:
        due = draft.now + wait.timeout
    data = {"index": index, "by": by, "name": name}
    if signal_id:
        data["signal_id"] = signal_id
    draft.add(EventKind.WAIT_RESOLVED, step=wait.key, data=canonical_json(data), due_at=due)
