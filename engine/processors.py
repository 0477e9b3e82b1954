"""Processors: what a worker does with one leased work item.

Each processor reloads the instance (incrementally, from the cache), decides whether
the work is still wanted, and commits what happened as transitions fenced by its
lease: the lease is checked in the same PostgreSQL transaction, so a stale owner can
never write. The decision that follows an outcome rides in that transaction too.
Commits of processors running at the same time share transactions (group commit,
``engine.store.group_commit``); each keeps its own fence and its own answer.

Activities and compensations follow the bracket: commit ``attempt_started`` (lease
kept), run the handler, commit the outcome plus the next decision and complete the
lease. A redelivered lease whose attempt is durably started but has no outcome
records *unknown* and never calls the handler again. Work that arrives while its
instance is paused is parked (resuming re-arms it); work the instance no longer wants
(it ended, or moved past that attempt) is completed without writing history.

Work can also be claimed before its instance wants it: resuming re-arms all open work
at once, and an operator may retry a dead letter "now" while the attempt it starts
still waits out its policy backoff or its timer is not yet due. Such work is released,
unchanged and without history, until the instance's own due time (``NotDue``), because
replay forbids an attempt before its retry time and a timer fired early or with a time
still to come. Where the work's deadline comes first it is dead-lettered again
(``DUE_AFTER_DEADLINE``): the operator chose that deadline, so the operator decides
again (retry it with a deadline after the due time, or discard it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from engine import decisions
from engine.activities import (
    ActivityRegistry,
    ActivityRequest,
    Failed,
    HandlerThreads,
    Outcome,
    Succeeded,
    Unknown,
    bounded_detail,
    run_handler,
)
from engine.child_outcomes import parent_transitions
from engine.definitions import Mode
from engine.errors import ReplayRejected
from engine.events import EventKind
from engine.faults import Boundary, Faults
from engine.instance import AttemptProgress, AttemptStatus, Instance, InstanceStatus
from engine.instance_cache import InstanceCache, RegistrySource
from engine.metrics import Metrics
from engine.orchestration import decide
from engine.replay import replay
from engine.store import work
from engine.store.errors import (
    DuplicateTransition,
    SequenceConflict,
    StoreError,
    StoreUnavailable,
)
from engine.store.fencing import LeaseFence
from engine.store.group_commit import CommitGroup
from engine.store.store import Store
from engine.transitions import Draft, Transition, WorkKind

A = AttemptStatus
S = InstanceStatus
K = EventKind
PARK_FOR = timedelta(hours=1)
"""How far work for a paused instance is pushed back; resuming re-arms it at once."""
PARK_MARGIN = timedelta(seconds=1)
NOT_YET_DUE = "not-yet-due"
"""Code kept on work released because it was claimed before its instance wanted it."""
DUE_AFTER_DEADLINE = "due-after-deadline"
"""Dead-letter code of work its instance wants only at or after the work's deadline."""
MAX_CONFLICT_RETRIES = 20
WRITE_RETRY_DELAYS = (0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2)
"""Waits before each new try of a write known not to have committed (6.35 s in all,
within the lease its renewals keep alive meanwhile)."""
log = logging.getLogger("wayline.processors")


class Obsolete(Exception):
    """The instance no longer wants this work: finish the lease, write no history."""


class Park(Exception):
    """The instance is paused: push the work back until it resumes."""


class NotDue(Exception):
    """The work came before its instance wants it: release it until ``due_at``."""

    def __init__(self, due_at: datetime) -> None:
        super().__init__(f"not due before {due_at.isoformat()}")
        self.due_at = due_at


def wait_until(draft: Draft, due_at: datetime, claimed_at: datetime) -> None:
    """Let the draft act at ``due_at`` only if the work was due when it was claimed.

    A claim due by the store's clock (``claimed_at``, read in the claim statement) may
    still find this process's reading of that clock a little behind: the draft's time
    then becomes ``due_at``, which is no later than the claim, so it stays truthful. A
    claim before ``due_at`` raises NotDue: acting would put an event before its due time
    (replay refuses it) or stamp it with a time still to come.
    """
    if draft.now >= due_at:
        return
    if claimed_at < due_at:
        raise NotDue(due_at)
    draft.now = due_at


