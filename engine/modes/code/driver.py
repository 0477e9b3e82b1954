"""The driver: replays a code-first workflow against its journal (seed 001).

``drive(function, input, entries, *, run_id) -> Advance`` runs the workflow's coroutine
once, from the top, with a fresh ``Context`` over the entries history recorded. Commands
that match their entries get the recorded values (bodies never run), so the code walks
the path it walked before; it stops at the first new blocking command (or an open
entry), and the non-blocking commands it reached past the journal before that
(``now``/``random``/``uuid4``/``spawn``) come back in ``new`` with it. The result says
what the code did: ``Waits``, ``Returned``, ``ContinuedAsNew`` (``ctx.continue_as_new``),
``Raised`` (``code`` is ``step-failed`` for
an uncaught ``StepFailed``, ``workflow-error`` for the code's own exception,
``journal-full`` past ``MAX_JOURNAL_COMMANDS``) or ``Diverged`` (``code``
``journal-divergence``, or ``not-deterministic`` when the determinism guard refused the
code). A code that ends (returns or raises) before consuming every entry diverged too:
``..., code returned`` / ``..., code raised ValueError``.

The coroutine is driven by a single ``send``: every ctx verb either returns at once or
suspends the code for good, so there is no event loop and nothing to schedule; replay
costs one pass over the code. After a stop the coroutine is closed (its ``finally``
blocks run, under the guard, and any verb they reach refuses): keep ``finally`` blocks
in workflow code free of effects, as every replay may run them.

``find_command(..., key=...)`` replays up to the command with that key and returns it
with its ``body``/``compensate`` closures (None when the code does not reach it):
a worker reaches a step's body, or a compensation, again this way after a crash.
``run_body(command, *, step_id)`` runs a step's body with ``ctx.step_id`` set, outside
the guard, bounded by the step's timeout (``StepTimedOut`` with the seed's text);
``run_compensation(command, result, *, step_id)`` runs its ``compensate`` the same way.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from engine.model.words import with_article
from engine.modes.code.context import SUSPEND, Context, running_step
from engine.modes.code.cursor import Cursor, StopKind, describe
from engine.modes.code.determinism import Guard
from engine.modes.code.failures import (
    AWAITED_FOREIGN,
    ContinueAsNew,
    StepFailed,
    StepTimedOut,
    divergence_text,
    timed_out_text,
)
from engine.modes.code.journal import (
    Advance,
    Command,
    ContinuedAsNew,
    Diverged,
    Entry,
    Raised,
    Returned,
    Verb,
    Waits,
)

Workflow = Callable[[Context, Any], Coroutine[Any, Any, Any]]


@dataclass(frozen=True)
class _Ending:
    """How one replay's coroutine ended: suspended (by a verb), returned, or raised."""

    returned: bool = False
    value: Any = None
    error: BaseException | None = None


def drive(function: Workflow, input: Any, entries: Sequence[Entry], *, run_id: str) -> Advance:
    """Replay ``function(ctx, input)`` against ``entries``; say what the code does next."""
    cursor = Cursor(entries)
    ending = _replay(function, input, cursor, run_id)
    return _advance(cursor, ending)


def find_command(
    function: Workflow, input: Any, entries: Sequence[Entry], *, run_id: str, key: str
) -> Command | None:
    """The command with ``key``, reached by replay, with its closures; None when the
    code does not reach it (it returned, raised, blocked or diverged before)."""
    cursor = Cursor(entries, looking_for=key)
    _replay(function, input, cursor, run_id)
    if cursor.stop is not None and cursor.stop.kind is StopKind.FOUND:
        return cursor.found
    return None


async def run_body(command: Command, *, step_id: str) -> Any:
    """Run a step's body (one attempt) as the step ``step_id``; what it returns is the
    step's result. ``StepFailure`` from the body is a known failure; ``StepTimedOut``
    says the attempt ran past the step's timeout; anything else is an unknown outcome."""
    if command.verb is not Verb.STEP or command.body is None:
        verb = with_article(command.verb)
        raise ValueError(f"run_body runs a step's body; {command.key} is {verb}")
    timeout = command.options.timeout if command.options else None
    return await _run_effect(command.name, step_id, timeout, command.body)


