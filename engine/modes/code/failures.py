"""How a code-first step fails, and how replay refuses code (seed 001, "Failure").

Two kinds of exception live here, on purpose on two sides of ``Exception``:

- the ones workflow code and step bodies meet and may catch (``StepFailure`` a body
  raises to declare a *known* failure, ``StepFailed`` raised into the code after the
  last attempt, ``StepTimedOut``, ``NestedStep``, ``NotInStep``);
- the ones that stop replay (``JournalDivergence``, ``NotDeterministic``,
  ``ReplayStopped``), and ``ContinueAsNew``, which ends the run on purpose. They derive
  from ``BaseException`` so an ``except Exception`` in workflow code cannot swallow
  them; the driver also records the refusals before raising, so even code that catches
  ``BaseException`` cannot hide a divergence.
"""

from __future__ import annotations

from datetime import timedelta

STEP_ID_OUTSIDE_BODY = (
    "ctx.step_id names the effect a step is performing; it exists only inside a step body."
)
AWAITED_FOREIGN = "workflow code awaited {kind} outside ctx; use ctx.all or ctx.race"
EFFECT_REFUSED = "not available in workflow code, perform effects inside ctx.step"
VALUE_REFUSED = "{call} is not available in workflow code; use {instead} or call it inside ctx.step"


class StepFailure(Exception):
    """Raised by a step body to declare a *known* failure: the effect did not happen, so
    the next attempt is a new effect (its ``step_id`` try grows). Any other exception
    from a body is an unknown outcome: the effect may have happened."""


class StepFailed(Exception):
    """Raised into workflow code when a step's last attempt failed; uncaught, the run
    fails and unwinds its compensations."""

    def __init__(self, message: str, *, step: str = "") -> None:
        super().__init__(message)
        self.step = step


class StepTimedOut(Exception):
    """An attempt ran past its step's ``timeout``. Its outcome is unknown (the body may
    have had its effect before it was stopped); the engine decides what follows."""


class NestedStep(RuntimeError):
    """A durable verb was called inside a step body: one effect per step (seed gotcha)."""


class NotInStep(RuntimeError):
    """``ctx.step_id`` was read outside a step body."""


class ContinueAsNew(BaseException):
    """Raised by ``ctx.continue_as_new``: the run ends here, continued by a successor run
    started with ``input`` (``engine.modes.code.continuation``)."""

    def __init__(self, input: object) -> None:
        super().__init__("the run continues as new")
        self.input = input


class JournalDivergence(BaseException):
    """Replay met code that differs from the journal; the run is parked, never guessed."""


class NotDeterministic(BaseException):
    """Workflow code (outside step bodies) did something replay cannot reproduce: read
    the clock, randomness, or performed I/O, or awaited something that is not ctx's."""


class ReplayStopped(BaseException):
    """A verb was called after replay decided to stop (e.g. in a ``finally`` that runs
    while the driver closes the coroutine): nothing more is recorded."""


def failed_text(name: str, attempts: int, reason: str) -> str:
    """``step 'charge' failed after 3 attempts: declined`` (seed's text)."""
    noun = "attempt" if attempts == 1 else "attempts"
    return f"step '{name}' failed after {attempts} {noun}: {reason}"


def timed_out_text(name: str, timeout: timedelta) -> str:
    """``step 'charge' timed out after 30000ms`` (seed's text)."""
    return f"step '{name}' timed out after {timeout // timedelta(milliseconds=1)}ms"


def nested_text(verb: str, argument: str, running: str) -> str:
    """``steps do not nest: ctx.step('x') called inside step 'charge'``."""
    return f"steps do not nest: ctx.{verb}({argument}) called inside step '{running}'"


def divergence_text(expected: str, position: int, sequence: int, reached: str) -> str:
    """``journal divergence: expected step 'charge' at position 3 (event 12), code reached
    step 'capture'``; ``reached`` is ``code reached ...``, ``code returned`` or ``code
    raised ...``."""
    return (
        f"journal divergence: expected {expected} at position {position} "
        f"(event {sequence}), {reached}"
    )
