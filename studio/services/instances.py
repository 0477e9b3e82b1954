"""A team's instances: the filtered list, starting one, and everything one instance shows.

Every read goes through the team: an instance of another team is not found. The list
is keyset-paged with its filters in the URL; starting checks the input before the
engine sees it (valid JSON, within the smallest input limit of the version's
activities, since each activity receives the instance input); the detail is the
replayed state (``studio.replays``) with each step's state, every attempt beside the
work row that carries it (lease owner, fencing token, expiry), and the operator
actions the state allows.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from engine.client import StartConflict
from engine.definitions import Definition, Step, StepKind
from engine.errors import DecisionRejected, DefinitionNotFound, RegistryError, ReplayRejected
from engine.events import json_data
from engine.identifiers import id_problem
from engine.instance import AttemptStatus, ChildProgress, Instance, InstanceStatus
from engine.limits import MAX_PAYLOAD_BYTES
from engine.orchestration import decide
from engine.store import reads, work_views
from engine.store.errors import InstanceNotFound
from engine.store.reads import InstancePage, InstanceRow, InstanceView
from engine.store.work_views import WorkRow
from engine.transitions import Draft, WorkKind
from studio.action_offers import Offer, offers
from studio.attempts import ACTIVITY, COMPENSATION, AttemptRecord
from studio.errors import Conflict, Invalid, NotFound
from studio.replays import Replayed
from studio.services import definitions
from studio.services.paging import parse_cursor
from studio.services.runtime import Runtime
from studio.step_states import StepState, frontier, step_states

PAGE_SIZE = 50
WORK_SHOWN = 200
AUDIT_SHOWN = 50
INLINE_REPLAY_EVENTS = 2_000
"""Above this many events (and not replayed yet) the page opens with its first history
page and fetches the replayed state after it, so a long history never delays it."""
VIEWS = {"active": "Running", "archived": "Finished", "all": "All"}
TRACK_KINDS = {WorkKind.ACTIVITY: ACTIVITY, WorkKind.COMPENSATION: COMPENSATION}


def parse_time(text: str, what: str) -> datetime | None:
    """A date or date-time from a filter (UTC unless it names a zone); None when empty."""
    if not text.strip():
        return None
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise Invalid(f"{what} must be a date like 2026-11-29 or 2026-11-29T10:30") from None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


@dataclass(frozen=True)
class InstanceFilters:
    """The list's filters as the URL carries them (text, exactly as typed)."""

    view: str = "active"
    definition: str = ""
    version: str = ""
    status: str = ""
    started_from: str = ""
    started_before: str = ""
    instance: str = ""

    def __post_init__(self) -> None:
        if self.view not in VIEWS:
            raise Invalid("view is one of active, archived, all")
        if self.status and self.status not in {s.label for s in InstanceStatus}:
            raise Invalid(f"status {self.status!r} is not an instance status")
        parse_time(self.started_from, "started from")
        parse_time(self.started_before, "started before")

    @property
    def active(self) -> dict[str, str]:
        """The filters that are set, as URL parameters (the view always)."""
        return {k: v for k, v in vars(self).items() if v or k == "view"}

    def query(self, **changes: str) -> str:
        """This list's URL query, with ``changes`` applied (a tab, a cursor)."""
        values = {**self.active, **changes}
        return urlencode({k: v for k, v in values.items() if v})

    @property
    def narrowed(self) -> bool:
        return len(self.active) > 1


async def list_page(
    runtime: Runtime, team: str, filters: InstanceFilters, cursor: str | None = None
) -> InstancePage:
    status = next((s for s in InstanceStatus if s.label == filters.status), None)
    return await reads.list_instances(
        runtime.store,
        InstanceView(filters.view),
        parse_cursor(cursor),
        PAGE_SIZE,
        definition_name=filters.definition or None,
        definition_version=filters.version or None,
        status=status,
        tenant=team,
        instance_id=filters.instance.strip() or None,
        started_from=parse_time(filters.started_from, "started from"),
        started_before=parse_time(filters.started_before, "started before"),
    )


async def require_row(runtime: Runtime, team: str, instance_id: str) -> InstanceRow:
    """The instance's row; NotFound when it does not exist or belongs to another team."""
    try:
        row = await reads.get_instance(runtime.store, instance_id)
    except InstanceNotFound:
        row = None
    if row is None or row.tenant_id != team:
        raise NotFound("no such instance in this team")
    return row