async def run_compensation(command: Command, result: Any, *, step_id: str) -> Any:
    """Run a step's ``compensate(result)`` as the step ``step_id`` (unwinding)."""
    if command.verb is not Verb.STEP or command.compensate is None:
        raise ValueError(f"run_compensation needs a compensated step; {command.key} is not one")
    timeout = command.options.timeout if command.options else None
    return await _run_effect(command.name, step_id, timeout, command.compensate, result)


async def _run_effect(
    name: str, step_id: str, timeout: timedelta | None, function: Callable[..., Any], *args: Any
) -> Any:
    """Call a body or compensation unguarded, with ``step_id`` set, within ``timeout``.
    A plain function runs in a thread (so the timeout can fire); an ``async def`` or a
    function returning an awaitable is awaited."""
    scope = asyncio.timeout(None if timeout is None else timeout.total_seconds())
    with running_step(name, step_id):
        try:
            async with scope:
                if inspect.iscoroutinefunction(function):
                    return await function(*args)
                result = await asyncio.to_thread(function, *args)
                return await result if inspect.isawaitable(result) else result
        except TimeoutError:
            if scope.expired() and timeout is not None:
                raise StepTimedOut(timed_out_text(name, timeout)) from None
            raise


def _replay(function: Workflow, input: Any, cursor: Cursor, run_id: str) -> _Ending:
    """Run the coroutine until it suspends or ends, under the determinism guard."""
    coro = function(Context(cursor, run_id=run_id), input)
    if not inspect.iscoroutine(coro):
        raise TypeError(
            "a code-first workflow is an async def taking (ctx, input); "
            f"{getattr(function, '__qualname__', function)!r} returned {type(coro).__name__}"
        )
    guard = Guard(cursor.refuse)
    try:
        with guard:
            yielded = coro.send(None)
    except StopIteration as stop:
        return _Ending(returned=True, value=stop.value)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as error:  # the code's own exception, a refusal, a divergence
        return _Ending(error=error)
    if yielded is not SUSPEND:
        cursor.refuse(AWAITED_FOREIGN.format(kind=type(yielded).__name__))
    _close(coro, cursor, guard)
    return _Ending()


def _close(coro: Coroutine[Any, Any, Any], cursor: Cursor, guard: Guard) -> None:
    """Close a suspended coroutine; nothing its ``finally`` blocks do is recorded."""
    cursor.closing = True
    try:
        with guard:
            coro.close()
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException:  # a finally block's failure decides nothing
        return


def _advance(cursor: Cursor, ending: _Ending) -> Advance:
    """What the replay means for the run."""
    new = tuple(cursor.new)
    stop = cursor.stop
    if stop is not None and stop.kind in (StopKind.DIVERGED, StopKind.REFUSED):
        return Diverged(stop.message, code=stop.kind.value)
    if stop is not None and stop.kind is StopKind.FULL:
        return Raised(new, stop.kind.value, stop.message)
    if ending.error is None and not ending.returned:
        return Waits(new)
    rest = cursor.unconsumed()
    if rest is not None:
        return Diverged(_ended_early(rest, ending))
    if ending.returned:
        return Returned(new, ending.value)
    error = ending.error
    if isinstance(error, ContinueAsNew):
        return ContinuedAsNew(new, error.input)
    if isinstance(error, StepFailed):
        return Raised(new, "step-failed", str(error))
    return Raised(new, "workflow-error", f"{type(error).__name__}: {error}")


def _ended_early(rest: Entry, ending: _Ending) -> str:
    reached = "code returned" if ending.returned else f"code raised {type(ending.error).__name__}"
    return divergence_text(
        describe(rest.verb, rest.name, rest.on), rest.position, rest.sequence, reached
    )
