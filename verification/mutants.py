"""Deliberately broken builds of the engine, for ``wayline drill self-test``.

A drill that cannot fail proves nothing. Each mutant here breaks one promise of the
engine by patching its functions inside a drill worker process (applied when
``verification.drill_app`` is imported with ``WAYLINE_DRILL_MUTANT`` set), and names the
drills that must catch it. The self-test passes only if every mutant is caught.

Patches work on the engine's own names (module constants and functions); if the engine
moves one, applying the mutant fails loudly (MutantNotApplicable) instead of silently
testing an unbroken build.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.worker.activities import ActivityRegistry

MUTANT_ENV = "WAYLINE_DRILL_MUTANT"
APPLY_TIMEOUT_SECONDS = 120
"""How long applying one mutant in a fresh interpreter may take (an import, on a busy host)."""


class MutantNotApplicable(RuntimeError):
    """The engine no longer has what this mutant patches; update the mutant."""


@dataclass(frozen=True)
class Mutant:
    name: str
    breaks: str
    """The promise it breaks, in a sentence."""
    drills: tuple[str, ...]
    """Drill ids that must catch it (any one failing counts as caught)."""
    apply: Callable[[ActivityRegistry], None]


def apply_from_env(app: ActivityRegistry) -> None:
    """Patch this process's engine as ``WAYLINE_DRILL_MUTANT`` says (no-op when unset)."""
    name = os.environ.get(MUTANT_ENV, "")
    if name:
        MUTANTS[name].apply(app)


