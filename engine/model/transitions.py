"""Transitions: the one persistence boundary of every change to an instance.

A Transition is contiguous history events plus the work rows they create, the
sequence it expects the instance to be at (optimistic concurrency), an id
(idempotency: committing the same transition again is success, the same id with other
content is a conflict) and a fingerprint of its complete content. ``make_transition``
checks every structural rule and bound before anything is allocated for a store
(``check_transition``, which the store runs again before it writes, whoever built the
transition): events contiguous after the expected sequence, of one instance, never
going back in time, and work that belongs to them.

``Draft`` is how decisions are built: each event is applied to the replayed state as
it is added, so a builder can never produce a transition that replay would reject.
Transition ids are derived from the instance, the position and the decision, joined
with ``#`` (which ids may not contain): two workers making the same decision at the
same position produce the same transition (one commits, the other is an exact
replay), while different decisions at one position conflict on the sequence.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from itertools import pairwise
from typing import Any

from engine.model.canonical import canonical_json, format_instant, spliced, spliced_digest, utc
from engine.model.definitions import DefinitionRef
from engine.model.errors import TransitionInvalid
from engine.model.events import TERMINAL_KINDS, Event, EventKind, event_to_json, make_event
from engine.model.identifiers import id_problem
from engine.model.instance import Instance
from engine.model.labelled import Labelled
from engine.model.limits import (
    MAX_DISPATCH_BYTES,
    MAX_KEY_LENGTH,
    MAX_PAYLOAD_BYTES,
    MAX_SEQUENCE,
    MAX_TRANSITION_BYTES,
    MAX_TRANSITION_EVENTS,
    MAX_TRANSITION_WORK,
)
from engine.model.registry import Registry
from engine.model.snapshots import Snapshot


class WorkKind(Labelled):
    ACTIVITY = 1
    TIMER = 2
    CHILD = 3
    PUBLICATION = 4
    RECONCILIATION = 5
    COMPENSATION = 6
    ADVANCE = 7
    """Run a state machine's advance (or, once cancelled, its compensation)."""
    DECISION = 8
    """Replay a code-first workflow's code, record what it asks next."""


def work_label(kind: WorkKind | int, what: str = "") -> str:
    """A work row's kind as people read it (``decision``; ``kind 9`` for one this
    engine does not know), followed by ``what`` it is for (a step, a target)."""
    label = kind.label if isinstance(kind, WorkKind) else f"kind {kind}"
    return f"{label} {what}" if what else label


DISPATCH_KINDS = frozenset({WorkKind.ACTIVITY, WorkKind.CHILD, WorkKind.COMPENSATION})


@dataclass(frozen=True)
class WorkItem:
    """Due work created by an event of the same transition (``sequence``)."""

    work_id: str
    kind: WorkKind
    instance_id: str
    sequence: int
    available_at: datetime
    deadline: datetime
    payload: str | None = None
    tenant_id: str = ""
    correlation_id: str = ""
    target: str = ""
    """The activity target this work runs ("" when any worker can process it)."""


@dataclass(frozen=True)
class Transition:
    """Build with ``make_transition`` (or a Draft) so the rules are checked."""

    transition_id: str
    instance_id: str
    expected_sequence: int
    definition: DefinitionRef
    events: tuple[Event, ...]
    work: tuple[WorkItem, ...] = field(default=())
    parent_key: str = ""
    """Set on a start when at most one active instance of the definition may hold this
    key (a machine's parent: ``DefinitionMode.admit``); the store enforces it. It is
    derived from the start's data, which the fingerprint covers, so it is not part of
    the fingerprint itself."""
    state_after: Instance | None = field(default=None, compare=False, repr=False)
    """The replayed state the events end in, when its builder knows it (a ``Draft``
    does): the store snapshots it when the transition crosses a snapshot interval
    (``engine.replay.snapshots``). Derived from the events, so not fingerprinted."""
    snapshot: Snapshot | None = field(default=None, compare=False, repr=False)
    """``state_after`` encoded, when the transition crosses a snapshot interval: a
    builder leaves it None, and the store fills it in a copy of the transition before
    the PostgreSQL transaction that writes it (``engine.store.snapshots.prepared``).
    Derived from the events, so not fingerprinted."""
    latest_only: bool = field(default=False, compare=False)
    """Set on a start whose version its client took as the latest active one from what
    it read before: the store writes it only while that version still is the latest
    active one (StartVersionMoved otherwise), which spares the start a read of the
    catalog. A condition of the write, not content, so not fingerprinted."""

    @cached_property
    def fingerprint(self) -> str:
        """SHA-256 of the canonical JSON of the complete content, ``digest`` of
        ``transition_to_json``: computed with each event's data as the canonical text it
        already is, not parsed and encoded again (every transition is fingerprinted)."""
        return spliced_digest(transition_to_json(self, data=spliced))

    @property
    def committed_sequence(self) -> int:
        return self.events[-1].sequence

    @property
    def terminal(self) -> bool:
        return self.events[-1].kind in TERMINAL_KINDS

    @property
    def migration_target(self) -> DefinitionRef | None:
        """The new pin when the transition migrates the instance, else None."""
        for event in self.events:
            if event.kind is EventKind.DEFINITION_MIGRATED:
                return event.definition
        return None


