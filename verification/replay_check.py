"""Replay checks of one captured history: determinism, decisions, and the ledger chain.

A ``History`` is everything the store holds about one instance (events, the transition
ledger rows, the work rows), in a form that can be saved as JSON and replayed later
against another build (D7's corpus). ``verify`` asks of it:

- **I9, replay determinism.** Replaying twice gives the same snapshot digest, and at
  every position where the engine decides (``engine.modes.decide``), the current
  engine's decision equals what history recorded next, work rows included. This is
  Temporal's replayer check: the commands reproduced from history must match the
  commands recorded. Where the engine decides nothing, the next event must not be one
  only a decision makes. A state machine decides after the events a transition adds
  (its ``decide`` reads the draft's own events), so there each ledger transition is
  checked instead: its leading events are replayed into a draft, the engine decides,
  and what it appends (events and work) must be what the transition recorded after them.
  A code-first run's decisions record what its code asked for, which only the code can
  say: its history is replayed without decision checks, and its journal is replayed
  against its code instead (J3, ``verification.journal_replay``).
- **I9, the snapshot path.** At the end of every transition (where the store writes a
  snapshot when it crosses an interval, ``engine.replay.snapshots``), the state restored
  from its snapshot, with the rest of the history folded on, has the full replay's
  digest: opening an instance from a snapshot can never see another state.
- **I6, history integrity.** The ledger's transitions cover the events exactly,
  contiguously from 0 to the last sequence, and each one's fingerprint, recomputed from
  the events and work rows it wrote, equals the fingerprint committed with it: a hash
  chain over the whole history.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine.model.canonical import digest
from engine.model.definitions import DefinitionRef, Mode
from engine.model.errors import DecisionRejected, ReplayRejected, TransitionInvalid
from engine.model.events import Event, EventKind, event_from_json, event_to_json
from engine.model.instance import Instance
from engine.model.registry import Registry
from engine.model.transitions import Draft, Transition, WorkItem, transition_to_json, work_to_json
from engine.modes import decide
from engine.replay import snapshots
from engine.replay.fold import apply

K = EventKind
DECISION_KINDS = frozenset(
    {
        K.ACTIVITY_SCHEDULED,
        K.RETRY_SCHEDULED,
        K.TIMER_SCHEDULED,
        K.RACE_WON,
        K.COMPLETED,
        K.FAILED,
        K.INSTANCE_FAILING,
        K.CANCELLED,
        K.COMPENSATION_SCHEDULED,
        K.COMPENSATION_RETRY_SCHEDULED,
        K.CHILD_SCHEDULED,
        K.CHILD_START_RETRY_SCHEDULED,
    }
)
"""Kinds only the orchestration decision (or an audited operator command) appends."""
MACHINE_DECISION_KINDS = frozenset({K.TIMER_SCHEDULED, K.COMPLETED, K.FAILED, K.CANCELLED})
"""Kinds a state machine's decision appends after a transition's own events."""


@dataclass(frozen=True)
class LedgerRow:
    transition_id: str
    expected: int
    committed: int
    fingerprint: str


@dataclass
class History:
    """One instance as stored: events, ledger rows and work rows, in sequence order."""

    instance_id: str
    events: list[Event]
    ledger: list[LedgerRow] = field(default_factory=list)
    work: list[WorkItem] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "instance_id": self.instance_id,
            "events": [event_to_json(e) for e in self.events],
            "ledger": [vars(row) for row in self.ledger],
            "work": [work_to_json(w) for w in self.work],
        }

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> History:
        return cls(
            document["instance_id"],
            [event_from_json(e) for e in document["events"]],
            [LedgerRow(**row) for row in document["ledger"]],
            [work_from_json(w) for w in document["work"]],
        )


def work_from_json(document: dict[str, Any]) -> WorkItem:
    from engine.model.canonical import parse_instant
    from engine.model.transitions import WorkKind

    return WorkItem(
        work_id=document["work_id"],
        kind=WorkKind[document["kind"].upper()],
        instance_id=document["instance_id"],
        sequence=document["sequence"],
        available_at=parse_instant(document["available_at"]),
        deadline=parse_instant(document["deadline"]),
        payload=document["payload"],
        tenant_id=document["tenant_id"],
        correlation_id=document["correlation_id"],
        target=document["target"],
    )


@dataclass
class Verdict:
    """What replaying one history found."""

    state: Instance | None
    events: int
    problems: list[str] = field(default_factory=list)
    pins: dict[int, DefinitionRef] = field(default_factory=dict)
    """The pinned definition after each sequence (what a transition from there carries)."""
    snapshots: int = 0
    """Positions where the snapshot path was checked against the full replay."""

    @property
    def digest(self) -> str | None:
        return self.state.digest if self.state is not None else None


Decide = Callable[[Draft], None]


def verify(
    registry: Registry, history: History, decision: Decide = decide, chain: bool = True
) -> Verdict:
    """Replay ``history`` with decision checks, then check its ledger chain.

    ``decision`` is the decision code checked (the engine's ``decide``, unless a
    negative control checks a broken one). ``chain=False`` leaves the ledger out: a
    doctored history has no ledger of its own, and a negative control must be caught by
    replay and the decisions, not by the ledger it lacks."""
    mode = mode_of(registry, history)
    replay = (
        REPLAYS.get(mode, _replay_with_decisions) if mode is not None else _replay_with_decisions
    )
    verdict = replay(registry, history, decision)
    if verdict.state is not None:
        again = _replay(registry, history.events)
        if again is None or again.digest != verdict.state.digest:
            verdict.problems.append("a second replay gave another snapshot digest")
        verdict.problems.extend(check_snapshots(registry, history, verdict))
        if chain:
            verdict.problems.extend(check_ledger(history, verdict.pins))
    return verdict


def check_snapshots(registry: Registry, history: History, verdict: Verdict) -> list[str]:
    """The snapshot path against the full replay (see the module), at the end of each of
    the ledger's transitions; counted in ``verdict.snapshots``."""
    assert verdict.state is not None
    ends = {row.committed for row in history.ledger}
    problems: list[str] = []
    state: Instance | None = None
    for index, event in enumerate(history.events):
        state = apply(registry, state, event)
        if event.sequence not in ends or state.pending_command is not None:
            continue
        verdict.snapshots += 1
        restored = snapshots.restore(registry, snapshots.take(state))
        resumed = restored and _replay(registry, history.events[index + 1 :], restored)
        if resumed is None or resumed.digest != verdict.state.digest:
            problems.append(
                f"folding from a snapshot at {event.sequence} gave another state "
                "than the full replay"
            )
    return problems


