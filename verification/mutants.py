"""Deliberately broken builds of the engine, for ``wayline drill self-test``.

A drill that cannot fail proves nothing. Each mutant here breaks one promise of the
engine and names the drills that must catch it; the self-test passes only if every
mutant is caught. A mutant breaks the engine only through the seams the engine offers:
the store's statement filter (its SQL sent rewritten) and hooks
(``engine.store.seams``), and the worker's hooks (``engine.worker.hooks``). A drill
worker process builds its store and worker with the mutant that ``WAYLINE_DRILL_MUTANT``
names (``from_env``, in ``verification.process_main``); a drill's clients that stand
for the engine's users (M2's submitters) open their stores with the same build
(``build_of``, in ``DrillEnv.client_store``).

A mutant names the engine's statements and decision points it breaks; if the engine
moves or changes one (a statement gone, a fragment no longer in it, a hook point
renamed), building the mutant fails loudly (MutantNotApplicable) instead of silently
testing an unbroken build.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from types import ModuleType
from typing import Any, TypeVar

import psycopg
from psycopg.abc import Query
from psycopg.conninfo import conninfo_to_dict

from engine.model.instance import Instance
from engine.model.transitions import Transition
from engine.modes.code.driver import find_command, run_body
from engine.modes.code.fold import entries
from engine.modes.code.journal import Advance, Diverged, EntryState, Verb, Waits
from engine.modes.code.step_ids import parse_step_id, step_id
from engine.store.errors import StoreError
from engine.store.seams import StatementFilter, StoreHooks, Unanswered
from engine.store.store import Store
from engine.worker.activities import (
    ActivityRegistry,
    ActivityRequest,
    Failed,
    Handler,
    HandlerExecutor,
    Outcome,
    Unknown,
)
from engine.worker.hooks import WorkerHooks
from verification.effects import LEDGER_DSN_ENV

MUTANT_ENV = "WAYLINE_DRILL_MUTANT"
APPLY_TIMEOUT_SECONDS = 120
"""How long building one mutant in a fresh interpreter may take (an import, on a busy host)."""
PREFLIGHT = "import verification.drill_app as d, verification.mutants as m; m.from_env(d.app)"
"""What a drill worker does with its mutant before it opens its store (see ``does_not_apply``)."""


class MutantNotApplicable(RuntimeError):
    """The engine no longer has what this mutant breaks; update the mutant."""


@dataclass(frozen=True)
class Build:
    """A build of the engine as its seams make it: what a drill worker opens its store
    and runs its worker with (all None: the engine as it is)."""

    statement_filter: StatementFilter | None = None
    store_hooks: StoreHooks | None = None
    worker_hooks: WorkerHooks | None = None


@dataclass(frozen=True)
class Mutant:
    """A deliberately broken engine the self-test runs the drills against: a mutant no
    drill catches is a promise the drills do not guard."""

    name: str
    breaks: str
    """The promise it breaks, in a sentence."""
    drills: tuple[str, ...]
    """Drill ids that must catch it (any one failing counts as caught)."""
    build: Callable[[ActivityRegistry], Build]


def from_env(app: ActivityRegistry) -> Build:
    """The build ``WAYLINE_DRILL_MUTANT`` names for a worker running ``app`` (the engine
    as it is when unset)."""
    return build_of(os.environ.get(MUTANT_ENV, ""), app)


def build_of(name: str, app: ActivityRegistry) -> Build:
    """The build of mutant ``name`` for ``app`` (the engine as it is for '')."""
    return MUTANTS[name].build(app) if name else Build()


def does_not_apply(name: str) -> str:
    """Why mutant ``name`` cannot be built on this engine ('' when it can), found by
    building it in a fresh interpreter exactly as a drill worker does.

    Checked before its drills run: a worker that dies because its mutant no longer fits
    the engine fails its drills too, and that must count as a broken self-test, never
    as the mutant being caught."""
    done = subprocess.run(
        [sys.executable, "-c", PREFLIGHT],
        env={**os.environ, MUTANT_ENV: name},
        capture_output=True,
        text=True,
        timeout=APPLY_TIMEOUT_SECONDS,
        check=False,
    )
    if done.returncode == 0:
        return ""
    lines = done.stderr.strip().splitlines()
    return lines[-1] if lines else f"the interpreter exited with {done.returncode}"


# Building blocks ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Rewrite:
    """One of the engine's statements (``module.name``) sent with ``pattern`` replaced."""

    module: ModuleType
    name: str
    pattern: str
    replacement: str

    def apply(self) -> tuple[str, str]:
        """The statement and its rewritten text; MutantNotApplicable when the statement
        is gone or ``pattern`` is not in it."""
        statement = getattr(self.module, self.name, None)
        if not isinstance(statement, str):
            raise MutantNotApplicable(f"{self.module.__name__}.{self.name} is gone")
        text, found = re.subn(self.pattern, lambda _: self.replacement, statement, flags=re.S)
        if not found:
            raise MutantNotApplicable(
                f"{self.module.__name__}.{self.name} no longer contains {self.pattern!r}"
            )
        return statement, text


