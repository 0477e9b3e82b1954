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
"""

from __future__ import annotations

import contextlib
import functools
import json
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from engine import modes
from engine.decide import decisions
from engine.model.errors import ReplayRejected
from engine.model.events import EventKind
from engine.model.instance import AttemptProgress, AttemptStatus, Instance, InstanceStatus
from engine.model.transitions import Draft
from engine.replay.fold import replay
from engine.store import leases
from engine.worker import logs
from engine.worker.activities import (
    ActivityRequest,
    Failed,
    Outcome,
    Succeeded,
    Unknown,
    bounded_detail,
    recordable,
    run_handler,
)
from engine.worker.faults import Boundary
from engine.worker.hooks import WorkerHooks
from engine.worker.leased_commits import (
    Context,
    Dispatch,
    Eager,
    LeaseHolder,
    Obsolete,
    Park,
    commit,
    dispatch_of,
    redelivered,
    wait_until,
)
from engine.worker.tracing import Attempt, started_ns

A = AttemptStatus
S = InstanceStatus
UNTRACED = contextlib.nullcontext()
"""An attempt's span when traces are off (reusable: it holds nothing)."""
K = EventKind


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
        spec = state.step(step)
        if self.compensation:
            return spec.compensation.target, spec.compensation.timeout
        return spec.target, spec.timeout

    def result_limit(self, state: Instance, step: str) -> int:
        spec = state.step(step)
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


async def process_activity(ctx: Context, current: LeaseHolder) -> None:
    """Run an activity attempt under ``current`` (see the module)."""
    await _process_attempt(ctx, ACTIVITY, current)


async def process_compensation(ctx: Context, current: LeaseHolder) -> None:
    """Run a compensation attempt under ``current``, like an activity's."""
    await _process_attempt(ctx, COMPENSATION, current)


async def _process_attempt(ctx: Context, track: Track, current: LeaseHolder) -> None:
    lease = current.lease
    dispatch = dispatch_of(lease)
    if dispatch is None:
        await ctx.dead_letter(lease, track.poison_code)
        return
    start = StartOrSettle(track, dispatch, lease, ctx.hooks)
    claimed = await _claimed_state(ctx, lease)
    began = started_ns()
    state = await commit(ctx, lease, start, finish=start.finishes, known=claimed)
    if start.settled is not None and state is not None:
        _settled(ctx, state, track, dispatch, start.settled, began)
    if state is None or track.progress(state, dispatch.step).status is not A.RUNNING:
        return
    if start.never_leased:
        # Nothing was committed under this claim, which is not yet durable (see
        # ``engine.store.leases``): a renewal's synchronous commit makes it so before the
        # handler's effect can exist.
        current.lease = await leases.renew(ctx.store, current.lease, current.lease_for)
        leases.confirm(current.lease)
    if await run_attempts(ctx, track, current, state, dispatch):
        decide = modes.processor(current.lease.kind)
        assert decide is not None  # handed on only when this worker runs its code
        await decide(ctx, current)


def _settled(
    ctx: Context, state: Instance, track: Track, dispatch: Dispatch, outcome: Outcome, began: int
) -> None:
    """Count (and trace) the outcome recorded for a redelivered attempt without running
    its handler again: unknown, unless a harness's hooks chose another."""
    kind = type(outcome).__name__.lower()
    ctx.metrics.count("outcomes", kind=kind, track=track.name)
    if ctx.tracing is not None:
        at = (dispatch.step, dispatch.attempt, dispatch.key)
        with ctx.tracing.attempt(state, track.name, *at, started_ns=began) as span:
            span.outcome(kind, getattr(outcome, "code", ""))


