"""Committing under a lease: what every processor of leased work shares.

A processor builds its change on the instance's latest state and commits it fenced by
its lease (``commit``): conflicts are built again on the newer state, a write known not
to have committed is sent again, work the instance no longer wants is finished without
history (``Obsolete``) and work of a paused instance is parked (``Park``).

Work can also be claimed before its instance wants it: resuming re-arms all open work
at once, and an operator may retry a dead letter "now" while the attempt it starts
still waits out its policy backoff or its timer is not yet due. Such work is released,
unchanged and without history, until the instance's own due time (``NotDue``), because
replay forbids an attempt before its retry time and a timer fired early or with a time
still to come. Where the work's deadline comes first it is dead-lettered again
(``DUE_AFTER_DEADLINE``): the operator chose that deadline, so the operator decides
again (retry it with a deadline after the due time, or discard it). The
processors of activities, timers and children (``engine.worker.processors``,
``engine.decide.child_starts``), of a machine's advances
(``engine.modes.machines.advances``) and of a code run's decisions
(``engine.modes.code.processor``) all commit through here, so none of them imports
another.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import time
from collections.abc import Awaitable, Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

import psycopg

from engine.decide import decisions
from engine.decide.child_outcomes import parent_transitions
from engine.model.instance import Attempted, Instance, InstanceStatus
from engine.model.labelled import Labelled
from engine.model.transitions import Draft, Transition, WorkKind
from engine.modes import follow
from engine.store import leases
from engine.store.errors import (
    DuplicateTransition,
    SequenceConflict,
    StoreError,
    StoreUnavailable,
)
from engine.store.group_commit import CommitGroup
from engine.store.store import Store
from engine.worker.activities import ActivityRegistry
from engine.worker.faults import Boundary, Faults
from engine.worker.handler_threads import HandlerThreads
from engine.worker.hooks import WorkerHooks
from engine.worker.instance_cache import InstanceCache, RegistrySource
from engine.worker.metrics import Metrics
from engine.worker.tracing import Tracing

S = InstanceStatus
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


Within = Callable[[Draft, psycopg.AsyncConnection], Awaitable[None]]
"""Completes a draft inside its commit's transaction, writing on its connection."""


class Obsolete(Exception):
    """The instance no longer wants this work: finish the lease, write no history."""


class Park(Exception):
    """The instance is paused: push the work back until it resumes."""


class NotDue(Exception):
    """The work came before its instance wants it: release it until ``due_at``."""

    def __init__(self, due_at: datetime) -> None:
        super().__init__(f"not due before {due_at.isoformat()}")
        self.due_at = due_at


def redelivered(
    state: Instance,
    progress: Attempted | None,
    attempt: int,
    running: Labelled,
    startable: tuple[Labelled, ...],
    statuses: Collection[InstanceStatus] = (S.RUNNING,),
) -> bool:
    """Whether dispatched ``attempt`` was started already (this is a redelivery of it,
    still ``running``), or may start now (False). Raises Obsolete when the instance no
    longer wants it (it ended, moved past that attempt, or is not in one of
    ``statuses``, or the step is not ``startable``), Park while the instance is paused."""
    if state.status.terminal or progress is None or progress.attempt > attempt:
        raise Obsolete
    if progress.attempt == attempt:
        if progress.status is not running:
            raise Obsolete
        return True
    if state.status is S.PAUSED:
        raise Park
    if state.status not in statuses or progress.status not in startable:
        raise Obsolete
    return False


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
    hooks: WorkerHooks = field(default_factory=WorkerHooks)
    """The worker's decision points (``engine.worker.hooks``)."""
    tracing: Tracing | None = None
    """Where its spans go; None when traces are off (``engine.worker.tracing``)."""
    draining: bool = False
    """Set when the worker stops: in-flight attempts finish, but no new one is handed
    on eagerly (``Eager``), so a stopping worker starts nothing it may have to abandon."""
    cache: InstanceCache = field(init=False)
    commits: CommitGroup = field(init=False)

    def __post_init__(self) -> None:
        self.cache = InstanceCache(self.store, self.registries)
        self.commits = CommitGroup(self.store, on_group=self._group_written)

    def _group_written(self, members: int) -> None:
        self.metrics.observe("group", members, unit="size")

    async def dead_letter(self, lease: leases.Lease, code: str, detail: str = "") -> None:
        """Park ``lease``'s work as a dead letter (``leases.dead_letter``), counted in
        ``wayline_dead_letters_total`` with the sweep's, so the metric is every one."""
        await leases.dead_letter(self.store, lease, code, detail)
        self.metrics.count("dead_letters")


@dataclass(frozen=True)
class Dispatch:
    """What an attempt's work row names: the step, the attempt, its idempotency key."""

    step: str
    attempt: int
    key: str


