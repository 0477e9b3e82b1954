"""One instance as its page shows it: the replayed state and what it implies.

The replay cache (``studio.instances.replays``) gives the state and every attempt; this module
adds each step's state, the work rows beside the attempts they carry (lease owner,
fencing token, expiry, dead-lettered), where the instance stands in the engine's own
words (a decision on a dry run), the signal steps that still take a signal, and the
operator actions the state allows. The page, its live updates and the API all read
an ``InstanceDetail``; none of them reads history itself.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from engine.api.queries import (
    InstanceRow,
    ResolutionAction,
    ResolutionRecord,
    WorkRow,
    WorkState,
)
from engine.decide.previews import standing
from engine.model.definitions import Definition, Mode, StepKind
from engine.model.description import HeldStarts, never_happens
from engine.model.errors import DecisionRejected
from engine.model.fan_out import FanOut
from engine.model.instance import Instance, InstanceStatus
from engine.model.limits import MAX_PAYLOAD_BYTES
from engine.model.transitions import WorkKind
from studio.code import journal_view
from studio.code.journal_view import JournalView
from studio.drawings import drawing_of
from studio.formats import format_when
from studio.instances.action_offers import Offer, offers
from studio.instances.attempts import ACTIVITY, COMPENSATION, AttemptIdentity, AttemptRecord
from studio.instances.replays import Replayed
from studio.instances.service import require_row
from studio.instances.step_states import StepState
from studio.machines import overlay as machine_overlay
from studio.machines.overlay import MachineView
from studio.reads import Reads

WORK_SHOWN = 200
AUDIT_SHOWN = 50
INLINE_REPLAY_EVENTS = 2_000
"""Above this many events (and not replayed yet) the page opens with its first history
page and fetches the replayed state after it, so a long history never delays it."""
TRACK_KINDS = {WorkKind.ACTIVITY: ACTIVITY, WorkKind.COMPENSATION: COMPENSATION}


@dataclass(frozen=True)
class AttemptRow(AttemptIdentity):
    """An attempt as the table shows it: history's record and the work row carrying it."""

    outcome: str
    record: AttemptRecord | None
    work: WorkRow | None
    now: datetime
    earlier_attempts: int = 0
    """On the first listed attempt of a step whose log keeps only its newest attempts
    (``KEEP_PER_STEP``), how many came before it: the table says they exist and where
    to read them, rather than passing the newest off as every attempt."""
    held: str = ""
    """For an attempt recorded started that an incident hold keeps from running (its
    outcome ``held``), what it waits for: ``waiting for the hold on NAME: not run yet``
    (``engine.model.description.HeldStarts``), rather than "running"."""

    @property
    def lease_live(self) -> bool:
        return self.work is not None and self.work.lease_live(self.now)

    @property
    def code(self) -> str:
        """The attempt's failure code: history's record of it, else its work row's (a
        dead letter's, before or without a record saying so); '' when neither has one.
        The page and the API show the same code."""
        record, work = self.record, self.work
        return (record.code if record else "") or (work.failure_code if work else "")

    @property
    def css(self) -> str:
        return "outcome-" + self.outcome.split(":")[0].replace(" ", "-")


RESOLVED_AS = {
    ResolutionAction.RETRY: "dead_letter_retried",
    ResolutionAction.DISCARD: "dead_letter_discarded",
}
"""How the audit trail names a dead letter's resolution: as a retention export does."""