async def run_attempts(
    ctx: Context, track: Track, current: LeaseHolder, state: Instance, dispatch: Dispatch
) -> bool:
    """Run the started attempt ``dispatch`` under ``current`` and record its outcome;
    then each activity eagerly handed on to this worker with it, the same way. True
    when a code-first run's decision was handed on instead: ``current`` holds its lease
    and the caller runs it."""
    lease = current.lease
    while True:
        with _observed(ctx, state, track, dispatch) as span:
            ctx.faults.reach(Boundary.AFTER_ATTEMPT_START, dispatch.step)
            started = time.perf_counter()
            outcome = await _run(ctx, state, track, dispatch)
            ctx.metrics.observe("step", time.perf_counter() - started, track=track.name)
            ctx.faults.reach(Boundary.AFTER_HANDLER, dispatch.step)
            kind = type(outcome).__name__.lower()
            if span is not None:
                span.outcome(kind, getattr(outcome, "code", ""))
            eager = Eager(ctx, current.lease_for) if track is ACTIVITY else None
            record = _record(track, dispatch, outcome)
            with current.completing():
                state = await commit(ctx, lease, record, eager=eager, known=state)
                if state is not None:  # recorded: an outcome a lost lease kept from its
                    # commit is counted once, as the redelivery settles it (unknown)
                    ctx.metrics.count("outcomes", kind=kind, track=track.name)
                if eager is None or eager.lease is None or state is None:
                    return False
                current.lease = eager.lease
                ctx.metrics.count("eager_dispatches")
                if eager.dispatch is None:
                    return True
                lease, dispatch = eager.lease, eager.dispatch


def _observed(
    ctx: Context, state: Instance, track: Track, dispatch: Dispatch
) -> contextlib.AbstractContextManager[Attempt | None]:
    """The attempt's span (``engine.worker.tracing``), or nothing when traces are off;
    the attempt's ids are bound for JSON logs (``engine.worker.logs``). Both cost a test
    each when off: this runs for every attempt."""
    if logs.json_logs:
        logs.bind(
            instance_id=state.instance_id,
            step=dispatch.step,
            attempt=dispatch.attempt,
            idempotency_key=dispatch.key,
        )
    if ctx.tracing is None:
        return UNTRACED
    return ctx.tracing.attempt(state, track.name, dispatch.step, dispatch.attempt, dispatch.key)


async def _claimed_state(ctx: Context, lease: leases.Lease) -> Instance | None:
    """The instance as its claim read it (a short history comes with the claim), to
    commit on without reading it again; None when it did not come or does not replay."""
    if not lease.events:
        return None
    try:
        return replay(await ctx.registries.get(), lease.events)
    except ReplayRejected:  # e.g. a version this worker has not loaded: read it instead
        return None


class StartOrSettle:
    """Start the dispatched attempt, or settle a redelivery as unknown, or give up.

    ``settled`` tells the commit to finish the lease: a settled redelivery has nothing
    left to run, while a started attempt keeps its lease for the handler. An attempt
    whose retry time has not come when the work was claimed (``lease.claimed_at``) waits.
    ``hooks`` see the redelivery's outcome and the start (``engine.worker.hooks``).

    An attempt found started under the first lease its work ever had (token 1) is not a
    redelivery: eager dispatch started it in the statement whose work row an incident
    hold parked unleased (``migrations/0017_holds.sql``), so no worker ran its handler,
    and it runs now under its own key (``never_leased``). Every other path to a started
    attempt leased its row first, so a crash or a lost lease always leaves a later token.
    """

    def __init__(
        self, track: Track, dispatch: Dispatch, lease: leases.Lease, hooks: WorkerHooks
    ) -> None:
        self.track = track
        self.dispatch = dispatch
        self.claimed_at = lease.claimed_at
        self.first_lease = lease.token == 1
        self.hooks = hooks
        self.settled: Outcome | None = None
        """The outcome a settled redelivery records (None: the attempt starts)."""
        self.never_leased = False
        """Whether the attempt was started already, by a hand-on no worker leased."""

    def finishes(self) -> bool:
        """Whether the commit of the last build finishes the lease (a settled redelivery)."""
        return self.settled is not None

    def __call__(self, draft: Draft) -> None:
        track, dispatch = self.track, self.dispatch
        state = draft.state
        progress = track.progress(state, dispatch.step)
        self.settled = None
        self.never_leased = False
        startable = (A.READY, A.RETRY_WAITING)
        if redelivered(state, progress, dispatch.attempt, A.RUNNING, startable, track.statuses):
            if self.first_lease:
                self.never_leased = True
                self.hooks.attempt_starting(functools.partial(_request, state, track, dispatch))
                return
            # Durably started by an earlier owner that vanished: its effect may exist.
            outcome = self.hooks.redelivered_in_flight(Unknown(track.unknown_code))
            if outcome is not None:
                _outcome(draft, track, dispatch, outcome)
                self.settled = outcome
            return
        if progress.retry_at is not None:
            wait_until(draft, progress.retry_at, self.claimed_at)
        track.start(draft, dispatch.step, dispatch.attempt, dispatch.key)
        self.hooks.attempt_starting(functools.partial(_request, draft.state, track, dispatch))


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
        decisions.record_outcome(*at, succeeded, outcome.result, data=outcome.data)
        return
    detail = bounded_detail(outcome.details, track.result_limit(draft.state, dispatch.step))
    if isinstance(outcome, Failed):
        decisions.record_outcome(*at, failed, detail, outcome.code, outcome.retryable)
    else:
        decisions.record_outcome(*at, unknown, detail, outcome.code)