@dataclass
class Context:
    """What processors share within one worker."""

    store: Store
    activities: ActivityRegistry
    registries: RegistrySource
    faults: Faults = field(default_factory=Faults)
    metrics: Metrics = field(default_factory=Metrics)
    threads: HandlerThreads = field(default_factory=lambda: HandlerThreads(1))
    """Where sync handlers run; the worker sizes it to its concurrency."""
    cache: InstanceCache = field(init=False)
    commits: CommitGroup = field(init=False)

    def __post_init__(self) -> None:
        self.cache = InstanceCache(self.store, self.registries)
        self.commits = CommitGroup(self.store)


@dataclass(frozen=True)
class Dispatch:
    step: str
    attempt: int
    key: str


async def process(ctx: Context, current: LeaseHolder) -> None:
    """Run one leased work item to a committed result (or lose the lease trying)."""
    lease = current.lease
    kind = lease.kind
    if kind in (WorkKind.ACTIVITY, WorkKind.COMPENSATION):
        track = ACTIVITY if kind is WorkKind.ACTIVITY else COMPENSATION
        await process_attempt(ctx, lease, track, current)
    elif kind is WorkKind.TIMER:
        await process_timer(ctx, lease)
    elif kind is WorkKind.CHILD:
        await process_child(ctx, lease)
    else:
        await work.dead_letter(ctx.store, lease, "unsupported-work-kind")


# Committing ---------------------------------------------------------------------------


async def commit(
    ctx: Context,
    lease: work.Lease,
    build: Callable[[Draft], None],
    finish: bool | Callable[[], bool] = True,
    eager: Eager | None = None,
    known: Instance | None = None,
) -> Instance | None:
    """Build on the latest state and commit fenced by the lease; retry on conflicts.

    ``build`` raises Obsolete (finish the lease without history) or Park. Returns the
    committed state, or None when nothing was written. With ``eager``, the next
    activity this worker can run is started in the same transaction and leased to it.

    ``known`` is the state this processor's own previous commit ended in. It is tried
    first without reading the store: if anything was committed since, the commit's
    sequence check rejects it and the store is read (a stale guess costs a retry,
    never a wrong write). A guess that would make the work obsolete, parked or
    finished without writing is checked against the store before it is acted on.
    """
    for _ in range(MAX_CONFLICT_RETRIES):
        guessed = known is not None
        state = known if known is not None else await ctx.cache.load(lease.instance_id)
        known = None
        draft = Draft(await ctx.registries.get(), state, _now(ctx, state))
        try:
            build(draft)
        except Obsolete:
            if guessed:
                continue
            await ctx.commits.commit_all([], LeaseFence(ctx.store, lease, finish=True))
            return None
        except Park:
            if guessed:
                continue
            await _park(ctx, lease, _now(ctx, state))
            return None
        except NotDue as early:
            if guessed:
                continue
            await _release_until(ctx, lease, early.due_at)
            return None
        if not draft.events:
            if guessed:
                continue
            return state  # nothing new to record (e.g. a redelivered child start)
        if draft.state.spec.mode is Mode.ORCHESTRATION:
            decide(draft)
        fence = LeaseFence(ctx.store, lease, finish() if callable(finish) else finish)
        if eager is not None:
            eager.prepare(draft, fence)
        transitions = [draft.build(), *await parent_transitions(ctx.cache, ctx.registries, draft)]
        ctx.faults.reach(Boundary.BEFORE_COMMIT)
        try:
            await _write(ctx, transitions, fence)
        except (SequenceConflict, DuplicateTransition):
            for transition in transitions:
                ctx.cache.forget(transition.instance_id)
            continue
        ctx.faults.reach(Boundary.AFTER_COMMIT)
        ctx.cache.put(draft.state)
        if eager is not None:
            eager.lease = fence.next_lease
        return draft.state
    raise SequenceConflict(f"instance {lease.instance_id} kept changing under its worker")


