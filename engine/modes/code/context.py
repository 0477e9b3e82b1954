"""``ctx``: what a code-first workflow is given to reach its durable verbs (seed 001).

```python
async def order_saga(ctx: Context, order: dict) -> dict:
    reserved = await ctx.step("reserve", reserve, retries=3, compensate=release)
    payload, which = await ctx.race("paid", "cancelled", timeout="72h")
```

Every verb becomes a ``Command`` the cursor matches against the journal: a recorded
command returns what history recorded (its body never runs again); a new blocking one
stops the code, and the driver closes the coroutine (``await`` on a ctx verb is the only
place the code may stop, so it is the only thing workflow code may await).

Verbs and what they return, as the seed's tables say:

- ``await step(name, body, *, retries=1, backoff="2s", timeout=None, compensate=None,
  on_unknown="hold")``: what the body returned, recorded on its first run. ``retries``
  is the total number of attempts (0 is read as 1); ``backoff`` is the wait before
  attempt 2, doubling after; ``timeout`` bounds one attempt. ``compensate(result)``
  undoes the effect when the run unwinds. A last failed attempt raises ``StepFailed``.
- ``await sleep(duration)``: None, after the duration.
- ``await wait_signal(name, timeout=None)``: the signal's payload, or None on timeout.
- ``await race(*names_or_handles, timeout=None)``: ``(payload, name)`` of the first to
  arrive (a spawned run's ``Handle`` in place of its name), ``(None, None)`` on
  timeout; an empty race is refused. A single list or tuple argument is read as the
  set (the seed's form, ``race(["a", "b"])``).
- ``await all(*names_or_handles, timeout=None)``: payloads in argument order, None per
  timed-out entry (the timeout applies to each entry in turn); ``all()`` of nothing is
  ``[]`` and reaches no command.
- ``spawn(definition, input)``: a ``Handle`` at once (not awaited), usable by ``race``
  and ``all``, keyed by the spawn command's key (``spawn.1``).
- ``now()`` (an aware UTC datetime), ``random()`` (a float in [0, 1)), ``uuid4()``:
  journaled, so a replay returns the recorded value. A new value is recorded in the
  command in JSON form (ISO text, float, uuid text); the recorded value is accepted in
  either form.
- ``continue_as_new(input)``: never returns; the run ends continued as new, and its
  successor run starts with ``input`` (``engine.modes.code.continuation``).
- ``run_id``; ``step_id`` (only inside a step body, see ``step_ids``).

Durations are ``"30s"``-style text, ``timedelta`` or a number of seconds. Bad arguments
raise ``ValueError`` (or ``TypeError``) into the code, naming what is allowed.

Inside a step body (``driver.run_body``), the durable verbs refuse (``steps do not
nest``) and ``now``/``random``/``uuid4`` return fresh, unrecorded values: a body is an
effect, and its result is what gets recorded.
"""

from __future__ import annotations

import random as _random
import uuid
from collections.abc import Awaitable, Callable, Generator, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, NoReturn

from engine.model.durations import ALLOWED, parse_duration
from engine.model.identifiers import name_problem
from engine.model.limits import MAX_RETRY_ATTEMPTS, MAX_RETRY_DELAY, MAX_STEP_TIMEOUT
from engine.modes.code.cursor import Cursor, StopKind
from engine.modes.code.determinism import unguarded
from engine.modes.code.failures import (
    STEP_ID_OUTSIDE_BODY,
    ContinueAsNew,
    JournalDivergence,
    NestedStep,
    NotInStep,
    ReplayStopped,
    StepFailed,
    nested_text,
)
from engine.modes.code.journal import Command, Entry, EntryState, OnUnknown, StepOptions, Verb
from engine.modes.code.step_ids import step_name_problem

DEFAULT_BACKOFF = timedelta(seconds=2)
Duration = str | timedelta | int | float
_POSITIVE = timedelta(microseconds=1)
"""The shortest sleep or timeout: any positive duration."""


@dataclass(frozen=True)
class Handle:
    """A spawned run, as ``race`` and ``all`` accept it: named by its spawn's key."""

    key: str
    definition: str