class StatementRewrites:
    """A statement filter: each statement it rewrites is recognised by its exact text,
    every other statement is sent as it is."""

    def __init__(self, rewrites: Iterable[Rewrite]) -> None:
        self.rewritten = dict(rewrite.apply() for rewrite in rewrites)

    def __call__(self, query: Query) -> Query:
        return self.rewritten.get(query, query) if isinstance(query, str) else query


H = TypeVar("H", StoreHooks, WorkerHooks)


def points_of(hooks: H) -> H:
    """``hooks`` once every point it overrides is checked to be still the engine's."""
    base = StoreHooks if isinstance(hooks, StoreHooks) else WorkerHooks
    for name in vars(type(hooks)):
        if not name.startswith("_") and not callable(getattr(base, name, None)):
            raise MutantNotApplicable(f"{base.__module__}.{base.__name__}.{name} is gone")
    return hooks


# Completion without the token check ------------------------------------------------------


def _no_token_check(app: ActivityRegistry) -> Build:
    from engine.store.statements import leases

    held, unfenced = re.escape(leases.HELD), "w.work_id = %(work_id)s"
    set_held, set_unfenced = re.escape(leases.SET_HELD), "w.work_id = i.work_id"
    statements = ("CHECK_LEASE", "COMPLETE_LEASE", "RENEW_LEASE", "FENCED_WRITE")
    return Build(
        statement_filter=StatementRewrites(
            [
                *(Rewrite(leases, s, held, unfenced) for s in statements),
                Rewrite(leases, "FENCED_SET", set_held, set_unfenced),
            ]
        )
    )


# Start/redelivery decisions ---------------------------------------------------------------


class _RedeliveryReruns(WorkerHooks):
    def redelivered_in_flight(self, outcome: Unknown) -> Outcome | None:
        return None  # an in-flight redelivery records nothing: the handler reruns


class _UnknownAsFailure(WorkerHooks):
    def redelivered_in_flight(self, outcome: Unknown) -> Outcome | None:
        return Failed("worker-lost", True)  # "the worker died, so it failed": a new key follows


class _HandlerBeforeStart(WorkerHooks):
    def __init__(self, app: ActivityRegistry) -> None:
        self.app = app

    def attempt_starting(self, request: Callable[[], ActivityRequest]) -> None:
        early = request()
        handler = self.app.get(early.target)
        if handler is not None:
            # the "optimisation": call out while the start is still only in memory
            with contextlib.suppress(Exception):
                handler(early)


# Terminal event without archive ------------------------------------------------------------


def _terminal_without_archive(app: ActivityRegistry) -> Build:
    from engine.store.statements import leases, transitions

    archived, kept = r"archived_at\s*=\s*CASE.*?END", "archived_at = archived_at"
    written_by = ((transitions, "WRITE_TRANSITION"), (leases, "FENCED_WRITE"))
    statements = (*written_by, (leases, "FENCED_SET"))
    return Build(
        statement_filter=StatementRewrites(Rewrite(m, s, archived, kept) for m, s in statements)
    )


# An end that leaves its work open ---------------------------------------------------------


def _end_leaves_work(app: ActivityRegistry) -> Build:
    """An instance's end completes without retiring the work nobody holds (a losing
    race's timer, a wait's timeout wake-up): it stays due for an instance that is over."""
    from engine.store.statements import leases, transitions

    retire, never = re.escape("AND %(retire)s"), "AND false"
    open_work = f"state IN ({transitions.OPEN})"
    kept_open = f"{open_work} {never}"
    return Build(
        statement_filter=StatementRewrites(
            [
                Rewrite(transitions, "WRITE_TRANSITION", retire, never),
                Rewrite(leases, "FENCED_WRITE", retire, never),
                Rewrite(leases, "FENCED_SET", re.escape("AND i.retire"), never),
                Rewrite(transitions, "RETIRE_OPEN_WORK", re.escape(open_work), kept_open),
            ]
        )
    )


# Settlement by guessing ----------------------------------------------------------------------


class _SettleGuessesAborted(StoreHooks):
    async def settle(self, unanswered: Unanswered, decide: Callable[[], Any]) -> None:
        raise StoreError("commit failed; assuming it did not take effect")


# False unknowns: a handler that never ran recorded as "may have happened" -----------------


class _RenewalCancelsOwnCommit(WorkerHooks):
    def lost_lease_cancels(self, cancel: bool) -> bool:
        return True  # even when the lease was finished by the processor's own commit


