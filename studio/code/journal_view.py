"""A code-first run's journal as its page shows it.

The journal is the run's memory: every durable verb its code reached, in order, and
what each recorded. Replay gives it (``Instance.journal``, resolved by
``engine.modes.code.fold.entries``); this module adds what an operator reads beside
it: each step's ``step_id`` and latest attempt (an unknown outcome shown as UNKNOWN,
never as a failure), the waits still open with what they await and until when (none
once the run has ended or unwinds: a wait it left is cancelled, with why), and the
signals nobody consumed, set aside rather than lost. It also colours the outline: each
outline node takes the state of the latest journal entry it stands for, and the nodes
of open entries are where the run stands.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from engine.model.description import ending
from engine.model.fan_out import FanOut
from engine.model.instance import AttemptStatus, InboxSignal, Instance, JournalRecord
from engine.modes.code.cursor import StopKind
from engine.modes.code.effects import (
    SPAWN_NOT_FOUND,
    SUCCESSOR_ID_TAKEN,
    WORKFLOW_CODE_DIFFERS,
    WORKFLOW_CODE_MISSING,
)
from engine.modes.code.fold import entries
from engine.modes.code.journal import Entry, EntryState, Verb
from studio.code.outline_graph import verb_name
from studio.formats import format_when
from studio.instances.step_states import ACTIVITY_STATES, CHILD_STATES, StepState

VALUE_SHOWN = 80
"""Characters of a recorded value the journal table shows (the history has it all)."""
A = AttemptStatus


@dataclass(frozen=True)
class JournalRow:
    """One journal entry as the table shows it: the record replay gave, with what an
    operator reads beside it (its state, the step's id, the value shown)."""

    record: JournalRecord
    state: StepState
    step_id: str = ""
    value: str = ""

    @property
    def label(self) -> str:
        """``charge#1`` for a step, the key otherwise (``race.1``, ``sleep.2``)."""
        record = self.record
        return f"{record.name}#{record.occurrence}" if record.verb == Verb.STEP else record.key


@dataclass(frozen=True)
class OpenWait:
    key: str
    verb: str
    on: tuple[str, ...]
    due: str
    """When the entry waited for times out ('' without a timeout)."""


@dataclass(frozen=True)
class JournalView:
    rows: tuple[JournalRow, ...]
    waits: tuple[OpenWait, ...]
    set_aside: tuple[InboxSignal, ...]
    """Signals no wait consumed (duplicates, or sent before anything awaits them)."""
    spawned: frozenset[str] = frozenset()
    """The handles of the runs it spawned (``spawn.1``): a wait on one takes that run's
    end, never a signal of its name."""

    @property
    def awaited(self) -> tuple[str, ...]:
        """The signal names the open waits take, in order, once each (not the spawned
        runs an all or a race also waits for)."""
        names = (name for wait in self.waits for name in wait.on if name not in self.spawned)
        return tuple(dict.fromkeys(names))


def view(state: Instance, fan_out: FanOut | None = None) -> JournalView:
    """The journal, open waits and set-aside signals of a code-first run; ``fan_out``:
    the runs it spawned with their own statuses, which its spawns' rows say."""
    pairs = zip(state.journal, entries(state), strict=True)
    fan_out = fan_out or FanOut(state)
    rows = tuple(_row(state, record, entry, fan_out) for record, entry in pairs)
    waits = tuple(
        OpenWait(w.key, w.verb, w.on, format_when(w.due_at) if w.due_at else "")
        for w in state.waits.values()
        if not w.done and not ending(state)
    )
    spare = tuple(s for s in state.inbox if not s.consumed_by)
    spawned = frozenset(r.key for r in state.journal if r.verb == Verb.SPAWN)
    return JournalView(rows, waits, spare, spawned)


def states(state: Instance) -> dict[str, StepState]:
    """Each outline node's state: that of the latest journal entry it stands for."""
    return {node: step for node, _, step in _entries(state)}


def frontier(state: Instance) -> set[str]:
    """The outline nodes of the entries still open (none once the run has ended)."""
    if state.status.terminal:
        return set()
    return {name for name, step in states(state).items() if step.state not in _SETTLED}


def standing(state: Instance) -> set[str]:
    """Every name a person may give where the run stands (the instance list's "at step"
    filter): of each entry still open, its step's or signal's or spawned workflow's
    name (``charge``, ``paid``, ``shipping``), its call (``charge.1``, as plans and
    events name it; ``charge#1``, as the journal shows it), the signals it awaits (a
    race's or an all's), and its outline node (``step:charge``). A run's progress is its
    journal, so its nodes' names alone (``frontier``) matched nothing a person types."""
    if state.status.terminal:
        return set()
    found: set[str] = set()
    for node, record, step in _entries(state):
        if step.state not in _SETTLED:
            label = f"{record.name}#{record.occurrence}" if record.verb == Verb.STEP else ""
            found |= {node, record.key, record.name, label, *record.on}
    return found - {""}


_SETTLED = frozenset({"succeeded", "failed", "resolved", "cancelled"})


def _entries(state: Instance) -> list[tuple[str, JournalRecord, StepState]]:
    """Each journal entry with the outline node it stands for and its state, in order."""
    found = []
    counts: dict[str, int] = {}
    for record, entry in zip(state.journal, entries(state), strict=True):
        counts[record.verb] = counts.get(record.verb, 0) + 1
        node = verb_name(record.verb, record.name, record.on, counts[record.verb])
        found.append((node, record, _state(state, record, entry)))
    return found


def _row(state: Instance, record: JournalRecord, entry: Entry, fan_out: FanOut) -> JournalRow:
    progress = state.activities.get(record.key) if record.verb == Verb.STEP else None
    step_id = ""
    if progress is not None:
        step_id = progress.idempotency_key or progress.next_key
    return JournalRow(record, _state(state, record, entry, fan_out), step_id, _recorded(entry))


def _state(
    state: Instance, record: JournalRecord, entry: Entry, fan_out: FanOut | None = None
) -> StepState:
    if entry.state is EntryState.FAILED:
        return StepState("failed", entry.failure)
    if record.verb == Verb.STEP:
        progress = state.activities[record.key]
        label = ACTIVITY_STATES.get(progress.status, "scheduled")
        note = f"attempt {progress.attempt}" if progress.attempt else "not started"
        if progress.status is A.UNKNOWN:
            note = f"attempt {progress.attempt}: outcome UNKNOWN (it may have happened)"
        return StepState(label, note)
    if record.verb == Verb.SPAWN:
        child = state.children.get(record.key)
        if child is None:
            return StepState("scheduled", "not started")
        if said := (fan_out or FanOut(state)).said(child):
            return StepState("cancelled", f"run {child.child_id}: {said}")
        return StepState(CHILD_STATES.get(child.status, "running"), f"run {child.child_id}")
    if entry.state is EntryState.DONE:
        return StepState("succeeded", "recorded")
    if ended := ending(state):  # a wait or sleep the run will never resume from
        return StepState("cancelled", ended)
    if record.verb == Verb.SLEEP:
        return StepState("waiting-timer", "sleeping")
    return StepState("waiting-signal", "waiting for " + ", ".join(record.on or (record.name,)))


def _recorded(entry: Entry) -> str:
    """What the entry returned to the code (nothing for a spawn's handle), or why it failed."""
    if entry.state is EntryState.FAILED:
        return entry.failure
    done = entry.state is EntryState.DONE and entry.verb is not Verb.SPAWN
    return _shown(entry.value) if done else ""


def _shown(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= VALUE_SHOWN else text[: VALUE_SHOWN - 1] + "…"


@dataclass(frozen=True)
class Parking:
    """Why a code-first run's decision was dead-lettered, and what fixes it."""

    headline: str
    remedy: str


CODE_DIFFERS = Parking(
    "this run's code differs from its journal.", "Deploy code that matches the journal"
)
PARKINGS = {
    StopKind.DIVERGED.value: CODE_DIFFERS,
    StopKind.REFUSED.value: CODE_DIFFERS,
    WORKFLOW_CODE_DIFFERS: CODE_DIFFERS,
    WORKFLOW_CODE_MISSING: Parking(
        "the worker that took it does not have this run's code.",
        "Run a worker whose app declares this workflow version",
    ),
    SPAWN_NOT_FOUND: Parking(
        "a workflow it spawns has no published version to start.",
        "Publish that workflow (in this team)",
    ),
    SUCCESSOR_ID_TAKEN: Parking(
        "it continues as new, and another instance holds its successor's id.",
        "Cancel the run, or start its successor under another id",
    ),
}
"""What each code a parked decision carries means (``engine.modes.code``); any other
(a bound the code ran into) is shown as it is, with its message."""
PARKED = Parking("what its code asked for cannot be recorded.", "Fix the cause shown here")


def parking(code: str) -> Parking:
    """The words for a parked decision's failure ``code``."""
    return PARKINGS.get(code, PARKED)