async def _run(ctx: Context, state: Instance, track: Track, dispatch: Dispatch) -> Outcome:
    effect = modes.of(state.spec).effect
    if effect is not None:  # the mode's steps are its own code, not activity handlers
        return await effect(ctx, state, dispatch.step, track.compensation)
    target, timeout = track.target_and_timeout(state, dispatch.step)
    handler = ctx.activities.get(target)
    if handler is None:  # the attempt is started: without a handler its outcome is unknown
        return Unknown("activity-handler-missing")
    request = _request(state, track, dispatch)
    executor = ctx.hooks.handler_executor(ctx.threads)
    outcome = await run_handler(handler, request, timeout.total_seconds(), executor)
    return recordable(outcome, request, track.result_limit(state, dispatch.step), track.name)


def _request(state: Instance, track: Track, dispatch: Dispatch) -> ActivityRequest:
    """What the handler of the started attempt ``dispatch`` gets."""
    progress = track.progress(state, dispatch.step)
    target, _ = track.target_and_timeout(state, dispatch.step)
    return ActivityRequest(
        instance_id=state.instance_id,
        step=dispatch.step,
        target=target,
        attempt=dispatch.attempt,
        idempotency_key=progress.idempotency_key,
        deadline=progress.due_at,
        input=_value(progress.input),
        compensation=track.compensation,
        results=_Results(state.activities),
    )


def _value(text: str | None) -> Any:
    return None if text is None else json.loads(text)


class _Results(Mapping[str, Any]):
    """The results of an instance's succeeded activities by step (``ActivityRequest``),
    each decoded when the handler first reads it: the handler of a long instance's step
    pays for the results it reads, not for every step before it (whose progress a
    restored snapshot has not even decoded: ``engine.model.deferred``)."""

    def __init__(self, activities: Mapping[str, AttemptProgress]) -> None:
        self._activities = activities
        self._decoded: dict[str, Any] = {}

    def __getitem__(self, step: str) -> Any:
        if step not in self._decoded:
            progress = self._activities.get(step)
            if progress is None or progress.status is not A.SUCCEEDED:
                raise KeyError(step)
            self._decoded[step] = _value(progress.result)
        return self._decoded[step]

    def __iter__(self) -> Iterator[str]:
        return (step for step, p in self._activities.items() if p.status is A.SUCCEEDED)

    def __len__(self) -> int:
        return sum(1 for _ in self)


# Timers -------------------------------------------------------------------------------


async def process_timer(ctx: Context, current: LeaseHolder) -> None:
    """Fire a timer that is due, unless its instance no longer waits for it."""
    lease = current.lease
    try:
        step = str(json.loads(lease.payload or "")["step"])
    except (ValueError, KeyError, TypeError):
        await ctx.dead_letter(lease, "invalid-timer-dispatch")
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

    began = started_ns()
    state = await commit(ctx, lease, build)
    if ctx.tracing is not None and state is not None:
        ctx.tracing.record(f"timer {step}", state, began, **{"wayline.step": step})
    ctx.faults.reach(Boundary.AFTER_TIMER_FIRE, step)
