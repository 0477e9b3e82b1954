"""The asyncio worker: claim due work under leases, process it, keep the leases alive.

- Bounded concurrency: it claims only up to its free slots, and only work whose
  target it has a handler for (timers and children need none). Sync handlers run in
  threads of its own, one per slot; a handler still running after its attempt ended
  (timed out) holds its slot until it returns, so no attempt waits for a thread.
- Each lease is renewed on its own task well before it expires; a renewal that finds
  the lease gone cancels the processor, which then records nothing (not while the
  processor commits the outcome that completes that lease: the renewal may be seeing
  that commit, which is fenced and reports a real loss itself).
- It wakes on ``LISTEN`` (a hint) and otherwise polls at a bounded interval.
- It holds a session-level advisory lock named by its id, so a recovery sweep can
  expire the leases of a worker whose session is gone without waiting out the lease
  (fencing still rejects that worker if it turns out to be alive).
- On stop (SIGTERM/SIGINT in the CLI) it stops claiming and starts no new attempt
  (nothing is handed on eagerly: the next step is left due for a claim), lets in-flight
  work finish up to ``drain_timeout`` (decisions already made are committed), then
  cancels the rest,
  whose leases expire and are redelivered as unknown outcomes where a handler ran. A
  sync handler cancelled so keeps running in its thread, which does not hold the
  process's exit (``engine.worker.handler_threads``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import psycopg

from engine import modes
from engine.model.errors import WaylineError
from engine.model.identifiers import id_problem
from engine.model.limits import (
    MAX_LEASE_DURATION,
    MAX_WORK_CLAIM_ITEMS,
    MAX_WORKER_CONCURRENCY,
    MAX_WORKER_DRAIN,
    MAX_WORKER_POLL_INTERVAL,
    MIN_LEASE_DURATION,
    MIN_WORKER_POLL_INTERVAL,
)
from engine.model.transitions import work_label
from engine.model.words import counted
from engine.store import holds, leases, sweeps, workers
from engine.store.errors import CommitUnknown, StaleLease, StoreError, StoreUnavailable
from engine.store.store import Store
from engine.worker import logs
from engine.worker.activities import ActivityRegistry
from engine.worker.faults import Boundary, Faults
from engine.worker.handler_threads import HandlerThreads
from engine.worker.hooks import WorkerHooks
from engine.worker.instance_cache import RegistrySource
from engine.worker.leased_commits import Context, LeaseHolder, step_of
from engine.worker.metrics import Metrics
from engine.worker.tracing import Tracing

log = logging.getLogger("wayline.worker")


SHARED_ID = (
    "worker id {} is in use by another live worker: this one claims no work until that "
    "one stops (give each worker its own --worker-id)"
)
"""What a worker says, once, while another live session holds its id's owner lock."""
OUTAGE_ERRORS = (StoreUnavailable, CommitUnknown)
"""What a database outage raises: the database did not answer, or a write's answer was
lost (the lease expires and the redelivery settles it). Their words say all there is."""


def _log_failure(error: BaseException, what: str, *args: object) -> None:
    """Log that ``what`` failed: in one line when the database is out
    (``OUTAGE_ERRORS``: a traceback for every claim, sweep and heartbeat buried the log
    of an outage), with its traceback for anything else."""
    if isinstance(error, OUTAGE_ERRORS):
        log.warning(f"{what} failed: %s", *args, error)
    else:
        log.warning(f"{what} failed", *args, exc_info=error)


