"""The replayed state of one instance: what history says, and nothing more.

An Instance is immutable; ``engine.replay.fold.apply`` returns a new one per event, so a
worker can keep it cached and fold new events in. The snapshot digest is the SHA-256
of ``instance_to_json`` and changes whenever any status, progress or data changes,
which is how two replays (or two builds of the engine) are compared.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field
from datetime import datetime, timedelta
from enum import IntEnum
from functools import cached_property
from typing import Any

from engine.model.canonical import digest, format_instant
from engine.model.definitions import Definition, DefinitionRef, Step
from engine.model.durations import to_micros
from engine.model.labelled import Labelled


class InstanceStatus(Labelled):
    RUNNING = 1
    PAUSED = 2
    CANCELLING = 3
    COMPLETED = 4
    FAILED = 5
    CANCELLED = 6
    TERMINATED = 7
    CONTINUED_AS_NEW = 8
    FAILING = 9
    """A known terminal failure is being compensated; the instance fails afterwards."""

    @property
    def terminal(self) -> bool:
        return self in TERMINAL_STATUSES


TERMINAL_STATUSES = frozenset(
    {
        InstanceStatus.COMPLETED,
        InstanceStatus.FAILED,
        InstanceStatus.CANCELLED,
        InstanceStatus.TERMINATED,
        InstanceStatus.CONTINUED_AS_NEW,
    }
)
UNWINDING_STATUSES = frozenset({InstanceStatus.CANCELLING, InstanceStatus.FAILING})


class AttemptStatus(Labelled):
    """Progress of an activity or a compensation through its attempts."""

    READY = 1
    RUNNING = 2
    SUCCEEDED = 3
    FAILED = 4
    UNKNOWN = 5
    RETRY_WAITING = 6
    MANUALLY_RESOLVED = 7


class ChildStatus(Labelled):
    SCHEDULED = 1
    START_RUNNING = 2
    ACTIVE = 3
    START_FAILED = 4
    START_UNKNOWN = 5
    RETRY_WAITING = 6
    SUCCEEDED = 7
    FAILED = 8


@dataclass(frozen=True)
class Attempted:
    """A step's progress through numbered attempts, the part every attempt machine
    shares (an activity's, a compensation's, a child's start): the latest attempt, its
    key and due time, the retry scheduled after it, and its last outcome.

    ``next_key`` is the idempotency key the next attempt must use, fixed when the retry
    is scheduled (the same key after an unknown outcome, a new one after a failure).
    """

    step: str
    status: Labelled
    _: KW_ONLY
    input: str | None = None
    attempt: int = 0
    idempotency_key: str = ""
    due_at: datetime | None = None
    retry_at: datetime | None = None
    next_key: str = ""
    result: str | None = None
    code: str = ""
    retryable: bool = False


@dataclass(frozen=True)
class AttemptProgress(Attempted):
    """One activity (or one compensation of an activity) and its latest attempt.

    ``completed_sequence`` orders successes, which is the order compensation reverses.
    """

    status: AttemptStatus
    scheduled_sequence: int
    started_at: datetime | None = None
    granted_attempt: int = 0
    completed_sequence: int = 0


@dataclass(frozen=True)
class TimerProgress:
    step: str
    due_at: datetime
    fired_at: datetime | None = None
    fired_sequence: int = 0


@dataclass(frozen=True)
class SignalProgress:
    step: str
    signal_id: str
    received_at: datetime
    sequence: int
    data: str | None = None


@dataclass(frozen=True)
class ChildProgress(Attempted):
    status: ChildStatus
    child_id: str
    definition: DefinitionRef


@dataclass(frozen=True)
class MachineProgress:
    """Where a state machine stands: its current state, and what it has used up.

    An instance of a machine that has not yet left its initial state has none (its
    state is the manifest's initial one, which has no fields). ``attempts`` counts the
    failed advances of the current state (entering a state resets it); ``retry_at`` is
    when the next attempt is due after one failed. A timer state's next advance waits
    for its timer: ``timer_due_at`` once scheduled, ``timer_fired_at`` once fired.
    """

    state: str
    data: str | None = None
    transitions: int = 0
    attempts: int = 0
    retry_at: datetime | None = None
    code: str = ""
    timer_due_at: datetime | None = None
    timer_fired_at: datetime | None = None


@dataclass(frozen=True)
class JournalRecord:
    """One command a code-first workflow's code reached, as history recorded it.

    ``key`` names it in the events (their ``step``): ``charge.1``, ``sleep.2``,
    ``await.paid.1``, ``race.1``, ``spawn.1``, ``now.3``. What it returned is read
    from the progress its events keep (activities, timers, waits, children); a journaled
    value (``now``, ``random``, ``uuid4``) is ``value`` itself.
    """

    position: int
    verb: str
    key: str
    name: str
    occurrence: int
    sequence: int
    on: tuple[str, ...] = ()
    value: str | None = None


@dataclass(frozen=True)
class InboxSignal:
    """A signal sent to a code-first run: kept, in arrival order, until a wait consumes
    it (``consumed_by`` names that wait's key); unconsumed extras stay set aside."""

    name: str
    signal_id: str
    received_at: datetime
    sequence: int
    data: str | None = None
    consumed_by: str = ""


@dataclass(frozen=True)
class WaitEntry:
    """How one entry of a wait resolved: by a ``signal`` (its id), a ``spawn`` that
    ended (its key) or a ``timeout``; ``data`` is what the code gets for it."""

    index: int
    name: str
    by: str
    sequence: int
    signal_id: str = ""
    data: str | None = None


@dataclass(frozen=True)
class WaitProgress:
    """A code-first run awaiting signals or spawned runs (``wait``, ``race``, ``all``).

    ``due_at`` is when the entry being waited for times out (``all`` waits for its
    entries in turn, each with the whole timeout); None without a timeout or once done.
    """

    key: str
    verb: str
    on: tuple[str, ...]
    sequence: int
    timeout: timedelta | None = None
    due_at: datetime | None = None
    resolved: tuple[WaitEntry, ...] = ()
    done: bool = False


@dataclass(frozen=True)
class AuditEntry:
    """One operator command: who, why, when, and which command id (idempotency)."""

    command_id: str
    action: str
    actor: str
    reason: str
    occurred_at: datetime
    sequence: int


@dataclass(frozen=True)
class Instance:
    """Replayed state. Maps are never mutated; ``apply`` builds new ones."""

    instance_id: str
    status: InstanceStatus
    definition: DefinitionRef
    started_at: datetime
    updated_at: datetime
    sequence: int
    input: str | None = None
    result: str | None = None
    failure_code: str = ""
    failure_step: str = ""
    successor_id: str = ""
    parent_id: str = ""
    parent_step: str = ""
    activities: Mapping[str, AttemptProgress] = field(default_factory=dict)
    compensations: Mapping[str, AttemptProgress] = field(default_factory=dict)
    timers: Mapping[str, TimerProgress] = field(default_factory=dict)
    signals: Mapping[str, SignalProgress] = field(default_factory=dict)
    children: Mapping[str, ChildProgress] = field(default_factory=dict)
    race_winners: Mapping[str, str] = field(default_factory=dict)
    machine: MachineProgress | None = None
    journal: tuple[JournalRecord, ...] = ()
    """A code-first run's commands, in the order its code reached them."""
    dynamic_steps: Mapping[str, Step] = field(default_factory=dict)
    """Steps a code-first run declared as it went (by journal key), with the options
    its code gave: the attempt rules of step lists apply to them as to declared steps."""
    inbox: tuple[InboxSignal, ...] = ()
    waits: Mapping[str, WaitProgress] = field(default_factory=dict)
    audit: tuple[AuditEntry, ...] = ()
    pending_command: AuditEntry | None = None
    spec: Definition | None = field(default=None, compare=False, repr=False)
    trace_context: str = field(default="", compare=False, repr=False)
    """The ``traceparent`` its start carried (``Event.trace_context``): where its spans
    join the starting caller's trace. Not part of the state: the digest leaves it out."""
    started_by: str = field(default="", compare=False, repr=False)
    """Who started it (``Event.started_by``; '' when nobody was recorded: a child, or a
    start older than the record). Not part of the state: the digest leaves it out."""

    @cached_property
    def digest(self) -> str:
        """Snapshot digest: SHA-256 of the canonical JSON of this state."""
        return digest(instance_to_json(self))

    def step(self, name: str) -> Step | None:
        """The step called ``name``: declared by the definition, or by a code-first run
        as it went (``dynamic_steps``); None when neither has it."""
        declared = self.spec.step(name) if self.spec is not None else None
        return declared or self.dynamic_steps.get(name)

    def value(self, name: str) -> Any:
        """``input`` or ``result`` decoded from JSON."""
        text = getattr(self, name)
        return None if text is None else json.loads(text)


def instance_to_json(instance: Instance) -> dict[str, Any]:
    """Every field of the state as JSON; the basis of the digest and of ``inspect``.

    A machine's progress, and a code-first run's journal, inbox and waits, are written
    only when there are any, so the digests of every other instance are what they were
    before those modes existed."""
    out = {
        "instance_id": instance.instance_id,
        "status": instance.status.label,
        "definition": instance.definition.to_json(),
        "started_at": format_instant(instance.started_at),
        "updated_at": format_instant(instance.updated_at),
        "sequence": instance.sequence,
        "input": _json(instance.input),
        "result": _json(instance.result),
        "failure_code": instance.failure_code,
        "failure_step": instance.failure_step,
        "successor_id": instance.successor_id,
        "parent_id": instance.parent_id,
        "parent_step": instance.parent_step,
        "activities": [_record(p) for p in instance.activities.values()],
        "compensations": [_record(p) for p in instance.compensations.values()],
        "timers": [_record(p) for p in instance.timers.values()],
        "signals": [_record(p) for p in instance.signals.values()],
        "children": [_record(p) for p in instance.children.values()],
        "race_winners": dict(instance.race_winners),
        "audit": [_record(a) for a in instance.audit],
        "pending_command": None
        if instance.pending_command is None
        else _record(instance.pending_command),
    }
    if instance.machine is not None:
        out["machine"] = _record(instance.machine)
    if instance.journal:
        out["journal"] = [_record(r) for r in instance.journal]
        out["dynamic_steps"] = sorted(instance.dynamic_steps)  # options: in the journal
    if instance.inbox:
        out["inbox"] = [_record(s) for s in instance.inbox]
    if instance.waits:
        out["waits"] = [
            {**_record(w), "resolved": [_record(e) for e in w.resolved]}
            for w in instance.waits.values()
        ]
    return out


def _record(value: Any) -> dict[str, Any]:
    out = {}
    for name in value.__dataclass_fields__:
        item = getattr(value, name)
        if isinstance(item, datetime):
            item = format_instant(item)
        elif isinstance(item, timedelta):
            item = to_micros(item)
        elif isinstance(item, IntEnum):
            item = item.name.lower()
        elif isinstance(item, DefinitionRef):
            item = item.to_json()
        elif name in ("input", "result", "data"):
            item = _json(item)
        out[name] = item
    return out


def _json(text: str | None) -> Any:
    return None if text is None else json.loads(text)