def step_of(lease: leases.Lease) -> str:
    """The step whose work ``lease`` holds ('' when its payload names none): the fault
    boundaries count hits per step, so a drill plan can pin a fault on one step."""
    return _step_in(lease.payload or "")


@functools.lru_cache(maxsize=1024)
def _step_in(payload: str) -> str:
    """``step_of`` a payload, parsed once: every boundary a step reaches asks again."""
    try:
        return str(json.loads(payload)["step"])
    except (ValueError, KeyError, TypeError):
        return ""


def dispatch_of(lease: leases.Lease) -> Dispatch | None:
    """The attempt ``lease``'s work names; None when its payload does not name one."""
    try:
        payload = json.loads(lease.payload or "")
        return Dispatch(str(payload["step"]), int(payload["attempt"]), str(payload["key"]))
    except (ValueError, KeyError, TypeError):
        return None


@dataclass
class LeaseHolder:
    """The lease a processor currently works under (eager dispatch moves it on), which
    the worker's renewal task keeps alive.

    ``committing`` is true while the processor commits the outcome that completes its
    lease, until it has switched to the lease handed on: a renewal that meanwhile finds
    the lease gone may be seeing that very commit, so it must not cancel the processor
    (the commit is fenced by the lease and reports a real loss itself)."""

    lease: leases.Lease
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