async def pinned_definition(runtime: Runtime, row: InstanceRow) -> Definition:
    """The version an instance is pinned to (its fingerprint, not just its number)."""
    try:
        return (await runtime.client.registries.get()).resolve(row.definition)
    except RegistryError:  # published after this process read the catalog
        return (await runtime.client.registries.refresh()).resolve(row.definition)


# Starting ---------------------------------------------------------------------------


def input_limit(definition: Definition) -> tuple[int, str]:
    """The largest input every activity accepts, and the step that sets it."""
    limits = [(s.input_limit, s.name) for s in definition.steps if s.kind is StepKind.ACTIVITY]
    return min(limits) if limits else (MAX_PAYLOAD_BYTES, "")


def parse_json(text: str, what: str) -> Any:
    """JSON from a form field; empty means no value (None)."""
    if not text.strip():
        return None
    try:
        return json.loads(text)
    except ValueError as error:
        raise Invalid(f"the {what} is not valid JSON: {error}") from None


def check_size(value: Any, limit: int, what: str, where: str = "") -> None:
    size = len((json_data(value) or "").encode())
    if size > limit:
        place = f"; step {where} accepts at most {limit}" if where else f"; at most {limit}"
        raise Invalid(f"the {what} is {size} bytes{place}")


async def start(
    runtime: Runtime,
    team: str,
    name: str,
    version: str,
    instance_id: str = "",
    input_text: str = "",
) -> Instance:
    """Start an instance of the team's ``name``@``version``.

    The same id with the same version and input again returns the existing instance
    (so a form posted twice starts one instance); with anything else it is a conflict.
    """
    published = await definitions.version_of(runtime.store, team, name, version)
    if published.deprecated:
        raise Invalid(f"{name}@{version} is deprecated and refuses new instances")
    value = parse_json(input_text, "input")
    limit, step = input_limit(published.definition)
    check_size(value, limit, "input", step)
    chosen = instance_id.strip() or f"{name}-{uuid.uuid4().hex[:12]}"
    problem = id_problem(chosen)
    if problem:
        raise Invalid(f"the instance id {problem}")
    taken = await reads.get_instances(runtime.store, [chosen])
    if chosen in taken and taken[chosen].tenant_id != team:  # another team's instance
        raise Conflict("this instance id is taken; choose another")
    try:
        state = await _start(runtime, name, chosen, value, version, team)
    except StartConflict as clash:
        raise Conflict(f"{clash}; choose another instance id") from None
    except DefinitionNotFound as missing:
        raise NotFound(str(missing)) from None
    runtime.watcher.nudge()
    return state


async def _start(
    runtime: Runtime, name: str, instance_id: str, value: Any, version: str, team: str
) -> Instance:
    """``Client.start``; an existing instance of a version this process has not loaded
    yet is compared after reloading the registry."""
    try:
        return await runtime.client.start(name, instance_id, value, version, tenant=team)
    except ReplayRejected:
        await runtime.client.registries.refresh()
        return await runtime.client.start(name, instance_id, value, version, tenant=team)


# One instance -------------------------------------------------------------------------


@dataclass(frozen=True)
class AttemptRow:
    """An attempt as the table shows it: history's record and the work row carrying it."""

    track: str
    step: str
    attempt: int
    key: str
    outcome: str
    record: AttemptRecord | None
    work: WorkRow | None
    now: datetime

    @property
    def lease_live(self) -> bool:
        return self.work is not None and self.work.lease_live(self.now)

    @property
    def css(self) -> str:
        return "outcome-" + self.outcome.split(":")[0].replace(" ", "-")


@dataclass(frozen=True)
class SignalSlot:
    """A signal step that has not received its signal yet (a send form)."""

    step: Step
    waiting: bool
    """The instance is at this step now (else the signal is kept until it gets there)."""


@dataclass(frozen=True)
class InstanceDetail:
    row: InstanceRow
    replayed: Replayed
    states: dict[str, StepState]
    offers: list[Offer]
    position: str
    attempts: list[AttemptRow]
    work: list[WorkRow]
    now: datetime
    signal_slots: list[SignalSlot] = field(default_factory=list)

    @property
    def state(self) -> Instance:
        return self.replayed.state

    @property
    def definition(self) -> Definition:
        assert self.state.spec is not None
        return self.state.spec

    @property
    def compensations(self) -> list[Any]:
        """Compensations in the order they were scheduled (the order unwinding ran)."""
        return sorted(self.state.compensations.values(), key=lambda p: p.scheduled_sequence)

    @property
    def children(self) -> list[ChildProgress]:
        return list(self.state.children.values())

    @property
    def audit(self) -> list[Any]:
        """The newest audit entries first (the rest is in the history)."""
        return list(reversed(self.state.audit))[:AUDIT_SHOWN]

    @property
    def dead_letters(self) -> list[WorkRow]:
        return [w for w in self.work if w.state.label == "dead-lettered"]


