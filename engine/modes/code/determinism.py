"""The runtime determinism guard around workflow code (seed 001, "Determinism").

Workflow code is replayed after every park, crash or deploy and must take the same path
given the same journal, so the code outside step bodies may not read the wall clock or
randomness, nor perform I/O. The static lint finds most of it at publish; this guard
catches the rest as it happens: while the driver runs the coroutine (one ``coro.send``)
a ``sys.setprofile`` function refuses calls to

- the clocks (``time.time``/``monotonic``/``perf_counter``/``process_time``/
  ``thread_time`` and their ``_ns`` forms, ``datetime.now``/``utcnow``/``today``,
  ``date.today``),
- the global random generator (``random.*``, seeding included) and an unseeded
  ``random.Random()``, ``os.urandom`` (so ``uuid4``, ``secrets`` and
  ``SystemRandom``), ``uuid.uuid1``/``uuid4``,
- sockets and database connections (``socket.socket``, ``getaddrinfo``,
  ``create_connection``, ``psycopg`` ``connect``),
- asyncio's running loop (``asyncio.sleep``, ``gather``, ``create_task``...: the code
  may only await ctx's verbs),

raising ``NotDeterministic`` with the seed's text (``time.time() is not available in
workflow code; use ctx.now() or call it inside ctx.step``, or ``not available in
workflow code, perform effects inside ctx.step``). Aliases are caught too: the guard
compares the called objects, not names.

Step bodies are never run under the guard (the driver never runs them, ``run_body``
runs them bare), so effects cost nothing extra. The guard is installed and removed
around each ``send`` in a ``with`` block, so it is removed even when the coroutine
raises; the profile function that was installed before (a profiler, a debugger) is put
back. Calls made by ``logging`` are allowed: a log record's timestamp is not a
decision. The cyclic garbage collector is paused while guarded: its callbacks (and
the finalizers it runs) are not workflow code, and must neither be refused nor make
a run diverge; what the code frees is collected after the ``send``.

Cost: the profile function sees every call of guarded code, so each check is one
dictionary lookup (by the called object or its code object), and ctx's own work
runs with the guard lifted (``Unguarded``). A refusal is also reported to the
driver before it is raised: CPython removes a profile function that raised, and code
that catches the refusal must still not get away with it.
"""

from __future__ import annotations

import asyncio.events
import datetime
import gc
import os
import random
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any

from engine.modes.code.failures import (
    AWAITED_FOREIGN,
    EFFECT_REFUSED,
    VALUE_REFUSED,
    NotDeterministic,
)

ALLOWED_CALLER_MODULES = ("logging",)
"""Modules whose own calls are let through (a log record's timestamp decides nothing)."""

CLOCKS = (
    "time",
    "time_ns",
    "monotonic",
    "monotonic_ns",
    "perf_counter",
    "perf_counter_ns",
    "process_time",
    "process_time_ns",
    "thread_time",
    "thread_time_ns",
)
"""The ``time`` functions that read a clock whatever their arguments."""
_CLOCK = "ctx.now()"
_RANDOM = "ctx.random()"
_UUID = "ctx.uuid4()"


def _builtin_refusals() -> dict[Any, str]:
    """C functions refused, by the called object, with the text naming them."""
    refusals: dict[Any, str] = {}
    for name in CLOCKS:
        refusals[getattr(time, name)] = VALUE_REFUSED.format(call=f"time.{name}()", instead=_CLOCK)
    for name in ("now", "utcnow", "today"):
        refusals[getattr(datetime.datetime, name)] = VALUE_REFUSED.format(
            call=f"datetime.{name}()", instead=_CLOCK
        )
    refusals[datetime.date.today] = VALUE_REFUSED.format(call="date.today()", instead=_CLOCK)
    for name in ("random", "getrandbits", "seed", "getstate", "setstate"):
        method = getattr(random._inst, name, None)
        if method is not None:
            refusals[method] = VALUE_REFUSED.format(call=f"random.{name}()", instead=_RANDOM)
    refusals[os.urandom] = VALUE_REFUSED.format(call="os.urandom()", instead=_UUID)
    refusals[socket.getaddrinfo] = EFFECT_REFUSED
    for name in ("get_running_loop", "_get_running_loop"):
        refusals[getattr(asyncio.events, name)] = AWAITED_FOREIGN.format(kind="Future")
    return refusals