@dataclass(frozen=True)
class TrailRow:
    """One row of the operator audit trail: an audited command from the history, or the
    resolution of one of the instance's dead letters, which no event records (it is kept
    beside the work it resolved, ``work_resolutions``), so a person who retried or
    discarded this instance's work is named on its page with the others."""

    occurred_at: datetime
    actor: str
    action: str
    reason: str
    command_id: str
    sequence: int | None = None
    """The command's event (None for a resolution: no event records it)."""
    resolution: ResolutionRecord | None = None
    work: WorkRow | None = None
    """The resolved work as the page lists it (None for a command, or work not listed)."""

    @property
    def what(self) -> str:
        """What a resolution acted on, in words ('' for a command): the step (or target)
        and kind of the work, its fencing token, and a retry's new times."""
        found = self.resolution
        if found is None:
            return ""
        work = self.work
        kind = getattr(work.kind, "label", "") if work is not None else ""
        named = (work.step or work.target) if work is not None else ""
        subject = f"{kind} {named}".strip() or f"work {found.work_id}"
        times = ""
        if found.retry_at is not None and found.deadline is not None:
            times = f", due {format_when(found.retry_at)}, deadline {format_when(found.deadline)}"
        return f"{subject} (token {found.token}){times}"


def trail(
    state: Instance, resolutions: list[ResolutionRecord], work: list[WorkRow]
) -> list[TrailRow]:
    """The operator audit trail, newest first: the commands the history records and the
    resolutions of the instance's dead letters, by when each happened."""
    rows = [
        TrailRow(a.occurred_at, a.actor, a.action, a.reason, a.command_id, a.sequence)
        for a in state.audit
    ]
    rows += resolution_rows(resolutions, work)
    return sorted(rows, key=lambda r: r.occurred_at, reverse=True)


def resolution_rows(resolutions: list[ResolutionRecord], work: list[WorkRow]) -> list[TrailRow]:
    """Dead letters' resolutions as rows of the audit trail, each with its work when the
    page lists it (in the order given)."""
    by_id = {w.work_id: w for w in work}
    return [
        TrailRow(
            r.occurred_at,
            r.actor,
            RESOLVED_AS[r.action],
            r.reason,
            r.command_id,
            resolution=r,
            work=by_id.get(r.work_id),
        )
        for r in resolutions
    ]


@dataclass(frozen=True)
class SignalSlot:
    """A signal the instance takes (a send form): a signal step that has not received
    its signal yet, or a signal a code-first run's open wait awaits."""

    name: str
    waiting: bool
    """The instance is at this step now (else the signal is kept until it gets there)."""
    limit: int
    """The payload's limit, in bytes."""
    signal_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    """The id its form sends with it, drawn with the form: posting it twice acts once."""