def _replay(
    registry: Registry, events: list[Event], state: Instance | None = None
) -> Instance | None:
    """``state`` (None: nothing) with ``events`` folded on; None when replay rejects one."""
    try:
        for event in events:
            state = apply(registry, state, event)
    except ReplayRejected:
        return None
    return state


def _replay_with_decisions(registry: Registry, history: History, decision: Decide) -> Verdict:
    """Replay to the end; check decisions until the first divergence (one is enough)."""
    state: Instance | None = None
    verdict = Verdict(None, 0)
    work = {w.work_id: w for w in history.work}
    for index, event in enumerate(history.events):
        if state is not None and not verdict.problems:
            problem = check_decision(registry, state, history.events[index:], work, decision)
            if problem:
                verdict.problems.append(problem)
        state = _applied(registry, state, event, verdict)
        if state is None:
            return verdict
    if state is not None and not verdict.problems:
        last = check_decision(registry, state, [], work, decision)
        verdict.problems.extend(filter(None, [last]))
    verdict.state = state
    return verdict


def _applied(
    registry: Registry, state: Instance | None, event: Event, verdict: Verdict
) -> Instance | None:
    """``state`` after ``event``, counted in ``verdict``; None when replay rejects the
    event (``verdict`` says why)."""
    try:
        state = apply(registry, state, event)
    except ReplayRejected as exc:
        verdict.problems.append(f"replay rejected event {event.sequence}: {exc}")
        return None
    verdict.events += 1
    verdict.pins[state.sequence] = state.definition
    return state


