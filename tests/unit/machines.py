"""State machines for the unit tests: manifest documents, random ones, and a driver that
writes a machine's history the way its runtime will.

``approval_document`` is the example manifest (``examples/document_approval.json``), to be
broken one field at a time. ``machine_documents`` draws valid manifests of random
shape: live states in a chain from the initial one, the last leading to every
terminal state, plus random extra edges out of live states, so every state is
reachable and can still end. ``Walk`` appends a machine's events (timers, failed and
successful advances, completion) with a clock that only moves forward.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from engine.model.canonical import canonical_json
from engine.model.definitions import Definition
from engine.model.events import Event, EventKind, make_event
from engine.model.instance import Instance
from engine.model.registry import Registry
from engine.modes.machines.manifest import MachineManifest
from engine.replay.fold import apply

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "machines"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "document_approval.json"
T0 = datetime(2026, 1, 1, tzinfo=UTC)
RETRY_DELAY = timedelta(seconds=1)
SAMPLE_VALUES = {"text": "x", "integer": 7, "number": 1.5, "boolean": True}
K = EventKind
Document = dict[str, Any]


def approval_document() -> Document:
    """The fixture's document-approval manifest, a fresh copy."""
    return json.loads(EXAMPLE.read_text(encoding="utf-8"))


_FIELDS = st.dictionaries(
    st.sampled_from(["a", "b", "note", "count"]), st.sampled_from(list(SAMPLE_VALUES)), max_size=2
)


@st.composite
def machine_documents(draw: st.DrawFn) -> Document:
    """A valid manifest document of random shape (see the module's docstring)."""
    live = [f"Live{i}" for i in range(draw(st.integers(1, 4)))]
    ends = [f"End{i}" for i in range(draw(st.integers(1, 3)))]
    edges: dict[str, set[str]] = {s: {t} for s, t in itertools.pairwise(live)}
    edges[live[-1]] = set(ends)
    for state in live:
        edges.setdefault(state, set()).update(draw(st.sets(st.sampled_from(live + ends))))
    variants = [
        {"name": name, "fields": {} if name == live[0] else draw(_FIELDS)} for name in live + ends
    ]
    timers = draw(st.dictionaries(st.sampled_from(live), st.integers(1, 86_400)))
    return {
        "name": "walk",
        "version": "1",
        "mode": "machine",
        "function": "walks.advance",
        "resource": "Walks",
        "state": {"name": "Place", "variants": draw(st.permutations(variants))},
        "input": draw(st.sampled_from(list(SAMPLE_VALUES))),
        "initial": live[0],
        "terminal": ends,
        "timers": timers,
        "transitions": {s: sorted(ts) for s, ts in edges.items()},
        "grants": draw(st.sampled_from([[], ["DbRead<Walks>"], ["DbWrite<Walks>"]])),
        "max_attempts": draw(st.integers(1, 8)),
        "max_transitions": draw(st.integers(1, 12)),
        "retry": "transactional",
        "concurrency": "parent",
    }


@dataclass
class Walk:
    """A machine instance's history, written event by event and folded as it goes."""

    definition: Definition
    now: datetime = T0
    events: list[Event] = field(default_factory=list)
    state: Instance | None = None

    def __post_init__(self) -> None:
        self.registry = Registry([self.definition])
        self.append(K.INSTANCE_STARTED, definition=self.definition.ref)

    @property
    def manifest(self) -> MachineManifest:
        assert isinstance(self.definition.manifest, MachineManifest)
        return self.definition.manifest

    @property
    def current(self) -> str:
        assert self.state is not None
        return self.state.machine.state if self.state.machine else self.manifest.initial

    def event(self, kind: EventKind, **fields: Any) -> Event:
        """The next event at the current time (not appended)."""
        sequence = len(self.events) + 1
        return make_event(
            sequence=sequence, instance_id="m-1", kind=kind, occurred_at=self.now, **fields
        )

    def append(self, kind: EventKind, **fields: Any) -> Instance:
        event = self.event(kind, **fields)
        self.state = apply(self.registry, self.state, event)
        self.events.append(event)
        return self.state

    def wait_for_timer(self) -> None:
        """A timer state's advance waits for its timer: schedule it, then fire it."""
        seconds = self.manifest.timer(self.current)
        if seconds is None:
            return
        due = self.now + timedelta(seconds=seconds)
        self.append(K.TIMER_SCHEDULED, step=self.current, due_at=due)
        self.now = due
        self.append(K.TIMER_FIRED, step=self.current)

    def fail(self, attempt: int) -> None:
        """Attempt ``attempt`` of the current state fails; a retry is due unless it was
        the last."""
        last = attempt == self.manifest.max_attempts
        due = None if last else self.now + RETRY_DELAY
        self.append(K.ADVANCE_FAILED, step=self.current, attempt=attempt, code="boom", due_at=due)
        if due is not None:
            self.now = due

    def enter(self, target: str, attempt: int = 1, **values: Any) -> Instance:
        """Attempt ``attempt`` enters ``target`` with sample values for its fields."""
        return self.append(
            K.STATE_ENTERED, step=target, attempt=attempt, data=self.data(target, values)
        )

    def data(self, target: str, values: dict[str, Any]) -> str | None:
        variant = self.manifest.variant(target)
        fields = dict(variant.fields) if variant else {}
        if not fields:
            return None
        return canonical_json(
            {name: values.get(name, SAMPLE_VALUES[t]) for name, t in fields.items()}
        )