async def replayed(runtime: Runtime, team: str, instance_id: str) -> tuple[InstanceRow, Replayed]:
    row = await require_row(runtime, team, instance_id)
    return row, await runtime.replays.load(instance_id, at_least=row.sequence)


def needs_lazy_state(runtime: Runtime, row: InstanceRow) -> bool:
    """Whether the page should fetch the replayed state after it opens."""
    cached = runtime.replays.cached(row.instance_id)
    fresh = cached is not None and cached.state.sequence >= row.sequence
    return not fresh and row.sequence > INLINE_REPLAY_EVENTS


async def detail(runtime: Runtime, team: str, instance_id: str) -> InstanceDetail:
    """Everything the instance page shows, from the replay and the work rows."""
    row, entry = await replayed(runtime, team, instance_id)
    return await detail_of(runtime, row, entry)


async def detail_of(runtime: Runtime, row: InstanceRow, entry: Replayed) -> InstanceDetail:
    state = entry.state
    now = runtime.store.now()
    work = await work_views.instance_work(runtime.store, state.instance_id, WORK_SHOWN)
    registry = await runtime.client.registries.get()
    if row.sequence != state.sequence:  # the row moved on while we replayed
        row = replace(row, sequence=state.sequence, status=state.status)
    return InstanceDetail(
        row=row,
        replayed=entry,
        states=step_states(state),
        offers=offers(state, registry, now),
        position=position(state, registry, now),
        attempts=attempt_rows(entry, work, now),
        work=work,
        now=now,
        signal_slots=signal_slots(state),
    )


def position(state: Instance, registry: Any, now: datetime) -> str:
    """Where the instance stands, in the engine's own words (a decision on a dry run)."""
    if state.status.terminal:
        return f"ended {state.status.label}" + (
            f" at {state.failure_step}: {state.failure_code}" if state.failure_code else ""
        )
    try:
        decision = decide(Draft(registry, state, max(now, state.updated_at)))
    except DecisionRejected as refused:
        return str(refused)
    if decision.outcome.value == "scheduled":
        return f"due now: {decision.reason} (a worker picks it up)"
    return decision.reason or decision.outcome.value


def signal_slots(state: Instance) -> list[SignalSlot]:
    if state.spec is None or state.status not in (InstanceStatus.RUNNING, InstanceStatus.PAUSED):
        return []
    current = frontier(state)
    return [
        SignalSlot(step, step.name in current)
        for step in state.spec.steps
        if step.kind is StepKind.SIGNAL and step.name not in state.signals
    ]


def attempt_rows(entry: Replayed, work: list[WorkRow], now: datetime) -> list[AttemptRow]:
    """Every attempt in history, plus scheduled ones not started yet, in step order."""
    state = entry.state
    carriers = {(TRACK_KINDS[w.kind], w.step, w.attempt): w for w in work if w.kind in TRACK_KINDS}
    rows: list[AttemptRow] = []
    seen: set[tuple[str, str, int]] = set()
    for (track, step), records in entry.attempts.by_step.items():
        for record in records:
            key = (track, step, record.attempt)
            seen.add(key)
            outcome = record.outcome
            rows.append(
                AttemptRow(
                    track, step, record.attempt, record.key, outcome, record, carriers.get(key), now
                )
            )
    for key, carrier in carriers.items():
        if key not in seen:
            outcome = "dead-lettered" if carrier.state.label == "dead-lettered" else "scheduled"
            rows.append(
                AttemptRow(*key, str(carrier.payload.get("key", "")), outcome, None, carrier, now)
            )
    order = {s.name: i for i, s in enumerate(state.spec.steps)} if state.spec else {}
    rows.sort(key=lambda r: (order.get(r.step, 0), r.track != ACTIVITY, r.attempt))
    return rows


def unknown_attempts(detail: InstanceDetail) -> list[AttemptRow]:
    """Attempts whose outcome is still in doubt (the operator's to resolve)."""
    state = detail.state
    return [
        r
        for r in detail.attempts
        if r.outcome == "unknown"
        and r.track == ACTIVITY
        and state.activities.get(r.step) is not None
        and state.activities[r.step].status is AttemptStatus.UNKNOWN
        and state.activities[r.step].attempt == r.attempt
    ]