@dataclass(frozen=True)
class WorkerConfig:
    """Timing and capacity. ``check`` bounds the id, concurrency, lease, renewal, poll
    and drain, the values the command line takes; the heartbeat and sweep intervals,
    which only the drill harness changes, are not checked."""

    worker_id: str = field(default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}")
    concurrency: int = 16
    lease: timedelta = timedelta(seconds=30)
    renew_every: timedelta = timedelta(seconds=10)
    poll_interval: timedelta = timedelta(seconds=1)
    drain_timeout: timedelta = timedelta(seconds=30)
    heartbeat_every: timedelta = timedelta(seconds=5)
    sweep_every: timedelta = timedelta(milliseconds=500)

    def check(self) -> None:
        if problem := id_problem(self.worker_id):  # it names leases, logs and metrics
            raise ValueError(f"the worker id {problem}")
        if not 1 <= self.concurrency <= MAX_WORKER_CONCURRENCY:
            raise ValueError(f"concurrency must be from 1 to {MAX_WORKER_CONCURRENCY}")
        if not MIN_LEASE_DURATION <= self.lease <= MAX_LEASE_DURATION:
            raise ValueError(f"lease must be from {MIN_LEASE_DURATION} to {MAX_LEASE_DURATION}")
        if not timedelta(0) < self.renew_every < self.lease:
            raise ValueError("renew_every must be more than 0 and less than the lease")
        if not MIN_WORKER_POLL_INTERVAL <= self.poll_interval <= MAX_WORKER_POLL_INTERVAL:
            raise ValueError(
                f"poll_interval must be from {MIN_WORKER_POLL_INTERVAL} "
                f"to {MAX_WORKER_POLL_INTERVAL}"
            )
        if not timedelta(0) < self.drain_timeout <= MAX_WORKER_DRAIN:
            raise ValueError(f"drain_timeout must be more than 0 and at most {MAX_WORKER_DRAIN}")


