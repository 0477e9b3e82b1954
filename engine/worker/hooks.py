"""The worker's seam: the points where a harness may watch or change what a worker
decides, without patching it.

A worker is given a ``WorkerHooks`` (``Worker(..., hooks=...)``); each method is one
point, named for what happens there, and its default is exactly the worker's own
behaviour. Points that decide something receive the worker's decision and return the
one it acts on. The drill harness's self-test builds broken workers by overriding one
point (``verification.mutants``); the SQL side of the engine has its own seam, the
store's statement filter and hooks (``engine.store.seams``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import psycopg

from engine.model.instance import Instance
from engine.model.transitions import Transition
from engine.modes.code.journal import Advance, Diverged
from engine.worker.activities import ActivityRequest, HandlerExecutor, Outcome, Unknown


class WorkerHooks:
    """The worker's decision points; subclass and override (the defaults decide as the
    worker does)."""

    def attempt_starting(self, request: Callable[[], ActivityRequest]) -> None:
        """An attempt's start is decided and about to be committed, not yet durable; its
        handler is called only once it is. ``request()`` is the request it will get."""

    def redelivered_in_flight(self, outcome: Unknown) -> Outcome | None:
        """A redelivered attempt was durably started by an owner that vanished: the
        outcome recorded for it (``outcome``: unknown, since its effect may exist), or
        None to record nothing (the handler would then run again)."""
        return outcome

    def handler_executor(self, threads: HandlerExecutor) -> HandlerExecutor:
        """Where a sync handler runs (``threads``: one of the worker's own handler
        threads, its timeout counted from when it starts)."""
        return threads

    def lost_lease_cancels(self, cancel: bool) -> bool:
        """A renewal found the lease its processor works under gone: whether the
        processor is cancelled (``cancel``: yes, unless it is committing the outcome
        that finishes that lease, which the renewal may be seeing)."""
        return cancel

    def write_again_after(self, delay: float | None) -> float | None:
        """A write the store reports not committed (safe to send again): the seconds
        to wait before sending it again, None to give up and raise (``delay``: the
        worker's next wait, None once its waits are used up)."""
        return delay

    async def within_connection(self, conn: psycopg.AsyncConnection) -> psycopg.AsyncConnection:
        """The connection a body that completes a draft inside its commit's transaction
        (a state machine's advance) runs and writes on (``conn``: that very transaction's,
        so what it writes commits exactly when the transition does)."""
        return conn

    def step_id(self, step_id: str, attempt: int) -> str:
        """The ``ctx.step_id`` a code-first step's body runs under in attempt ``attempt``
        (``step_id``: the attempt's recorded idempotency key, which a crash never changes)."""
        return step_id

    async def body_entering(
        self, run_id: str, step: str, step_id: str, attempt: int, compensation: bool
    ) -> None:
        """A code-first step's body (its compensation when ``compensation``) of run
        ``run_id`` is called next, in attempt ``attempt`` under ``step_id``: only its call
        is between this and its first line. An attempt's start does not say as much (its
        worker may die before the body runs), so a harness counts the bodies entered here."""

    async def journal_replayed(self, function: Callable[..., Any], state: Instance) -> None:
        """A decision replayed a code-first run's code (``function``) against its journal
        and committed what it asked next (``state``: the run after that); no recorded
        step's body ran again."""

    def starting_with(self, started: Sequence[Transition]) -> Sequence[Transition]:
        """The starts of new instances a commit writes in its own PostgreSQL transaction
        (``started``: a child created with its parent's news of it, a continued run's
        successor), which the worker commits with it: what one of them exists exactly
        when is the transaction's to decide."""
        return started

    def journal_diverged(self, advance: Diverged) -> Advance:
        """A decision's replay found the code differs from the journal: what the decision
        acts on (``advance``: the divergence, which parks the run, dead-lettered)."""
        return advance