@dataclass(frozen=True)
class RunningStep:
    """The step whose body runs in this context (``driver.run_body`` sets it)."""

    name: str
    step_id: str


_RUNNING: ContextVar[RunningStep | None] = ContextVar("wayline_running_step", default=None)


@contextmanager
def running_step(name: str, step_id: str) -> Iterator[None]:
    """Mark the body of step ``name`` as running (``ctx.step_id`` reads it) until exit."""
    token = _RUNNING.set(RunningStep(name, step_id))
    try:
        yield
    finally:
        _RUNNING.reset(token)


class _Suspend:
    """What a verb awaits to stop the code: the driver sees it yielded and stops."""

    def __await__(self) -> Generator[_Suspend, None, None]:
        yield self


SUSPEND = _Suspend()
_FRESH = _random.Random()
"""Fresh values for ``ctx.random()``: a generator of ctx's own, not the code's."""


def to_duration(value: object, what: str, *, low: timedelta, high: timedelta) -> timedelta:
    """A duration argument as a timedelta in ``[low, high]``; ValueError naming ``what``."""
    if isinstance(value, timedelta):
        parsed = value
    elif isinstance(value, int | float) and not isinstance(value, bool):
        try:
            parsed = timedelta(seconds=value)
        except (OverflowError, ValueError):
            parsed = high + timedelta(days=1)
    elif isinstance(value, str):
        try:
            parsed = parse_duration(value)
        except ValueError as exc:
            raise ValueError(f"{what} {exc}") from None
    else:
        raise TypeError(f"{what} must be a duration: {ALLOWED}, a timedelta or seconds")
    if not low <= parsed <= high:
        bound = "at least 0" if low == timedelta(0) else "more than 0"
        raise ValueError(f"{what} must be {bound} and at most {high.days} days")
    return parsed


def step_options(
    name: str,
    *,
    retries: int,
    backoff: Duration,
    timeout: Duration | None,
    compensate: object,
    on_unknown: str | OnUnknown,
) -> StepOptions:
    """A step's options, checked and normalised (``retries=0`` read as 1)."""
    what = f"ctx.step('{name}')"
    whole = isinstance(retries, int) and not isinstance(retries, bool)
    if not whole or not 0 <= retries <= MAX_RETRY_ATTEMPTS:
        raise ValueError(f"{what}: retries must be a whole number from 0 to {MAX_RETRY_ATTEMPTS}")
    if compensate is not None and not callable(compensate):
        raise TypeError(f"{what}: compensate must be a function taking the step's result")
    try:
        unknown = OnUnknown(on_unknown)
    except ValueError:
        allowed = ", ".join(repr(item.value) for item in OnUnknown)
        raise ValueError(f"{what}: on_unknown must be one of {allowed}") from None
    return StepOptions(
        retries=max(retries, 1),
        backoff=to_duration(backoff, f"{what}: backoff", low=timedelta(0), high=MAX_RETRY_DELAY),
        timeout=None
        if timeout is None
        else to_duration(timeout, f"{what}: timeout", low=_POSITIVE, high=MAX_STEP_TIMEOUT),
        compensated=compensate is not None,
        on_unknown=unknown,
    )


def _optional_timeout(verb: str, timeout: Duration | None) -> timedelta | None:
    if timeout is None:
        return None
    return to_duration(timeout, f"ctx.{verb}: timeout", low=_POSITIVE, high=MAX_STEP_TIMEOUT)


def _signal_name(verb: str, name: object) -> str:
    problem = name_problem(name)
    if problem:
        raise ValueError(f"ctx.{verb}: a signal name {problem}")
    return name  # type: ignore[return-value]


def _awaited(verb: str, items: tuple[object, ...]) -> tuple[tuple[str, ...], dict[str, Handle]]:
    """What a race or all awaits: signal names and handles' keys, and the handles."""
    if len(items) == 1 and isinstance(items[0], list | tuple):
        items = tuple(items[0])
    keys: list[str] = []
    handles: dict[str, Handle] = {}
    for item in items:
        if isinstance(item, Handle):
            keys.append(item.key)
            handles[item.key] = item
        else:
            keys.append(_signal_name(verb, item))
    return tuple(keys), handles