_CHECKED = "_checked"
"""Set on a Transition that ``check_transition`` passed."""


def make_transition(
    transition_id: str,
    definition: DefinitionRef,
    expected_sequence: int,
    events: list[Event],
    work: list[WorkItem] = (),
    parent_key: str = "",
    state_after: Instance | None = None,
) -> Transition:
    """Build the transition, checked (``check_transition``)."""
    transition = Transition(
        transition_id,
        events[0].instance_id if events else "",
        expected_sequence,
        definition,
        tuple(events),
        tuple(work),
        parent_key,
        state_after,
    )
    check_transition(transition)
    return transition


def check_transition(transition: Transition) -> None:
    """Raise TransitionInvalid unless ``transition`` keeps every structural rule and bound.

    ``make_transition`` runs it on what it builds, and the store runs it again before it
    writes anything: a Transition can also be made directly, or changed with
    ``dataclasses.replace``, and a store holding one that replay refuses would leave its
    instance unreadable. The events themselves were checked when they were made
    (``make_event``); what this adds is how they fit together and with the work.

    A transition that passed is not checked again (the store's check of what
    ``make_transition`` built then costs a lookup): it cannot change, being frozen with
    its events and work in tuples of frozen values. One made with lists is checked
    every time, as those could still change.
    """
    if transition.__dict__.get(_CHECKED):
        return
    events, work = transition.events, transition.work
    if not 1 <= len(events) <= MAX_TRANSITION_EVENTS:
        raise TransitionInvalid(
            f"a transition has 1 to {MAX_TRANSITION_EVENTS} events, not {len(events)}"
        )
    if len(work) > MAX_TRANSITION_WORK:
        raise TransitionInvalid(
            f"a transition creates at most {MAX_TRANSITION_WORK} work items, not {len(work)}"
        )
    tid = transition.transition_id
    if not isinstance(tid, str) or not tid or len(tid) > MAX_KEY_LENGTH * 2:
        raise TransitionInvalid(f"a transition id has 1 to {MAX_KEY_LENGTH * 2} characters")
    expected = transition.expected_sequence
    if type(expected) is not int or not 0 <= expected < MAX_SEQUENCE:
        raise TransitionInvalid(f"the expected sequence must be from 0 to {MAX_SEQUENCE - 1}")
    if transition.parent_key and (expected != 0 or id_problem(transition.parent_key)):
        raise TransitionInvalid("only a start carries a parent key, and it is a valid id")
    _check_events(transition)
    if not derived_from(tid, transition.instance_id):
        raise TransitionInvalid(f"transition id {tid!r} must start with its instance id and '#'")
    _check_work(events, work)
    if type(events) is tuple and type(work) is tuple:
        object.__setattr__(transition, _CHECKED, True)


def _check_events(transition: Transition) -> None:
    expected, events = transition.expected_sequence, transition.events
    for offset, event in enumerate(events, start=1):
        if event.sequence != expected + offset:
            raise TransitionInvalid(
                f"events must be numbered contiguously after the expected sequence {expected}"
            )
        if event.instance_id != transition.instance_id:
            raise TransitionInvalid("all events of a transition belong to one instance")
    for before, after in pairwise(events):
        if after.occurred_at < before.occurred_at:
            raise TransitionInvalid(
                f"event {after.sequence} occurs before event {before.sequence}: "
                "time may not go backwards within a transition"
            )
    if expected == 0 and events[0].definition != transition.definition:
        raise TransitionInvalid("a starting transition carries its instance's definition")
    total = sum(len(e.data.encode()) for e in events if e.data is not None)
    if total > MAX_TRANSITION_BYTES:
        raise TransitionInvalid(
            f"event data is {total} bytes; at most {MAX_TRANSITION_BYTES} per transition"
        )


def _check_work(events: tuple[Event, ...], work: tuple[WorkItem, ...]) -> None:
    by_sequence = {e.sequence: e for e in events}
    seen: set[str] = set()
    total = sum(len(e.data.encode()) for e in events if e.data is not None)
    for item in work:
        event = by_sequence.get(item.sequence)
        if event is None or item.instance_id != event.instance_id:
            raise TransitionInvalid(
                f"work {item.work_id!r} must reference an event of this transition"
            )
        if item.work_id in seen or not item.work_id or len(item.work_id) > MAX_KEY_LENGTH * 2:
            raise TransitionInvalid(f"work id {item.work_id!r} is empty, too long or repeated")
        if not derived_from(item.work_id, item.instance_id):
            raise TransitionInvalid(
                f"work id {item.work_id!r} must start with its instance id and '#'"
            )
        seen.add(item.work_id)
        try:
            early = utc(item.available_at) < event.occurred_at
            late = utc(item.deadline) <= utc(item.available_at)
        except (ValueError, TypeError, AttributeError):
            raise TransitionInvalid(
                f"work {item.work_id!r} times must be instants with a time zone"
            ) from None
        if early or late:
            raise TransitionInvalid(
                f"work {item.work_id!r} must become available no earlier "
                "than its event and before its deadline"
            )
        size = 0 if item.payload is None else len(item.payload.encode())
        limit = MAX_DISPATCH_BYTES if item.kind in DISPATCH_KINDS else MAX_PAYLOAD_BYTES
        if size > limit:
            raise TransitionInvalid(
                f"work payload is {size} bytes; at most {limit} allowed for {item.kind.label} work"
            )
        total += size
    if total > MAX_TRANSITION_BYTES:
        raise TransitionInvalid(f"transition carries {total} bytes; at most {MAX_TRANSITION_BYTES}")