def mode_of(registry: Registry, history: History) -> Mode | None:
    """The mode of the definition the history started under (None when not published)."""
    first = history.events[0] if history.events else None
    ref = first.definition if first is not None else None
    definition = registry.get(ref.name, ref.version) if ref is not None else None
    return definition.mode if definition is not None else None


def _replay_code(registry: Registry, history: History, decision: Decide) -> Verdict:
    """Replay a code-first run's history without decision checks: what its decisions
    record is what its code asked for, which only its code can say; that is checked by
    replaying the journal against the code (J3, ``verification.journal_replay``)."""
    state: Instance | None = None
    verdict = Verdict(None, 0)
    for event in history.events:
        state = _applied(registry, state, event, verdict)
        if state is None:
            return verdict
    verdict.state = state
    return verdict


def _replay_by_transition(registry: Registry, history: History, decision: Decide) -> Verdict:
    """Replay a machine's history one ledger transition at a time, checking each one's
    decision until the first divergence; events no ledger row covers are replayed
    unchecked (the ledger check reports them)."""
    state: Instance | None = None
    verdict = Verdict(None, 0)
    by_sequence = {e.sequence: e for e in history.events}
    rows = sorted(history.ledger, key=lambda r: r.expected)
    groups = [
        [by_sequence[s] for s in range(row.expected + 1, row.committed + 1) if s in by_sequence]
        for row in rows
    ]
    covered = {e.sequence for group in groups for e in group}
    groups.append([e for e in history.events if e.sequence not in covered])
    for n, events in enumerate(groups):
        if n < len(rows) and not verdict.problems:
            row = rows[n]
            work = [w for w in history.work if row.expected < w.sequence <= row.committed]
            problem = check_transition(registry, state, history.instance_id, events, work, decision)
            verdict.problems.extend(filter(None, [problem]))
        for event in events:
            state = _applied(registry, state, event, verdict)
            if state is None:
                return verdict
    verdict.state = state
    return verdict


def check_transition(
    registry: Registry,
    state: Instance | None,
    instance_id: str,
    events: list[Event],
    work: list[WorkItem],
    decision: Decide = decide,
) -> str:
    """Whether the engine, after a transition's leading events, decides what it recorded
    (``events`` and ``work``: exactly what the transition wrote)."""
    cause = len(events)
    while cause and events[cause - 1].kind in MACHINE_DECISION_KINDS:
        cause -= 1
    if not cause:
        return ""
    draft = Draft(registry, state, events[-1].occurred_at, instance_id)
    where = f"after sequence {events[cause - 1].sequence}"
    try:
        for event in events[:cause]:
            draft.state = apply(registry, draft.state, event)
            draft.events.append(event)
        decision(draft)
    except (DecisionRejected, ReplayRejected, TransitionInvalid) as exc:
        return f"{where} the engine cannot decide: {exc}"
    produced, recorded = draft.events[cause:], events[cause:]
    if len(produced) != len(recorded):
        return f"{where} the engine decides {len(produced)} events, history has {len(recorded)}"
    for made, kept in zip(produced, recorded, strict=True):
        if event_to_json(made) != event_to_json(kept):
            return f"{where} the engine decides {_describe(made)}, history has {_describe(kept)}"
    if _contents(draft.work) != _contents(work):
        return f"{where} the decision's work differs from the work the transition wrote"
    return ""


def _contents(work: list[WorkItem]) -> list[dict[str, Any]]:
    return sorted((_work_content(w) for w in work), key=lambda c: c["work_id"])