def does_not_apply(name: str) -> str:
    """Why mutant ``name`` cannot be applied to this engine ('' when it can), found by
    applying it in a fresh interpreter exactly as a drill worker does.

    Checked before its drills run: a worker that dies because its mutant no longer fits
    the engine fails its drills too, and that must count as a broken self-test, never
    as the mutant being caught."""
    done = subprocess.run(
        [sys.executable, "-c", "import verification.drill_app"],
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


def _replace(module: Any, attribute: str, old: str, new: str) -> None:
    text = getattr(module, attribute)
    if old not in text:
        raise MutantNotApplicable(f"{module.__name__}.{attribute} no longer contains {old!r}")
    setattr(module, attribute, text.replace(old, new))


# Completion without the token check ------------------------------------------------------


def _no_token_check(app: ActivityRegistry) -> None:
    from engine.store.statements import leases

    for statement in ("CHECK_LEASE", "COMPLETE_LEASE", "RENEW_LEASE", "FENCED_WRITE"):
        _replace(leases, statement, leases.HELD, "w.work_id = %(work_id)s")
    _replace(leases, "FENCED_SET", leases.SET_HELD, "w.work_id = i.work_id")


# Start/redelivery decisions ---------------------------------------------------------------


def _wrap_start_or_settle(
    wrap: Callable[[Callable[[Any], None], Any, Any], Callable[[Any], None]],
) -> None:
    """Replace ``processors.StartOrSettle.__call__`` by ``wrap(original, start, processors)``,
    where ``start`` is the StartOrSettle at hand (its track, dispatch and settled flag)."""
    from engine.worker import processors

    cls = getattr(processors, "StartOrSettle", None)
    if cls is None or "__call__" not in vars(cls):
        raise MutantNotApplicable("engine.worker.processors.StartOrSettle.__call__ is gone")
    original = cls.__call__

    def patched(self: Any, draft: Any) -> None:
        wrap(lambda d: original(self, d), self, processors)(draft)

    cls.__call__ = patched


def _in_flight(draft: Any, track: Any, dispatch: Any) -> bool:
    """A redelivery of an attempt durably started by an earlier owner."""
    from engine.model.instance import AttemptStatus

    progress = track.progress(draft.state, dispatch.step)
    return (
        progress is not None
        and progress.attempt == dispatch.attempt
        and progress.status is AttemptStatus.RUNNING
        and not draft.state.status.terminal
    )


def _redelivery_reruns(app: ActivityRegistry) -> None:
    def wrap(build: Callable[[Any], None], start: Any, processors: Any) -> Any:
        def mutated(draft: Any) -> None:
            if not _in_flight(draft, start.track, start.dispatch):
                build(draft)  # an in-flight redelivery records nothing: the handler reruns

        return mutated

    _wrap_start_or_settle(wrap)


def _unknown_as_failure(app: ActivityRegistry) -> None:
    from engine.worker.activities import Failed

    def wrap(build: Callable[[Any], None], start: Any, processors: Any) -> Any:
        def mutated(draft: Any) -> None:
            if _in_flight(draft, start.track, start.dispatch):
                # "the worker died, so it failed": a retry with a new key follows
                failed = Failed("worker-lost", True)
                processors._outcome(draft, start.track, start.dispatch, failed)
                start.settled = True
                return
            build(draft)

        return mutated

    _wrap_start_or_settle(wrap)


def _handler_before_start(app: ActivityRegistry) -> None:
    from engine.model.events import EventKind
    from engine.worker.activities import ActivityRequest

    starts = {EventKind.ATTEMPT_STARTED, EventKind.COMPENSATION_ATTEMPT_STARTED}

    def wrap(build: Callable[[Any], None], start: Any, processors: Any) -> Any:
        track, dispatch = start.track, start.dispatch

        def mutated(draft: Any) -> None:
            build(draft)
            if not any(e.kind in starts for e in draft.events):
                return
            target, _ = track.target_and_timeout(draft.state, dispatch.step)
            progress = track.progress(draft.state, dispatch.step)
            handler = app.get(target)
            if handler is None:
                return
            # the "optimisation": call out while the start is still only in memory
            with contextlib.suppress(Exception):
                handler(early(draft, dispatch, target, progress, track))

        return mutated

    def early(draft: Any, dispatch: Any, target: str, progress: Any, track: Any) -> Any:
        return ActivityRequest(
            instance_id=draft.state.instance_id,
            step=dispatch.step,
            target=target,
            attempt=dispatch.attempt,
            idempotency_key=progress.idempotency_key,
            deadline=progress.due_at,
            input=draft.state.value("input"),
            compensation=track.compensation,
        )

    _wrap_start_or_settle(wrap)


# Terminal event without archive ------------------------------------------------------------


def _terminal_without_archive(app: ActivityRegistry) -> None:
    from engine.store.statements import leases, transitions

    written_by = ((transitions, "WRITE_TRANSITION"), (leases, "FENCED_WRITE"))
    for module, statement in (*written_by, (leases, "FENCED_SET")):
        text = getattr(module, statement)
        mutated = re.sub(
            r"archived_at\s*=\s*CASE.*?END", "archived_at = archived_at", text, flags=re.S
        )
        if mutated == text:
            raise MutantNotApplicable(f"{statement} no longer sets archived_at by CASE")
        setattr(module, statement, mutated)


# Settlement by guessing ----------------------------------------------------------------------


def _settle_guesses_aborted(app: ActivityRegistry) -> None:
    from engine.store import commits
    from engine.store.errors import StoreError

    for name in ("settle", "settle_session"):
        if not hasattr(commits, name):
            raise MutantNotApplicable(f"engine.store.commits.{name} is gone")

    async def guess(connect: Any, written: list[Any], handle: Any) -> None:
        raise StoreError("commit failed; assuming it did not take effect")

    commits.settle = commits.settle_session = guess


# False unknowns: a handler that never ran recorded as "may have happened" -----------------


def _renewal_cancels_own_commit(app: ActivityRegistry) -> None:
    from engine.worker import processors

    if not hasattr(processors.LeaseHolder, "completing"):
        raise MutantNotApplicable("engine.worker.processors.LeaseHolder.completing is gone")
    processors.LeaseHolder.completing = lambda self: contextlib.nullcontext()


def _settled_write_drops_next_lease(app: ActivityRegistry) -> None:
    from engine.store import leases

    if not hasattr(leases.LeaseFence, "recover"):
        raise MutantNotApplicable("engine.store.leases.LeaseFence.recover is gone")

    async def forget(self: Any, conn: Any) -> None:
        return None

    leases.LeaseFence.recover = forget


def _handlers_share_default_pool(app: ActivityRegistry) -> None:
    import asyncio

    from engine.worker import activities

    if not hasattr(activities.HandlerThreads, "run"):
        raise MutantNotApplicable("engine.worker.activities.HandlerThreads.run is gone")

    async def queued(self: Any, handler: Any, request: Any, timeout: float) -> Any:
        async with asyncio.timeout(timeout):  # the clock runs while it waits for a thread
            return await asyncio.to_thread(handler, request)

    activities.HandlerThreads.run = queued


def _not_committed_outcome_dropped(app: ActivityRegistry) -> None:
    from engine.worker import leased_commits

    if not hasattr(leased_commits, "WRITE_RETRY_DELAYS"):
        raise MutantNotApplicable("engine.worker.leased_commits.WRITE_RETRY_DELAYS is gone")
    leased_commits.WRITE_RETRY_DELAYS = ()


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
            _handler_before_start,
        ),
        Mutant(
            "redelivery-reruns-handler",
            "a redelivered in-flight attempt calls the handler again instead of unknown",
            ("D1-kill-after_handler-s0", "D4-sigstop"),
            _redelivery_reruns,
        ),
        Mutant(
            "unknown-as-failure",
            "an unknown outcome is recorded as a failure and retried with a new key",
            ("D1-kill-after_handler-s0", "D1-exit-after_handler-s0"),
            _unknown_as_failure,
        ),
        Mutant(
            "terminal-without-archive",
            "a terminal event commits without archiving its instance",
            ("D1-kill-after_handler-s0",),
            _terminal_without_archive,
        ),
        Mutant(
            "settle-guesses-aborted",
            "an unanswered COMMIT is assumed not committed instead of settled",
            ("D3-sever_after_commit-before_commit-s0", "D3-sever_after_commit-before_commit-s1"),
            _settle_guesses_aborted,
        ),
        Mutant(
            "renewal-cancels-own-commit",
            "a renewal answered stale by the outcome's own commit cancels the next step",
            ("U1-renewal-race",),
            _renewal_cancels_own_commit,
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
            _handlers_share_default_pool,
        ),
        Mutant(
            "not-committed-outcome-dropped",
            "an outcome write known not to have committed is dropped, not written again",
            ("U4-cut-before-outcome",),
            _not_committed_outcome_dropped,
        ),
    )
}