class Context:
    """The ``ctx`` of one replay of one run (see the module docstring for the verbs).

    Each verb does its own work (checking arguments, numbering and matching the
    command) with the determinism guard lifted: it is ctx's code, not the workflow's,
    and replay runs it for every command of every decision.
    """

    def __init__(self, cursor: Cursor, *, run_id: str) -> None:
        self._cursor = cursor
        self._run_id = run_id

    @property
    def run_id(self) -> str:
        """The run's id, e.g. ``order-saga/o-42``."""
        return self._run_id

    @property
    def step_id(self) -> str:
        """``<run>/<step>#<occurrence>.<try>`` of the effect the running body performs."""
        running = _RUNNING.get()
        if running is None:
            raise NotInStep(STEP_ID_OUTSIDE_BODY)
        return running.step_id

    async def step(
        self,
        name: str,
        body: Callable[[], Awaitable[Any] | Any],
        *,
        retries: int = 1,
        backoff: Duration = DEFAULT_BACKOFF,
        timeout: Duration | None = None,
        compensate: Callable[[Any], Awaitable[Any] | Any] | None = None,
        on_unknown: str | OnUnknown = OnUnknown.HOLD,
    ) -> Any:
        """Perform one effect, durably: the body's result, recorded on its first run."""
        with unguarded():
            self._refuse_nesting("step", repr(name))
            problem = step_name_problem(name)
            if problem:
                raise ValueError(f"ctx.step: {problem}")
            if not callable(body):
                raise TypeError(f"ctx.step('{name}'): the body must be a function of no arguments")
            options = step_options(
                name,
                retries=retries,
                backoff=backoff,
                timeout=timeout,
                compensate=compensate,
                on_unknown=on_unknown,
            )
            entry = self._blocking(
                Verb.STEP, name, options=options, body=body, compensate=compensate
            )
        await self._stop_if_told()
        return _settled(entry)

    async def sleep(self, duration: Duration) -> None:
        """Return nothing, after ``duration``."""
        with unguarded():
            self._refuse_nesting("sleep", repr(duration))
            length = to_duration(duration, "ctx.sleep", low=_POSITIVE, high=MAX_STEP_TIMEOUT)
            entry = self._blocking(Verb.SLEEP, timeout=length)
        await self._stop_if_told()
        _settled(entry)

    async def wait_signal(self, name: str, timeout: Duration | None = None) -> Any:
        """The payload of the oldest unconsumed signal ``name``; None on timeout."""
        with unguarded():
            self._refuse_nesting("wait_signal", repr(name))
            signal = _signal_name("wait_signal", name)
            limit = _optional_timeout("wait_signal", timeout)
            entry = self._blocking(Verb.WAIT, signal, timeout=limit)
        await self._stop_if_told()
        return _settled(entry)

    async def race(self, *names_or_handles: str | Handle, timeout: Duration | None = None) -> Any:
        """``(payload, name)`` of the first to arrive; ``(None, None)`` on timeout."""
        with unguarded():
            self._refuse_nesting("race", "...")
            on, handles = _awaited("race", names_or_handles)
            if not on:
                raise ValueError(
                    "ctx.race needs at least one signal name or spawned handle: "
                    "an empty race is refused"
                )
            entry = self._blocking(Verb.RACE, on=on, timeout=_optional_timeout("race", timeout))
        await self._stop_if_told()
        value = _settled(entry)
        if value is None:
            return (None, None)
        if isinstance(value, dict):
            value = (value.get("payload"), value.get("name"))
        payload, which = value
        return (payload, handles.get(which, which))

    async def all(self, *names_or_handles: str | Handle, timeout: Duration | None = None) -> list:
        """Payloads in argument order, None per entry that timed out."""
        with unguarded():
            self._refuse_nesting("all", "...")
            on, _ = _awaited("all", names_or_handles)
            if not on:
                return []
            entry = self._blocking(Verb.ALL, on=on, timeout=_optional_timeout("all", timeout))
        await self._stop_if_told()
        value = _settled(entry)
        return [None] * len(on) if value is None else list(value)

    def spawn(self, definition: str, input: Any = None) -> Handle:
        """Start a run of ``definition`` (by name); its handle, at once."""
        with unguarded():
            self._refuse_nesting("spawn", repr(definition))
            problem = name_problem(definition)
            if problem:
                raise ValueError(f"ctx.spawn: a definition name {problem}")
            command, entry = self._immediate(Verb.SPAWN, definition, input=input)
            if entry is None:
                self._cursor.take_new(command)
            return Handle(command.key, definition)

    def continue_as_new(self, input: Any = None) -> NoReturn:
        """End this run and start its successor with ``input``: a run whose journal
        would grow without end (a loop that polls or renews) goes on afresh. The
        successor is ``<run id>+2`` (then ``+3``, ...) on the workflow's latest published
        version, started in the transaction that ends this run
        (``engine.modes.code.continuation``). Code after it never runs; an ``except
        Exception`` does not catch it."""
        with unguarded():
            self._refuse_nesting("continue_as_new", "...")
        raise ContinueAsNew(input)

    def now(self) -> datetime:
        """The current time (aware, UTC), as recorded the first time."""
        with unguarded():
            if _RUNNING.get() is not None:
                return datetime.now(UTC)
            value = self._value(Verb.NOW, lambda: datetime.now(UTC).isoformat())
            return value if isinstance(value, datetime) else datetime.fromisoformat(value)

    def random(self) -> float:
        """A float in [0, 1), as recorded the first time."""
        with unguarded():
            if _RUNNING.get() is not None:
                return _FRESH.random()
            return float(self._value(Verb.RANDOM, _FRESH.random))

    def uuid4(self) -> uuid.UUID:
        """A random UUID, as recorded the first time."""
        with unguarded():
            if _RUNNING.get() is not None:
                return uuid.uuid4()
            value = self._value(Verb.UUID4, lambda: str(uuid.uuid4()))
            return value if isinstance(value, uuid.UUID) else uuid.UUID(value)

    def _refuse_nesting(self, verb: str, argument: str) -> None:
        running = _RUNNING.get()
        if running is not None:
            raise NestedStep(nested_text(verb, argument, running.name))

    def _reach(self, verb: Verb, name: str, fields: dict[str, Any]) -> tuple[Command, Entry | None]:
        cursor = self._cursor
        if cursor.closing or (cursor.stop is not None and cursor.stop.kind is not StopKind.FOUND):
            raise ReplayStopped("replay has stopped; nothing more is recorded")
        return cursor.reach(verb, name, **fields)

    def _blocking(self, verb: Verb, name: str = "", **fields: Any) -> Entry | None:
        """Reach a blocking verb: its entry, after telling the cursor to stop when the
        entry is open or the command new (``_stop_if_told`` then suspends the code)."""
        cursor = self._cursor
        command, entry = self._reach(verb, name, fields)
        if cursor.stop is None:
            if entry is None:
                cursor.take_new(command)
            elif entry.state is EntryState.OPEN:
                cursor.block()
        return entry

    async def _stop_if_told(self) -> None:
        """Suspend the code for good when the cursor says stop: the driver sees the
        suspension and closes the coroutine, so this await never returns then."""
        if self._cursor.stop is not None:
            await SUSPEND

    def _immediate(self, verb: Verb, name: str = "", **fields: Any) -> tuple[Command, Entry | None]:
        """Reach a verb that returns at once; a divergence is raised (and recorded)."""
        command, entry = self._reach(verb, name, fields)
        stop = self._cursor.stop
        if stop is not None and stop.kind is StopKind.DIVERGED:
            raise JournalDivergence(stop.message)
        if stop is not None and stop.kind is not StopKind.FOUND:
            raise ReplayStopped(stop.message)
        return command, entry

    def _value(self, verb: Verb, fresh: Callable[[], Any]) -> Any:
        """A journaled value: the recorded one, or a fresh one recorded with the command."""
        command, entry = self._immediate(verb)
        if entry is not None:
            return _settled(entry)
        value = fresh()
        self._cursor.take_new(command, value)
        return value


def _settled(entry: Entry | None) -> Any:
    """What a resolved entry returns to the code (a failed one raises ``StepFailed``)."""
    if entry is None:
        return None
    if entry.state is EntryState.FAILED:
        raise StepFailed(entry.failure, step=entry.name)
    return entry.value
