"""The journal of a code-first workflow: what its code asked for, and what history says.

A code-first workflow (seed 001) is an ``async def`` whose durable verbs (``ctx.step``,
``sleep``, ``wait_signal``, ``race``, ``all``, ``spawn`` and the journaled ``now``,
``random``, ``uuid4``) are *commands*. Every decision replays the function from the
top against the *entries* history recorded for its earlier commands, in order: a
command that matches entry k gets entry k's recorded value (its body never runs
again), the first command past the journal is new, and a command that differs from
its entry is a divergence, never a guess.

This module is the contract between the three parts of the mode, so each can be built
and tested alone:

- the fold (``engine.modes.code.fold``) builds ``Entry`` values from history;
- the driver (``engine.modes.code.driver``) runs the code against them and returns an
  ``Advance``: the new commands, then what the code did (it waits, returned, raised,
  or diverged);
- the decision processor turns new commands into events and work.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from typing import Any


class Verb(StrEnum):
    """What a command asks for. The first five block the code until history resolves
    them; the others return at once (a spawn returns a handle, a value its recording)."""

    STEP = "step"
    SLEEP = "sleep"
    WAIT = "wait"
    RACE = "race"
    ALL = "all"
    SPAWN = "spawn"
    NOW = "now"
    RANDOM = "random"
    UUID4 = "uuid4"


BLOCKING = frozenset({Verb.STEP, Verb.SLEEP, Verb.WAIT, Verb.RACE, Verb.ALL})


class OnUnknown(StrEnum):
    """What happens after a step attempt whose outcome is unknown."""

    HOLD = "hold"
    """Wait for an operator to resolve or retry it (Wayline's default everywhere)."""
    RETRY_SAME_KEY = "retry_same_key"
    """Try again with the same ``step_id``: the body deduplicates by it."""


@dataclass(frozen=True)
class StepOptions:
    """A step's options as the code gave them, normalised (``retries=0`` read as 1)."""

    retries: int = 1
    """Total attempts, not attempts after the first."""
    backoff: timedelta = timedelta(seconds=2)
    """Wait before attempt 2, doubling after that."""
    timeout: timedelta | None = None
    """How long one attempt may run (the engine's own bound when None)."""
    compensated: bool = False
    """Whether the step declared ``compensate=`` (undone in reverse when unwinding)."""
    on_unknown: OnUnknown = OnUnknown.HOLD


@dataclass(frozen=True)
class Command:
    """One durable verb the code reached, in the order it reached them.

    ``key`` names the command in history (the events' ``step``), unique within a run:
    ``<name>.<occurrence>`` for a step (``charge.1``), ``<verb>.<n>`` for the others
    (``sleep.1``, ``race.2``, ``spawn.1``, ``now.3``), ``await.<signal>.<n>`` for
    ``wait_signal``. ``occurrence`` counts the commands of the same verb and name
    before it, plus one: a loop's second pass over ``charge`` is ``charge.2``. For
    the verbs whose key has no name (all but step and wait) it counts the commands of
    the same verb, so the key's number is the occurrence and keys stay unique
    (``spawn.2`` is the second spawn, whatever definition it names).
    """

    position: int
    """Index among the run's commands, from 0."""
    verb: Verb
    key: str
    name: str = ""
    """The step's name, the awaited signal, the spawned definition; '' otherwise."""
    occurrence: int = 1
    on: tuple[str, ...] = ()
    """``race``/``all``: what is awaited, in argument order (signal names, or the keys
    of spawned runs' handles)."""
    timeout: timedelta | None = None
    """``sleep``: its duration; ``wait``/``race``/``all``: the timeout (per entry, in
    turn, for ``all``); None for no timeout."""
    options: StepOptions | None = None
    """``step`` only."""
    input: Any = None
    """``spawn``: the child's input."""
    value: Any = None
    """``now``/``random``/``uuid4`` when new: the value chosen, to be recorded."""
    body: Callable[[], Awaitable[Any]] | None = field(default=None, compare=False)
    """``step``: the body, never persisted (a worker reaches it again by replay)."""
    compensate: Callable[[Any], Awaitable[Any]] | None = field(default=None, compare=False)
    """``step``: undoes the body's effect; given the step's result."""


class EntryState(StrEnum):
    OPEN = "open"
    """Recorded but unresolved: a step running, retrying or unknown; a sleep or a wait
    not yet over; a spawned run still going (its handle is usable at once)."""
    DONE = "done"
    """Resolved: ``value`` is what the verb returns to the code."""
    FAILED = "failed"
    """A step whose last attempt failed: ``failure`` is the ``StepFailed`` text."""


@dataclass(frozen=True)
class Entry:
    """What history recorded for one command."""

    position: int
    verb: Verb
    key: str
    name: str
    sequence: int
    """The history sequence of the event that recorded the command (for messages)."""
    state: EntryState
    value: Any = None
    failure: str = ""
    on: tuple[str, ...] = ()
    occurrence: int = 1


@dataclass(frozen=True)
class Waits:
    """The code is blocked: on its last new command, or on an open entry."""

    new: tuple[Command, ...] = ()


@dataclass(frozen=True)
class Returned:
    new: tuple[Command, ...]
    value: Any


@dataclass(frozen=True)
class ContinuedAsNew:
    """The code asked to end the run in favour of a successor started with ``input``."""

    new: tuple[Command, ...]
    input: Any


@dataclass(frozen=True)
class Raised:
    """The code raised (a ``StepFailed`` it did not catch, or its own exception)."""

    new: tuple[Command, ...]
    code: str
    message: str


@dataclass(frozen=True)
class Diverged:
    """The code differs from the journal: nothing new is recorded, the run is parked."""

    message: str
    """``journal divergence: expected step 'charge' at position 3 (event 12), code
    reached step 'capture'`` (or ``..., code returned``)."""
    code: str = "journal-divergence"
    """Why: ``journal-divergence``, or ``not-deterministic`` when the determinism guard
    refused the code (it read the clock, randomness, did I/O, or awaited something not
    ctx's): both park the run until matching code is deployed."""


Advance = Waits | Returned | Raised | ContinuedAsNew | Diverged