async def commit(
    ctx: Context,
    lease: leases.Lease,
    build: Callable[[Draft], None],
    finish: bool | Callable[[], bool] = True,
    eager: Eager | None = None,
    known: Instance | None = None,
    within: Within | None = None,
    companions: Callable[[Draft], Sequence[Transition]] | None = None,
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

    ``within`` completes the draft inside the commit's own PostgreSQL transaction, with
    its connection (``leases.commit_built``): what it writes there commits exactly when
    the transition does, and any failure of it rolls both back and propagates.

    ``companions`` names, for the draft ``build`` made, the starts of new instances
    committed in the same transaction (a child created with its parent's news of it,
    so it exists exactly when its parent knows it does). A start that cannot be written
    is not the instance's conflict to build again: its error propagates.
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
            await ctx.commits.commit_all([], leases.LeaseFence(lease, finish=True))
            return None
        except Park:
            if guessed:
                continue
            await _park(ctx, lease, _now(ctx, state), state.sequence)
            return None
        except NotDue as early:
            if guessed:
                continue
            await _release_until(ctx, lease, early.due_at)
            return None
        if within is not None:
            try:
                await _commit_within(ctx, lease, draft, within)
            except (SequenceConflict, DuplicateTransition):
                ctx.cache.forget(lease.instance_id)
                continue
            ctx.cache.put(draft.state)
            return draft.state
        if not draft.events:
            if guessed:
                continue
            return state  # nothing new to record (e.g. a redelivered child start)
        follow(draft)
        fence = leases.LeaseFence(lease, finish() if callable(finish) else finish)
        if eager is not None:
            fence = eager.prepare(draft, fence)
        started = ctx.hooks.starting_with(companions(draft)) if companions is not None else ()
        transitions = [draft.build(), *await parent_transitions(ctx.cache, ctx.registries, draft)]
        ctx.faults.reach(Boundary.BEFORE_COMMIT, step_of(lease))
        try:
            committed = await _write(ctx, [*transitions, *started], fence)
        except (SequenceConflict, DuplicateTransition) as conflict:
            new = {t.instance_id for t in started}
            if isinstance(conflict, DuplicateTransition) and conflict.instance_id in new:
                raise  # a companion's id is taken: not this instance's to build again
            for transition in transitions:
                ctx.cache.forget(transition.instance_id)
            continue
        ctx.faults.reach(Boundary.AFTER_COMMIT, step_of(lease))
        ctx.cache.put(draft.state)
        if eager is not None:
            eager.lease = committed.next_lease
        return draft.state
    raise SequenceConflict(f"instance {lease.instance_id} kept changing under its worker")


async def _commit_within(ctx: Context, lease: leases.Lease, draft: Draft, within: Within) -> None:
    """``commit`` of a draft that ``within`` completes in the commit's transaction."""

    async def body(conn: psycopg.AsyncConnection) -> list[Transition]:
        await within(draft, await ctx.hooks.within_connection(conn))
        follow(draft)
        ctx.faults.reach(Boundary.BEFORE_COMMIT, step_of(lease))
        return [draft.build(), *await parent_transitions(ctx.cache, ctx.registries, draft)]

    what = f"commit under lease {lease.work_id}"
    await leases.commit_built(ctx.store, leases.LeaseFence(lease), body, what)
    leases.confirm(lease)
    ctx.faults.reach(Boundary.AFTER_COMMIT, step_of(lease))


async def _write(
    ctx: Context, transitions: list[Transition], fence: leases.LeaseFence
) -> leases.Committed:
    """Commit, and write again what is known not to have taken effect.

    The transitions carry what this processor knows (an attempt's outcome above all):
    dropped, the lease would expire and the attempt be recorded unknown though its
    outcome was in hand. So a write the store reports not committed (refused, cut off
    before the server got it, the database briefly unavailable) is sent again after
    each of ``WRITE_RETRY_DELAYS``. Fencing still decides: a lease lost meanwhile ends
    the retries with StaleLease, and an outcome that is unknown is never retried here."""
    tried = 0
    while True:
        started = time.perf_counter()
        try:
            committed = await ctx.commits.commit_all(transitions, fence)
            ctx.metrics.observe("commit", time.perf_counter() - started)
            leases.confirm(fence.lease)
            return committed
        except StoreError as exc:
            delay = _write_again_after(ctx, exc, tried)
            if delay is None:
                raise
            ctx.metrics.count("write_retries")
            log.warning("%s; writing it again in %.2f s", exc, delay)
        await asyncio.sleep(delay)
        tried += 1


def _write_again_after(ctx: Context, exc: StoreError, tried: int) -> float | None:
    """The wait before the next try of a write that failed ``tried + 1`` times with
    ``exc``; None when it is not sent again."""
    if type(exc) not in (StoreError, StoreUnavailable):
        return None  # not "safe to retry": unknown, stale, a conflict, ...
    planned = WRITE_RETRY_DELAYS[tried] if tried < len(WRITE_RETRY_DELAYS) else None
    return ctx.hooks.write_again_after(planned)


@dataclass
class Eager:
    """Eager dispatch of the next activity: start it in the outcome's transaction.

    Only an activity this worker has a handler for and that is due now; at most one, so
    it takes exactly the slot the finished attempt frees. Others wait for a claim.
    Failing that, a code-first run's decision due now whose code this worker has is
    handed on the same way (``dispatch`` stays None): the next decision then follows
    the outcome at once, on this worker, rather than after a claim. A draining worker
    hands nothing on: the next work is left due for a claim (by another worker, or by
    this one's successor), rather than started and then abandoned when the drain runs
    out, which would leave its attempt unknown.
    """

    ctx: Context
    lease_for: timedelta
    dispatch: Dispatch | None = None
    lease: leases.Lease | None = None

    def prepare(self, draft: Draft, fence: leases.LeaseFence) -> leases.LeaseFence:
        """Start the next activity in ``draft`` if it qualifies; ``fence`` then hands its
        work on to this worker."""
        self.dispatch = None
        due = [
            w
            for w in draft.work
            if w.kind in (WorkKind.ACTIVITY, WorkKind.DECISION)
            and w.available_at <= draft.now
            and self.ctx.activities.runs(w.target)
        ]
        item = min(due, key=lambda w: w.kind is not WorkKind.ACTIVITY, default=None)
        if item is None or draft.state.status is not S.RUNNING or self.ctx.draining:
            return fence
        if item.kind is WorkKind.DECISION:
            return replace(fence, lease_next=item.work_id, lease_for=self.lease_for)
        payload = json.loads(item.payload or "{}")
        self.dispatch = Dispatch(payload["step"], payload["attempt"], payload["key"])
        decisions.start_activity_attempt(
            draft, self.dispatch.step, self.dispatch.attempt, self.dispatch.key
        )
        return replace(fence, lease_next=item.work_id, lease_for=self.lease_for)


async def _park(ctx: Context, lease: leases.Lease, now: datetime, seen: int) -> None:
    """Push work back while its instance is paused (resuming re-arms it at once), as
    read at sequence ``seen``: a resume that commits after that read finds this row
    still leased, so the park itself makes it due when the instance has moved on.

    Never past the work's deadline: work that cannot wait that long keeps its lease
    until it expires, and once the deadline passes it becomes a visible dead letter.
    """
    until = min(now + PARK_FOR, lease.deadline - PARK_MARGIN)
    if until > now:
        await leases.park(ctx.store, lease, until, "paused", seen)


async def _release_until(ctx: Context, lease: leases.Lease, due_at: datetime) -> None:
    """Release work claimed early until ``due_at``; dead-letter it when its deadline comes
    first, since it could then never run in time (see the module docstring)."""
    if due_at < lease.deadline:
        await leases.retry_at(ctx.store, lease, due_at, NOT_YET_DUE)
    else:
        await ctx.dead_letter(lease, DUE_AFTER_DEADLINE)


def _now(ctx: Context, state: Instance) -> datetime:
    return max(ctx.store.now(), state.updated_at)