def transition_to_json(
    transition: Transition, data: Callable[[str], Any] = json.loads
) -> dict[str, Any]:
    """The complete content, as fingerprinted and as exported (``event_to_json``'s
    ``data``), without the observations of its events (``started_by``)."""
    return {
        "transition_id": transition.transition_id,
        "instance_id": transition.instance_id,
        "expected_sequence": transition.expected_sequence,
        "definition": transition.definition.to_json(),
        "events": [event_to_json(e, data, observations=False) for e in transition.events],
        "work": [work_to_json(w) for w in transition.work],
    }


def work_to_json(item: WorkItem) -> dict[str, Any]:
    return {
        "work_id": item.work_id,
        "kind": item.kind.label,
        "instance_id": item.instance_id,
        "sequence": item.sequence,
        "available_at": format_instant(item.available_at),
        "deadline": format_instant(item.deadline),
        "payload": item.payload,
        "tenant_id": item.tenant_id,
        "correlation_id": item.correlation_id,
        "target": item.target,
    }


def derived_from(key: str, instance_id: str) -> bool:
    """Whether ``key`` (a transition or work id) is derived from ``instance_id``.

    The ledger and work are keyed (instance_id, id) (migration 0027, so that instance
    id can be a shard key); ids that start with their instance's id and ``#``, which
    instance ids cannot contain, never meet across instances, so an id is still one
    content everywhere, not only within its instance."""
    return key.startswith(f"{instance_id}#")


def transition_id(instance_id: str, *parts: object) -> str:
    """A derived transition id: instance and decision parts joined by ``#``."""
    return "#".join([instance_id, *(str(p) for p in parts)])


class Draft:
    """Accumulates the events and work of one decision, validating as it goes.

    Each added event is applied to the running replayed state, so an illegal event is
    rejected (ReplayRejected) at the point it is added, with the model's own message.
    """

    def __init__(
        self, registry: Registry, instance: Instance | None, now: datetime, instance_id: str = ""
    ) -> None:
        self.registry = registry
        self.base = instance
        self.state = instance
        self.now = utc(now)
        self.instance_id = instance.instance_id if instance else instance_id
        self.events: list[Event] = []
        self.work: list[WorkItem] = []
        self.parent_key = ""
        """The start's ``Transition.parent_key`` (``lifecycle.start_draft`` sets it)."""

    @property
    def next_sequence(self) -> int:
        return (self.state.sequence if self.state else 0) + 1

    def add(self, kind: EventKind, **fields: Any) -> Event:
        """Append an event at the next position, at ``now``, and apply it."""
        from engine.replay.fold import apply

        event = make_event(
            sequence=self.next_sequence,
            instance_id=self.instance_id,
            kind=kind,
            occurred_at=self.now,
            **fields,
        )
        self.state = apply(self.registry, self.state, event)
        self.events.append(event)
        return event

    def add_work(
        self,
        work_id: str,
        kind: WorkKind,
        event: Event,
        available_at: datetime,
        deadline: datetime,
        payload: Any = None,
        target: str = "",
    ) -> None:
        """Work created by ``event``; ``payload`` is a JSON value (canonicalised here)."""
        text = None if payload is None else canonical_json(payload)
        self.work.append(
            WorkItem(
                work_id,
                kind,
                self.instance_id,
                event.sequence,
                utc(available_at),
                utc(deadline),
                text,
                target=target,
            )
        )

    def build(self, *id_parts: object) -> Transition:
        """The transition, with an id derived from the instance, position and parts."""
        expected = self.base.sequence if self.base else 0
        if self.state is not None and self.state.pending_command is not None:
            raise TransitionInvalid("an operator command needs its effect in the same transition")
        definition = (self.base or self.state).definition  # type: ignore[union-attr]
        first = self.events[0] if self.events else None
        default = (
            (expected + 1, first.kind.label, first.step or "-", first.attempt)
            if first
            else (expected + 1,)
        )
        tid = transition_id(self.instance_id, *(id_parts or default))
        return make_transition(
            tid, definition, expected, self.events, self.work, self.parent_key, self.state
        )