@dataclass(frozen=True)
class InstanceDetail:
    """Everything the instance page shows, from one replay and one read of the work rows,
    so the graph, the tables and the offered actions agree with each other."""

    row: InstanceRow
    replayed: Replayed
    states: dict[str, StepState]
    offers: list[Offer]
    position: str
    attempts: list[AttemptRow]
    work: list[WorkRow]
    now: datetime
    fan_out: FanOut
    """Its children with each one's own status (``engine.store.reads.fan_out``): the
    children table's statuses and the count above it, as ``wayline inspect`` says them."""
    signal_slots: list[SignalSlot] = field(default_factory=list)
    machine: MachineView | None = None
    """A machine's state panel (None for other modes)."""
    journal: JournalView | None = None
    """A code-first run's journal (None for other modes)."""
    unserved: tuple[str, ...] = ()
    """Targets of the instance's open work, due now or later, that no running worker
    runs (``engine.store.work_views.unserved``): it waits for a worker that registers
    them (an app not deployed, a version's code whose workers were stopped), which
    nothing else on the page says."""
    resolutions: list[ResolutionRecord] = field(default_factory=list)
    """The newest resolutions of its dead letters (at most ``AUDIT_SHOWN``), newest first."""
    predecessor: str = ""
    """The run it continues (``Queries.predecessor``), '' for none."""

    @property
    def state(self) -> Instance:
        return self.replayed.state

    @property
    def definition(self) -> Definition:
        assert self.state.spec is not None
        return self.state.spec

    def never_happens(self, step: str) -> str:
        """Why the wait ``step`` has not happened and never will ('' while it may)."""
        return never_happens(self.state, step)

    @property
    def compensations(self) -> list[Any]:
        """Compensations in the order they were scheduled (the order unwinding ran)."""
        return sorted(self.state.compensations.values(), key=lambda p: p.scheduled_sequence)

    @property
    def audit(self) -> list[TrailRow]:
        """The newest entries of the operator audit trail first, dead letters'
        resolutions among the commands (the rest of the commands are in the history)."""
        return trail(self.state, self.resolutions, self.work)[:AUDIT_SHOWN]

    @property
    def resolved(self) -> list[TrailRow]:
        """The resolutions of its dead letters as trail rows, newest first."""
        return resolution_rows(self.resolutions, self.work)

    @property
    def audit_total(self) -> int:
        """How many entries the trail has (at least: the resolutions read are bounded)."""
        return len(self.state.audit) + len(self.resolutions)

    @property
    def dead_letters(self) -> list[WorkRow]:
        """Dead letters still waiting for an operator (a discarded one waits for none)."""
        return [w for w in self.work if w.unresolved]

    @property
    def discarded(self) -> list[WorkRow]:
        """Dead letters an operator discarded: their work never runs."""
        return [w for w in self.work if w.discarded]

    @property
    def parked(self) -> WorkRow | None:
        """The dead-lettered decision that parks a code-first run (None when none does)."""
        dead = (w for w in self.work if w.state is WorkState.DEAD_LETTERED)
        return next((w for w in dead if w.kind == WorkKind.DECISION), None)

    @property
    def divergence(self) -> str:
        """Why a code-first run is parked, as its dead letter says ('' when it is not)."""
        parked = self.parked
        return (parked.failure_detail or parked.failure_code) if parked else ""

    @property
    def parked_why(self) -> journal_view.Parking:
        """What parked the run, in words, and what an operator does before retrying."""
        return journal_view.parking(self.parked.failure_code if self.parked else "")


async def replayed(reads: Reads, team: str, instance_id: str) -> tuple[InstanceRow, Replayed]:
    row = await require_row(reads, team, instance_id)
    return row, await reads.replays.load(row.instance_id, at_least=row.sequence)


def needs_lazy_state(reads: Reads, row: InstanceRow) -> bool:
    """Whether the page should fetch the replayed state after it opens."""
    cached = reads.replays.cached(row.instance_id)
    fresh = cached is not None and cached.state.sequence >= row.sequence
    return not fresh and row.sequence > INLINE_REPLAY_EVENTS


async def detail(reads: Reads, team: str, instance_id: str) -> InstanceDetail:
    """Everything the instance page shows, from the replay and the work rows."""
    row, entry = await replayed(reads, team, instance_id)
    return await detail_of(reads, row, entry)


async def detail_of(reads: Reads, row: InstanceRow, entry: Replayed) -> InstanceDetail:
    state = entry.state
    now = reads.store.now()
    work = await reads.queries.instance_work(state.instance_id, WORK_SHOWN)
    held = await reads.queries.started_under_hold(state, work)
    resolutions = await reads.queries.instance_resolutions(state.instance_id, AUDIT_SHOWN)
    registry = await reads.registries.get()
    if row.sequence != state.sequence:  # the row moved on while we replayed
        row = replace(row, sequence=state.sequence, status=state.status)
    fan_out = await reads.queries.fan_out(state)
    machine = journal = None
    if state.spec is not None and state.spec.mode == Mode.MACHINE:
        machine = machine_overlay.view(state, entry.walk, now)
    if state.spec is not None and state.spec.mode == Mode.CODE:
        journal = journal_view.view(state, fan_out)
    return InstanceDetail(
        row=row,
        replayed=entry,
        states=held_states(drawing_of(state.spec).states(state), held),
        offers=offers(state, registry, now),
        position=(
            machine.position if machine else held.position(state) or position(state, registry, now)
        ),
        attempts=attempt_rows(entry, work, now, held),
        work=work,
        now=now,
        fan_out=fan_out,
        signal_slots=signal_slots(state, journal),
        machine=machine,
        journal=journal,
        unserved=await reads.queries.unserved_targets(work),
        resolutions=resolutions,
        predecessor=await reads.queries.predecessor(state.instance_id),
    )