async def _write(ctx: Context, transitions: list[Transition], fence: LeaseFence) -> None:
    """Commit, and write again what is known not to have taken effect.

    The transitions carry what this processor knows (an attempt's outcome above all):
    dropped, the lease would expire and the attempt be recorded unknown though its
    outcome was in hand. So a write the store reports not committed (refused, cut off
    before the server got it, the database briefly unavailable) is sent again after
    each of ``WRITE_RETRY_DELAYS``. Fencing still decides: a lease lost meanwhile ends
    the retries with StaleLease, and an outcome that is unknown is never retried here."""
    for delay in WRITE_RETRY_DELAYS:
        try:
            await ctx.commits.commit_all(transitions, fence)
            return
        except StoreError as exc:
            if type(exc) not in (StoreError, StoreUnavailable):
                raise  # not "safe to retry": unknown, stale, a conflict, ...
            ctx.metrics.count("write_retries")
            log.warning("%s; writing it again in %.2f s", exc, delay)
        await asyncio.sleep(delay)
    await ctx.commits.commit_all(transitions, fence)


@dataclass
class Eager:
    """Eager dispatch of the next activity: start it in the outcome's transaction.

    Only an activity this worker has a handler for and that is due now; at most one, so
    it takes exactly the slot the finished attempt frees. Others wait for a claim.
    """

    ctx: Context
    lease_for: timedelta
    dispatch: Dispatch | None = None
    lease: work.Lease | None = None

    def prepare(self, draft: Draft, fence: LeaseFence) -> None:
        self.dispatch = None
        item = next(
            (
                w
                for w in draft.work
                if w.kind is WorkKind.ACTIVITY
                and w.available_at <= draft.now
                and self.ctx.activities.get(w.target)
            ),
            None,
        )
        if item is None or draft.state.status is not S.RUNNING:
            return
        payload = json.loads(item.payload or "{}")
        self.dispatch = Dispatch(payload["step"], payload["attempt"], payload["key"])
        decisions.start_activity_attempt(
            draft, self.dispatch.step, self.dispatch.attempt, self.dispatch.key
        )
        fence.lease_next, fence.lease_for = item.work_id, self.lease_for


async def _park(ctx: Context, lease: work.Lease, now: datetime) -> None:
    """Push work back while its instance is paused (resuming re-arms it at once).

    Never past the work's deadline: work that cannot wait that long keeps its lease
    until it expires, and once the deadline passes it becomes a visible dead letter.
    """
    until = min(now + PARK_FOR, lease.deadline - PARK_MARGIN)
    if until > now:
        await work.retry_at(ctx.store, lease, until, "paused")


async def _release_until(ctx: Context, lease: work.Lease, due_at: datetime) -> None:
    """Release work claimed early until ``due_at``; dead-letter it when its deadline comes
    first, since it could then never run in time (see the module docstring)."""
    if due_at < lease.deadline:
        await work.retry_at(ctx.store, lease, due_at, NOT_YET_DUE)
    else:
        await work.dead_letter(ctx.store, lease, DUE_AFTER_DEADLINE)


def _now(ctx: Context, state: Instance) -> datetime:
    return max(ctx.store.now(), state.updated_at)


def _dispatch(lease: work.Lease) -> Dispatch | None:
    try:
        payload = json.loads(lease.payload or "")
        return Dispatch(str(payload["step"]), int(payload["attempt"]), str(payload["key"]))
    except (ValueError, KeyError, TypeError):
        return None


# Activities and compensations ---------------------------------------------------------


@dataclass(frozen=True)
class Track:
    """An attempt track: activities, or the compensations of activities."""

    name: str
    compensation: bool
    statuses: frozenset[InstanceStatus]
    start: Callable[..., Any]
    outcome_kinds: tuple[EventKind, EventKind, EventKind]
    unknown_code: str
    poison_code: str

    def progress(self, state: Instance, step: str) -> AttemptProgress | None:
        track = state.compensations if self.compensation else state.activities
        return track.get(step)

    def target_and_timeout(self, state: Instance, step: str) -> tuple[str, timedelta]:
        spec = state.spec.step(step)
        if self.compensation:
            return spec.compensation.target, spec.compensation.timeout
        return spec.target, spec.timeout

    def result_limit(self, state: Instance, step: str) -> int:
        spec = state.spec.step(step)
        return spec.compensation.result_limit if self.compensation else spec.result_limit