def _python_refusals() -> dict[CodeType, str]:
    """Python functions refused, by their code object, with the text naming them."""
    refusals: dict[CodeType, str] = {
        uuid.uuid4.__code__: VALUE_REFUSED.format(call="uuid.uuid4()", instead=_UUID),
        uuid.uuid1.__code__: VALUE_REFUSED.format(call="uuid.uuid1()", instead=_UUID),
        socket.socket.__init__.__code__: EFFECT_REFUSED,
        socket.create_connection.__code__: EFFECT_REFUSED,
    }
    for name, value in vars(random.Random).items():
        code = getattr(value, "__code__", None)
        if code is not None and not name.startswith("_"):
            refusals[code] = VALUE_REFUSED.format(call=f"random.{name}()", instead=_RANDOM)
    refusals.update(_store_refusals())
    return refusals


def _store_refusals() -> dict[CodeType, str]:
    """Database connections (the engine's own driver; absent drivers refuse nothing)."""
    try:
        import psycopg
    except ImportError:  # pragma: no cover - psycopg is a dependency of the engine
        return {}
    return {
        psycopg.Connection.connect.__func__.__code__: EFFECT_REFUSED,
        psycopg.AsyncConnection.connect.__func__.__code__: EFFECT_REFUSED,
    }


_BUILTINS = _builtin_refusals()
_PYTHON = _python_refusals()


def _own_generator(frame: FrameType) -> bool:
    """A method of a ``random.Random(seed)`` the code made itself: deterministic, so
    allowed (only the module's shared generator is refused, and seeding from the
    system's entropy, as ``Random()`` without a seed does)."""
    if frame.f_code is random.Random.seed.__code__ and frame.f_locals.get("a") is None:
        return False
    return (
        frame.f_code.co_filename == random.__file__
        and frame.f_locals.get("self", random._inst) is not random._inst
    )


def _refusal(frame: FrameType, event: str, arg: Any) -> str | None:
    """The refusal text for a profile event, or None when the call is allowed."""
    if event == "c_call":
        try:
            text = _BUILTINS.get(arg)
        except TypeError:  # an unhashable callable is none of ours
            return None
        caller = frame
    elif event == "call":
        text = _PYTHON.get(frame.f_code)
        if text is not None and _own_generator(frame):
            return None
        caller = frame.f_back
    else:
        return None
    if text is None or caller is None:
        return text
    module = caller.f_globals.get("__name__", "")
    if module.split(".")[0] in ALLOWED_CALLER_MODULES:
        return None
    return text


class Guard:
    """Installs the refusing profile function for the duration of a ``with`` block.

    ``on_refusal`` is told each refusal's text before ``NotDeterministic`` is raised, so
    the driver knows of it even when the code catches the exception.
    """

    def __init__(self, on_refusal: Callable[[str], None]) -> None:
        self._on_refusal = on_refusal
        self._previous: list[Any] = []

    def _profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "c_call" and event != "call":
            return
        text = _refusal(frame, event, arg)
        if text is not None:
            self._on_refusal(text)
            raise NotDeterministic(text)

    def __enter__(self) -> Guard:
        _COLLECTOR.pause()
        self._previous.append(sys.getprofile())
        sys.setprofile(self._profile)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.setprofile(self._previous.pop())
        _COLLECTOR.resume()


class _Collector:
    """Pauses the cyclic garbage collector while any thread runs guarded code.

    The collector is process-wide and its callbacks run in whichever thread allocates,
    so the pause is counted across threads: the first guard to enter disables it
    (remembering whether it was enabled), the last to leave gives it back.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._guards = 0
        self._was_enabled = False

    def pause(self) -> None:
        with self._lock:
            if self._guards == 0:
                self._was_enabled = gc.isenabled()
                gc.disable()
            self._guards += 1

    def resume(self) -> None:
        with self._lock:
            self._guards -= 1
            if self._guards == 0 and self._was_enabled:
                gc.enable()


_COLLECTOR = _Collector()


class Unguarded:
    """Lifts whatever profile function is installed for a ``with`` block, then puts it
    back: ctx's own work inside guarded code (numbering and matching a command,
    drawing a fresh ``now``/``random``/``uuid4``). A class rather than a generator-based
    context manager: entering it costs the guard a single profiled call."""

    __slots__ = ("_previous",)

    def __enter__(self) -> None:
        self._previous = sys.getprofile()
        sys.setprofile(None)

    def __exit__(self, *exc: object) -> None:
        sys.setprofile(self._previous)


unguarded = Unguarded