def _settled_write_drops_next_lease(app: ActivityRegistry) -> Build:
    from engine.store.statements import leases

    handed_on = Rewrite(leases, "HANDED_ON", re.escape("AND w.work_id = %(next_id)s"), "AND false")
    return Build(statement_filter=StatementRewrites([handed_on]))


class _DefaultPool:
    """asyncio's default pool, whose queue counts against the attempt's timeout."""

    async def run(self, handler: Handler, request: ActivityRequest, timeout: float) -> Any:
        async with asyncio.timeout(timeout):  # the clock runs while it waits for a thread
            return await asyncio.to_thread(handler, request)


class _HandlersShareDefaultPool(WorkerHooks):
    def handler_executor(self, threads: HandlerExecutor) -> HandlerExecutor:
        return _DefaultPool()


class _NotCommittedOutcomeDropped(WorkerHooks):
    def write_again_after(self, delay: float | None) -> float | None:
        return None


# A machine's advance writing outside its transition ------------------------------------------


class _AdvanceWritesOutside(WorkerHooks):
    """Advances write on a connection of their own in autocommit (the drill schema's),
    so their rows commit at once, whether their transition ever does or not."""

    def __init__(self) -> None:
        self.own: psycopg.AsyncConnection | None = None

    async def within_connection(self, conn: psycopg.AsyncConnection) -> psycopg.AsyncConnection:
        if self.own is None or self.own.closed:
            dsn = os.environ[LEDGER_DSN_ENV]
            self.own = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
        return self.own


# Admission without the parent's index -------------------------------------------------------


def _start_ignores_parent(app: ActivityRegistry) -> Build:
    """Every start is written with an empty parent key, which the index of one active
    execution per parent does not cover, so each submit for a busy parent is admitted."""
    from engine.store.statements import transitions

    key = re.escape("END, %(parent_key)s")
    return Build(
        statement_filter=StatementRewrites(
            [Rewrite(transitions, "START_TRANSITION", key, "END, ''")]
        )
    )


# Code-first runs: recorded bodies, step_ids and divergences ------------------------------


class _BodyRerunOnReplay(WorkerHooks):
    """Every decision's replay runs the bodies of the steps it passed again (under their
    first step_ids), as a driver that re-executes code instead of returning recorded
    values would."""

    async def journal_replayed(self, function: Callable[..., Any], state: Instance) -> None:
        journal, data, run = entries(state), state.value("input"), state.instance_id
        for entry in journal:
            if entry.verb is not Verb.STEP or entry.state is not EntryState.DONE:
                continue
            command = find_command(function, data, journal, run_id=run, key=entry.key)
            if command is not None:
                with contextlib.suppress(Exception):
                    await run_body(command, step_id=step_id(run, entry.name, entry.occurrence))


class _StepIdChangesAcrossCrash(WorkerHooks):
    """A step's attempt after the first runs under a new try, whatever the first's
    outcome: the "every attempt is a new effect" mistake, which makes a repeat after a
    crash unrecognisable to whatever deduplicates by step_id."""

    def step_id(self, step_id: str, attempt: int) -> str:
        if attempt == 1:
            return step_id
        parts = parse_step_id(step_id)
        return str(replace(parts, attempt_try=parts.attempt_try + attempt - 1))


class _DivergenceAccepted(WorkerHooks):
    """A replay that diverged is taken as code that waits: nothing is recorded, nothing
    dead-lettered, nothing tells anyone the run is stuck."""

    def journal_diverged(self, advance: Diverged) -> Advance:
        return Waits()


# Continuing as new: the successor's start apart from the run's end ------------------------


def _successors(started: Sequence[Transition]) -> list[Transition]:
    """The starts among ``started`` of a continued run's successor: an instance started
    with no parent (a spawned child names its parent in its first event)."""
    return [t for t in started if not t.events[0].successor_id]


class _SuccessorDropped(WorkerHooks):
    """A continuation commits the run's end without its successor's start: the run is
    over, and nothing carries it on."""

    def starting_with(self, started: Sequence[Transition]) -> Sequence[Transition]:
        dropped = _successors(started)
        return [t for t in started if t not in dropped]


class _SuccessorStartedApart(_SuccessorDropped):
    """A continuation commits the run's end, then starts its successor in a transaction
    of its own (on a store of its own): the "start the next run once this one is safely
    over" design, which a crash in between leaves with no successor."""

    def __init__(self) -> None:
        self.pending: dict[str, Transition] = {}

    def starting_with(self, started: Sequence[Transition]) -> Sequence[Transition]:
        self.pending.update((t.instance_id, t) for t in _successors(started))
        return super().starting_with(started)

    async def journal_replayed(self, function: Callable[..., Any], state: Instance) -> None:
        start = self.pending.pop(state.successor_id, None)
        if start is None:
            return
        dsn = os.environ[LEDGER_DSN_ENV]
        options = str(conninfo_to_dict(dsn).get("options", ""))
        store = await Store.open(dsn, options.rpartition("search_path=")[2], max_size=1)
        try:
            await store.commit(start)
        finally:
            await store.close()