ACTIVITY = Track(
    "activity",
    False,
    frozenset({S.RUNNING}),
    decisions.start_activity_attempt,
    (K.ATTEMPT_SUCCEEDED, K.ATTEMPT_FAILED, K.ATTEMPT_UNKNOWN),
    decisions.ACTIVITY_OUTCOME_UNKNOWN,
    "invalid-activity-dispatch",
)
COMPENSATION = Track(
    "compensation",
    True,
    frozenset({S.RUNNING, S.CANCELLING, S.FAILING}),
    decisions.start_compensation_attempt,
    (K.COMPENSATION_SUCCEEDED, K.COMPENSATION_FAILED, K.COMPENSATION_UNKNOWN),
    decisions.COMPENSATION_OUTCOME_UNKNOWN,
    "invalid-compensation-dispatch",
)


async def process_attempt(
    ctx: Context, lease: work.Lease, track: Track, current: LeaseHolder
) -> None:
    dispatch = _dispatch(lease)
    if dispatch is None:
        await work.dead_letter(ctx.store, lease, track.poison_code)
        return
    start = StartOrSettle(track, dispatch, lease.claimed_at)
    claimed = await _claimed_state(ctx, lease)
    state = await commit(ctx, lease, start, finish=lambda: start.settled, known=claimed)
    if state is None or track.progress(state, dispatch.step).status is not A.RUNNING:
        return
    while True:
        ctx.faults.reach(Boundary.AFTER_ATTEMPT_START)
        outcome = await _run(ctx, state, track, dispatch)
        ctx.faults.reach(Boundary.AFTER_HANDLER)
        ctx.metrics.count("outcomes", kind=type(outcome).__name__.lower(), track=track.name)
        eager = Eager(ctx, current.lease_for) if track is ACTIVITY else None
        record = _record(track, dispatch, outcome)
        with current.completing():
            state = await commit(ctx, lease, record, eager=eager, known=state)
            if eager is None or eager.lease is None or state is None:
                return
            lease, dispatch = eager.lease, eager.dispatch
            current.lease = lease
        ctx.metrics.count("eager_dispatches")


async def _claimed_state(ctx: Context, lease: work.Lease) -> Instance | None:
    """The instance as its claim read it (a short history comes with the claim), to
    commit on without reading it again; None when it did not come or does not replay."""
    if not lease.events:
        return None
    try:
        return replay(await ctx.registries.get(), lease.events)
    except ReplayRejected:  # e.g. a version this worker has not loaded: read it instead
        return None


@dataclass
class LeaseHolder:
    """The lease a processor currently works under (eager dispatch moves it on), which
    the worker's renewal task keeps alive.

    ``committing`` is true while the processor commits the outcome that completes its
    lease, until it has switched to the lease handed on: a renewal that meanwhile finds
    the lease gone may be seeing that very commit, so it must not cancel the processor
    (the commit is fenced by the lease and reports a real loss itself)."""

    lease: work.Lease
    lease_for: timedelta
    committing: bool = False

    @contextlib.contextmanager
    def completing(self) -> Iterator[None]:
        """Mark the commit that completes the current lease (see the class)."""
        self.committing = True
        try:
            yield
        finally:
            self.committing = False


class StartOrSettle:
    """Start the dispatched attempt, or settle a redelivery as unknown, or give up.

    ``settled`` tells the commit to finish the lease: a settled redelivery has nothing
    left to run, while a started attempt keeps its lease for the handler. An attempt
    whose retry time has not come when the work was claimed (``claimed_at``) waits.
    """

    def __init__(self, track: Track, dispatch: Dispatch, claimed_at: datetime) -> None:
        self.track = track
        self.dispatch = dispatch
        self.claimed_at = claimed_at
        self.settled = False

    def __call__(self, draft: Draft) -> None:
        track, dispatch = self.track, self.dispatch
        state = draft.state
        progress = track.progress(state, dispatch.step)
        self.settled = False
        if state.status.terminal or progress is None or progress.attempt > dispatch.attempt:
            raise Obsolete
        if progress.attempt == dispatch.attempt:
            if progress.status is not A.RUNNING:
                raise Obsolete
            # Durably started by an earlier owner that vanished: its effect may exist.
            _outcome(draft, track, dispatch, Unknown(track.unknown_code))
            self.settled = True
            return
        if state.status is S.PAUSED:
            raise Park
        if state.status not in track.statuses or progress.status not in (
            A.READY,
            A.RETRY_WAITING,
        ):
            raise Obsolete
        if progress.retry_at is not None:
            wait_until(draft, progress.retry_at, self.claimed_at)
        track.start(draft, dispatch.step, dispatch.attempt, dispatch.key)