def held_states(states: dict[str, StepState], held: HeldStarts) -> dict[str, StepState]:
    """The steps' states, with an activity whose attempt an incident hold keeps from
    running (recorded started, never run) shown scheduled, saying what it waits for:
    replay alone would colour it running."""
    states = dict(states)
    for (track, step), attempt in held.attempts.items():
        if track == ACTIVITY and step in states and states[step].state == "running":
            states[step] = StepState(
                "scheduled", f"attempt {attempt} recorded started, {held.waiting}"
            )
    return states


def position(state: Instance, registry: Any, now: datetime) -> str:
    """Where the instance stands, in the engine's own words (a decision on a dry run),
    with the instants they name written as the page writes times (the engine's words
    write them in RFC 3339, as ``wayline inspect`` prints them)."""
    if state.status.terminal:
        return f"ended {state.status.label}" + (
            f" at {state.failure_step}: {state.failure_code}" if state.failure_code else ""
        )
    try:
        decision = standing(state, registry, now)
    except DecisionRejected as refused:
        return str(refused)
    reason = decision.reason_in(format_when)
    if decision.outcome.value == "scheduled":
        return f"due now: {reason} (a worker picks it up)"
    return reason or decision.outcome.value


def signal_slots(state: Instance, journal: JournalView | None = None) -> list[SignalSlot]:
    if state.spec is None or state.status not in (InstanceStatus.RUNNING, InstanceStatus.PAUSED):
        return []
    if journal is not None:
        return [SignalSlot(name, True, MAX_PAYLOAD_BYTES) for name in journal.awaited]
    current = drawing_of(state.spec).frontier(state)
    return [
        SignalSlot(step.name, step.name in current, step.input_limit)
        for step in state.spec.steps
        if step.kind is StepKind.SIGNAL and step.name not in state.signals
    ]


def attempt_rows(
    entry: Replayed, work: list[WorkRow], now: datetime, held: HeldStarts | None = None
) -> list[AttemptRow]:
    """Every attempt in history, plus scheduled ones not started yet, in step order. A
    step's latest attempt that ``held`` names is ``held``, not running: it is recorded
    started, but an incident hold parked its work before any handler ran it."""
    state = entry.state
    held = held or HeldStarts()
    carriers = {(TRACK_KINDS[w.kind], w.step, w.attempt): w for w in work if w.kind in TRACK_KINDS}
    rows: list[AttemptRow] = []
    seen: set[tuple[str, str, int]] = set()
    for (track, step), records in entry.attempts.by_step.items():
        for record in records:
            key = (track, step, record.attempt)
            seen.add(key)
            earlier = record.attempt - 1 if record is records[0] else 0
            waiting = held.of(track, step, record.attempt) if record.outcome == "running" else ""
            outcome = "held" if waiting else record.outcome
            carrier = carriers.get(key)
            rows.append(
                AttemptRow(*key, record.key, outcome, record, carrier, now, earlier, waiting)
            )
    for key, carrier in carriers.items():
        # A carrier of an attempt no newer than the step's last recorded one is an
        # earlier attempt the log no longer keeps (it ended long ago), not one to come.
        latest = entry.attempts.last(key[0], key[1])
        if key not in seen and (latest is None or key[2] > latest.attempt):
            dead = carrier.state is WorkState.DEAD_LETTERED
            outcome = "dead-lettered" if dead else "scheduled"
            rows.append(
                AttemptRow(*key, str(carrier.payload.get("key", "")), outcome, None, carrier, now)
            )
    order = {s.name: i for i, s in enumerate(state.spec.steps)} if state.spec else {}
    order.update((record.key, record.position) for record in state.journal)
    rows.sort(key=lambda r: (order.get(r.step, 0), r.track != ACTIVITY, r.attempt))
    return rows