def _worker(hooks: Callable[[], WorkerHooks]) -> Callable[[ActivityRegistry], Build]:
    return lambda app: Build(worker_hooks=points_of(hooks()))


MUTANTS: dict[str, Mutant] = {
    m.name: m
    for m in (
        Mutant(
            "complete-without-token-check",
            "a lease holder's writes are accepted without checking owner, token and expiry",
            ("D4-sigstop", "D5-blocked-loop"),
            _no_token_check,
        ),
        Mutant(
            "handler-before-start",
            "the handler is called before the attempt start is durable",
            ("D1-kill-after_handler-s0",),
            lambda app: Build(worker_hooks=points_of(_HandlerBeforeStart(app))),
        ),
        Mutant(
            "redelivery-reruns-handler",
            "a redelivered in-flight attempt calls the handler again instead of unknown",
            ("D1-kill-after_handler-s0", "D4-sigstop"),
            _worker(_RedeliveryReruns),
        ),
        Mutant(
            "unknown-as-failure",
            "an unknown outcome is recorded as a failure and retried with a new key",
            ("D1-kill-after_handler-s0", "D1-exit-after_handler-s0"),
            _worker(_UnknownAsFailure),
        ),
        Mutant(
            "terminal-without-archive",
            "a terminal event commits without archiving its instance",
            ("D1-kill-after_handler-s0",),
            _terminal_without_archive,
        ),
        Mutant(
            "end-leaves-work",
            "an instance's end leaves the work nobody holds due, waiting for an instance "
            "that is over",
            ("C6-cancels-s0",),
            _end_leaves_work,
        ),
        Mutant(
            "settle-guesses-aborted",
            "an unanswered COMMIT is assumed not committed instead of settled",
            ("D3-sever_after_commit-before_commit-s0", "D3-sever_after_commit-before_commit-s1"),
            lambda app: Build(store_hooks=points_of(_SettleGuessesAborted())),
        ),
        Mutant(
            "renewal-cancels-own-commit",
            "a renewal answered stale by the outcome's own commit cancels the next step",
            ("U1-renewal-race",),
            _worker(_RenewalCancelsOwnCommit),
        ),
        Mutant(
            "settled-write-drops-next-lease",
            "a lone write settled as committed loses the lease it handed on",
            ("U2-lone-write-cut",),
            _settled_write_drops_next_lease,
        ),
        Mutant(
            "handlers-share-default-pool",
            "sync handlers queue for asyncio's default pool on their attempt's timeout",
            ("U3-thread-pool",),
            _worker(_HandlersShareDefaultPool),
        ),
        Mutant(
            "not-committed-outcome-dropped",
            "an outcome write known not to have committed is dropped, not written again",
            ("U4-cut-before-outcome",),
            _worker(_NotCommittedOutcomeDropped),
        ),
        Mutant(
            "advance-writes-outside-transition",
            "a machine's advance writes commit on their own, not with the state it returns",
            ("M1-kill-before_commit-s0", "M3-sever_before_commit-before_commit-s0"),
            _worker(_AdvanceWritesOutside),
        ),
        Mutant(
            "start-ignores-parent",
            "a start is admitted whatever execution of its machine is active for its parent",
            ("M2-submits-s0",),
            _start_ignores_parent,
        ),
        Mutant(
            "body-rerun-on-replay",
            "replaying a code-first run runs its recorded steps' bodies again",
            ("C1-kill-after_commit-s0",),
            _worker(_BodyRerunOnReplay),
        ),
        Mutant(
            "step-id-changes-across-crash",
            "a code-first step retried after an unknown outcome runs under a new step_id",
            ("C1-kill-after_handler-s0",),
            _worker(_StepIdChangesAcrossCrash),
        ),
        Mutant(
            "successor-dropped",
            "a code-first run continued as new ends without its successor's start",
            ("C1-kill-after_commit-s0",),
            _worker(_SuccessorDropped),
        ),
        Mutant(
            "successor-started-apart",
            "a code-first run's successor starts in a transaction of its own, after the run's end",
            ("C1-kill-after_commit-s0",),
            _worker(_SuccessorStartedApart),
        ),
        Mutant(
            "divergence-accepted",
            "code that differs from its run's journal is silently taken as waiting",
            ("C7-divergent-deploy-s0",),
            _worker(_DivergenceAccepted),
        ),
    )
}