def _record(track: Track, dispatch: Dispatch, outcome: Outcome) -> Callable[[Draft], None]:
    def build(draft: Draft) -> None:
        progress = track.progress(draft.state, dispatch.step)
        if (
            draft.state.status.terminal
            or progress is None
            or progress.status is not A.RUNNING
            or progress.attempt != dispatch.attempt
        ):
            raise Obsolete
        _outcome(draft, track, dispatch, outcome)

    return build


def _outcome(draft: Draft, track: Track, dispatch: Dispatch, outcome: Outcome) -> None:
    """Record ``outcome``; a failure's detail is cut to the step's result limit
    (``bounded_detail``) so that a known failure or an unknown outcome is always written."""
    succeeded, failed, unknown = track.outcome_kinds
    at = (draft, dispatch.step, dispatch.attempt)
    if isinstance(outcome, Succeeded):
        decisions.record_outcome(*at, succeeded, outcome.result)
        return
    detail = bounded_detail(outcome.details, track.result_limit(draft.state, dispatch.step))
    if isinstance(outcome, Failed):
        decisions.record_outcome(*at, failed, detail, outcome.code, outcome.retryable)
    else:
        decisions.record_outcome(*at, unknown, detail, outcome.code)


async def _run(ctx: Context, state: Instance, track: Track, dispatch: Dispatch) -> Outcome:
    progress = track.progress(state, dispatch.step)
    target, timeout = track.target_and_timeout(state, dispatch.step)
    handler = ctx.activities.get(target)
    if handler is None:  # the attempt is started: without a handler its outcome is unknown
        return Unknown("activity-handler-missing")
    request = ActivityRequest(
        instance_id=state.instance_id,
        step=dispatch.step,
        target=target,
        attempt=dispatch.attempt,
        idempotency_key=progress.idempotency_key,
        deadline=progress.due_at,
        input=_value(progress.input),
        compensation=track.compensation,
        results=_results(state),
    )
    return await run_handler(handler, request, timeout.total_seconds(), ctx.threads)


def _value(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _results(state: Instance) -> dict[str, Any]:
    return {p.step: _value(p.result) for p in state.activities.values() if p.status is A.SUCCEEDED}


# Timers -------------------------------------------------------------------------------


async def process_timer(ctx: Context, lease: work.Lease) -> None:
    try:
        step = str(json.loads(lease.payload or "")["step"])
    except (ValueError, KeyError, TypeError):
        await work.dead_letter(ctx.store, lease, "invalid-timer-dispatch")
        return

    def build(draft: Draft) -> None:
        state = draft.state
        timer = state.timers.get(step)
        if state.status.terminal or timer is None or timer.fired_at is not None:
            raise Obsolete
        if state.status is S.PAUSED:
            raise Park
        owner = state.spec.owners.get(step)
        if state.status is not S.RUNNING or (owner and owner in state.race_winners):
            raise Obsolete  # the race was decided without this timer
        wait_until(draft, timer.due_at, lease.claimed_at)
        try:
            decisions.fire_timer(draft, step)
        except ReplayRejected:
            raise Obsolete from None

    await commit(ctx, lease, build)
    ctx.faults.reach(Boundary.AFTER_TIMER_FIRE)


# Children -----------------------------------------------------------------------------


async def process_child(ctx: Context, lease: work.Lease) -> None:
    from engine.child_starts import start_child

    dispatch = _dispatch(lease)
    if dispatch is None:
        await work.dead_letter(ctx.store, lease, "invalid-child-dispatch")
        return
    await start_child(ctx, lease, dispatch)