def check_decision(
    registry: Registry,
    state: Instance,
    rest: list[Event],
    work: dict[str, WorkItem],
    decision: Decide = decide,
) -> str:
    """Whether the engine, at ``state``, decides exactly what history recorded next."""
    if state.status.terminal or state.pending_command is not None:
        return ""
    now = rest[0].occurred_at if rest else state.updated_at
    draft = Draft(registry, state, now)
    try:
        decision(draft)
    except (DecisionRejected, ReplayRejected, TransitionInvalid) as exc:
        return f"at sequence {state.sequence} the engine cannot decide: {exc}"
    where = f"after sequence {state.sequence}"
    if not draft.events:
        if rest and rest[0].kind in DECISION_KINDS:
            return f"{where} history has {rest[0].kind.label} but the engine decides nothing"
        return ""
    if not rest:
        return f"{where} the engine decides {draft.events[0].kind.label}, history has nothing"
    for produced, recorded in zip(draft.events, rest, strict=False):
        if event_to_json(produced) != event_to_json(recorded):
            return (
                f"{where} the engine decides {_describe(produced)}, "
                f"history has {_describe(recorded)}"
            )
    if len(rest) < len(draft.events):
        return f"{where} history ends inside a decision"
    return _check_work(where, draft.work, work)


def _describe(event: Event) -> str:
    detail = ",".join(str(v) for v in (event.step, event.attempt or "", event.idempotency_key) if v)
    return f"{event.kind.label}({detail})"


def _check_work(where: str, produced: list[WorkItem], stored: dict[str, WorkItem]) -> str:
    for item in produced:
        row = stored.get(item.work_id)
        if row is None:
            return f"{where} the decision's work {item.work_id} is missing"
        if _work_content(row) != _work_content(item):
            return f"{where} work {item.work_id} differs from the decision's"
    return ""


def _work_content(item: WorkItem) -> dict[str, Any]:
    content = work_to_json(item)
    content.pop("tenant_id")
    content.pop("correlation_id")
    return content


def check_ledger(history: History, pins: dict[int, DefinitionRef]) -> list[str]:
    """The ledger covers the events contiguously and every fingerprint recomputes.

    Work rows are put back in transition order by the sequence of the event that made
    them (a decision adds each work item right after its event).
    """
    problems = []
    position = 0
    by_sequence = {e.sequence: e for e in history.events}
    for row in sorted(history.ledger, key=lambda r: r.expected):
        if row.expected != position:
            problems.append(f"ledger jumps from {position} to {row.expected}")
            break
        events = [by_sequence[s] for s in range(row.expected + 1, row.committed + 1)]
        work = [w for w in history.work if row.expected < w.sequence <= row.committed]
        work.sort(key=lambda w: (w.sequence, w.work_id))
        if _fingerprint(row, events, work, pins.get(row.expected)) != row.fingerprint:
            problems.append(f"transition {row.transition_id} does not match its fingerprint")
        position = row.committed
    if position != len(history.events):
        problems.append(f"ledger covers {position} of {len(history.events)} events")
    return problems


def _fingerprint(
    row: LedgerRow, events: list[Event], work: list[WorkItem], pin: DefinitionRef | None
) -> str:
    """The ledger row's content fingerprinted by the reference form, ``digest`` of the
    exported content, not by ``Transition.fingerprint``'s spliced computation: the
    check does not trust the code it checks."""
    if not events:
        return ""
    definition = events[0].definition if row.expected == 0 else pin
    transition = Transition(
        row.transition_id,
        events[0].instance_id,
        row.expected,
        definition,  # type: ignore[arg-type]
        tuple(events),
        tuple(work),
    )
    return digest(transition_to_json(transition))


REPLAYS: dict[Mode, Callable[[Registry, History, Decide], Verdict]] = {
    Mode.MACHINE: _replay_by_transition,
    Mode.CODE: _replay_code,
}
"""How each mode's history is replayed when it is not the default's, decision by decision."""