class Worker:
    """One worker process's loop. ``await Worker(...).run(stop_event)``."""

    def __init__(
        self,
        store: Store,
        activities: ActivityRegistry,
        config: WorkerConfig | None = None,
        faults: Faults | None = None,
        metrics: Metrics | None = None,
        hooks: WorkerHooks | None = None,
        tracer_provider: Any = None,
    ) -> None:
        """``tracer_provider``: where its spans go (the process's OpenTelemetry provider
        unless given; no spans when neither is installed, ``engine.worker.tracing``)."""
        self.store = store
        self.config = config or WorkerConfig()
        self.config.check()
        self.tasks: set[asyncio.Task] = set()
        self.offers: list[leases.Lease] = []
        """Offered leases being taken: the claim waits for them (it would race them)."""
        self.wake = asyncio.Event()
        self.owner_locked = asyncio.Event()
        self.shared_id = ""
        """Why the owner lock is not held when another live worker has this id."""
        self.ctx = Context(
            store,
            activities,
            RegistrySource(store),
            faults or Faults(),
            metrics or Metrics(),
            HandlerThreads(self.config.concurrency, on_free=self.wake.set),
            hooks or WorkerHooks(),
            Tracing.of(self.config.worker_id, tracer_provider),
        )
        self.metrics.declare_worker()
        self.metrics.gauge("lingering_handlers", lambda: self.ctx.threads.lingering)

    @property
    def metrics(self) -> Metrics:
        return self.ctx.metrics

    async def run(self, stop: asyncio.Event) -> None:
        """Process work until ``stop`` is set, then drain. Its JSON log records name this
        worker (``worker_id``), the tasks it starts inheriting it, wherever it runs (the
        studio runs one as a task of its own)."""
        logs.bind(worker_id=self.config.worker_id)
        background = [
            asyncio.create_task(self._listen(stop)),
            asyncio.create_task(self._every(self.config.heartbeat_every, self._heartbeat, stop)),
            asyncio.create_task(self._every(self.config.sweep_every, self._sweep, stop, now=True)),
        ]
        drained = False
        try:
            await self._heartbeat()
            await self._loop(stop)
            self.ctx.draining = True
            await self._drain()
            drained = True
        finally:
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            if drained:  # after the last heartbeat, which would count it as running again
                await self._stopped()
            await self.ctx.commits.close()
            self.ctx.threads.close()

    async def _loop(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            # Cleared before the claim: a wake-up that arrives while it runs (work
            # committed after the claim's snapshot) must end the wait below at once.
            self.wake.clear()
            free = self.config.concurrency - len(self.tasks) - self.ctx.threads.lingering
            ready = self.owner_locked.is_set()
            taking = any(leases.untaken(lease) for lease in self.offers)
            claimed = await self._claim(free) if free > 0 and ready and not taking else []
            if claimed and len(claimed) == min(free, MAX_WORK_CLAIM_ITEMS):
                continue  # there may be more due right now
            waiters = [
                asyncio.create_task(stop.wait()),
                asyncio.create_task((self.wake if ready else self.owner_locked).wait()),
            ]
            await asyncio.wait(
                waiters,
                timeout=self.config.poll_interval.total_seconds(),
                return_when=asyncio.FIRST_COMPLETED,
            )
            for waiter in waiters:
                waiter.cancel()

    async def _claim(self, free: int) -> list[leases.Lease]:
        started = time.perf_counter()
        try:
            claimed = await leases.claim(
                self.store,
                self.config.worker_id,
                self.config.lease,
                min(free, MAX_WORK_CLAIM_ITEMS),
                targets=self.ctx.activities.targets,
            )
        except (StoreError, psycopg.Error, OSError) as error:
            self.metrics.count("claim_failures")
            _log_failure(error, "claim (tried again after the poll interval)")
            return []
        self.metrics.observe("claim", time.perf_counter() - started)
        self.metrics.count("claimed", len(claimed))
        for lease in claimed:
            self.ctx.faults.reach(Boundary.AFTER_CLAIM, step_of(lease))
            if lease.attempt > 1:
                self.metrics.count("readmitted")
            self._start(lease)
        return claimed

    def _start(self, lease: leases.Lease) -> None:
        task = asyncio.create_task(self._process(lease))
        self.tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task) -> None:
        saturated = len(self.tasks) >= self.config.concurrency
        self.tasks.discard(task)
        if saturated:  # the loop skipped claims while no slot was free: claim now
            self.wake.set()

    async def _process(self, lease: leases.Lease) -> None:
        started = time.perf_counter()
        current = LeaseHolder(lease, self.config.lease)
        processor = asyncio.create_task(process(self.ctx, current))
        renewer = asyncio.create_task(self._renew(current, processor))
        try:
            await processor
            self.metrics.count("completed", kind=work_label(lease.kind))
        except StaleLease:
            self.metrics.count("offers_missed" if leases.untaken(lease) else "lease_lost")
        except asyncio.CancelledError:
            if renewer.done():
                self.metrics.count("lease_lost")
            else:
                raise
        except (WaylineError, psycopg.Error, OSError) as error:
            # The lease expires and the work is redelivered; an in-flight attempt then
            # becomes unknown, so nothing is silently retried.
            self.metrics.count("processing_failures")
            _log_failure(error, "processing %s", lease.work_id)
        finally:
            renewer.cancel()
            self.metrics.observe("processing", time.perf_counter() - started)
            if lease.offer is not None:
                self.offers.remove(lease)
            if leases.untaken(lease):  # its work is where the offer found it, or taken
                self.wake.set()

    async def _renew(self, current: LeaseHolder, processor: asyncio.Task) -> None:
        """Keep whichever lease the processor works under alive; cancel it when lost.

        Ends with its processor even when the cancellation ``_process`` sends is lost:
        Python 3.11's ``asyncio.wait_for`` (the pool waits for a connection with it)
        drops a cancellation that arrives as the wait succeeds, and a renewal loop that
        missed it would keep a failed processor's lease alive for good."""
        while not processor.done():
            await asyncio.sleep(self.config.renew_every.total_seconds())
            self.ctx.faults.reach(Boundary.IN_LEASE_RENEWAL, step_of(current.lease))
            lease = current.lease
            if leases.untaken(lease):
                continue  # not held yet: the write that takes it leases it
            try:
                await leases.renew(self.store, lease, self.config.lease)
                leases.confirm(lease)
            except StaleLease:
                if current.lease is not lease:
                    continue  # the processor moved on to the lease its commit handed on
                if not self.ctx.hooks.lost_lease_cancels(not current.committing):
                    continue  # the processor's own commit finished that lease (eager)
                log.warning(
                    "lease %s on work %s was lost: its processor is cancelled",
                    lease.token,
                    lease.work_id,
                )
                processor.cancel()
                return
            except (StoreError, psycopg.Error, OSError):
                self.metrics.count("renew_failures")

    async def _drain(self) -> None:
        """Let the work in flight finish for up to ``drain_timeout``; what is still running
        then is abandoned, and said so: its attempts may have had their effects, so the
        next worker records them unknown, and an operator should know why."""
        if self.tasks:
            _, pending = await asyncio.wait(
                self.tasks, timeout=self.config.drain_timeout.total_seconds()
            )
            if pending:
                log.warning(
                    "the drain ran out after %g s: %s still running abandoned; its attempts "
                    "are recorded unknown once their leases are recovered",
                    self.config.drain_timeout.total_seconds(),
                    counted(len(pending), "work item"),
                )
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    async def _listen(self, stop: asyncio.Event) -> None:
        """Hold the owner lock and wake on NOTIFY; reconnect after a failure.

        Claims wait until the lock is held: a worker whose lock is free looks dead to the
        recovery sweep, which would expire its leases under it.
        """
        while not stop.is_set():
            try:
                async with await self.store.dedicated() as conn:
                    await sweeps.hold_owner_lock(conn, self.store.schema, self.config.worker_id)
                    if self.shared_id:
                        log.warning("worker id %s is free again: claiming", self.config.worker_id)
                    self.shared_id = ""
                    self.owner_locked.set()
                    await conn.execute(f"LISTEN {self.store.channel}")
                    async for notice in conn.notifies():
                        self._take(notice.payload, stop)
                        self.wake.set()  # a claim waits while an offer is being taken
            except sweeps.OwnerLockHeld:
                self.metrics.count("listen_failures")
                if not self.shared_id:  # said once, not at every try
                    self.shared_id = SHARED_ID.format(self.config.worker_id)
                    log.warning("%s", self.shared_id)
            except (StoreError, psycopg.Error, OSError):
                self.metrics.count("listen_failures")
            finally:
                self.owner_locked.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.config.poll_interval.total_seconds())

    def _take(self, payload: str, stop: asyncio.Event) -> None:
        """Process the lease a start offers with its NOTIFY (``engine.store.offers``),
        when this worker has nothing else in hand and can run it. Its first write takes
        the lease; if it finds it taken elsewhere, the claim runs (``_process``)."""
        if self.tasks or self.ctx.threads.lingering or stop.is_set() or not payload:
            return
        lease = leases.offered(
            payload, self.config.worker_id, self.config.lease, self.store.clock.now()
        )
        if lease is None or not (lease.target == "" or self.ctx.activities.runs(lease.target)):
            return
        self.metrics.count("offered")
        self.offers.append(lease)
        self._start(lease)

    async def _every(
        self, interval: timedelta, action, stop: asyncio.Event, now: bool = False
    ) -> None:
        """Run ``action`` every ``interval`` (first at once when ``now``: a fresh worker
        sweeps before its first wait, so a crashed predecessor's work is freed at once)."""
        while not stop.is_set():
            if not now:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), interval.total_seconds())
            now = False
            if not stop.is_set():
                try:
                    await action()
                except (StoreError, psycopg.Error, OSError) as error:
                    _log_failure(error, action.__name__.strip("_"))

    async def _heartbeat(self) -> None:
        await self.store.sync_clock()
        await workers.heartbeat(
            self.store,
            self.config.worker_id,
            self.ctx.activities.targets,
            self.config.concurrency,
            socket.gethostname(),
            os.getpid(),
        )

    async def _stopped(self) -> None:
        """Record the clean stop, so this worker's targets stop counting as running at
        once (``workers.stopped``); a store that does not answer is only logged: the
        heartbeat then goes stale within ``workers.RUNNING_WITHIN`` anyway."""
        try:
            await workers.stopped(self.store, self.config.worker_id, os.getpid())
        except (StoreError, psycopg.Error, OSError) as error:
            _log_failure(error, "record of the stop")

    async def _sweep(self) -> None:
        self.ctx.faults.reach(Boundary.IN_RECOVERY)
        expired = await sweeps.expire_leases_of_dead_owners(self.store)
        dead = await sweeps.sweep_expired_deadlines(self.store)
        released = await holds.drain(self.store)
        self.metrics.count("recovered_leases", expired)
        self.metrics.count("dead_letters", dead)
        if expired or released:
            self.wake.set()


async def process(ctx: Context, current: LeaseHolder) -> None:
    """Run one leased work item to a committed result (or lose the lease trying), with
    the processor of its kind that a definition mode installed (``engine.modes``)."""
    run = modes.processor(current.lease.kind)
    if run is None:
        await ctx.dead_letter(current.lease, "unsupported-work-kind")
        return
    await run(ctx, current)
