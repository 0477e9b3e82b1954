"""Clocks for drills: one shared across processes, and one that jumps.

- ``FileClock`` is the engine's manual clock shared by the harness and its worker
  subprocesses through a file: the harness writes an instant, every process reads it on
  each use. The stateful drill (D9) uses it to advance time past timers and leases
  without waiting for them; ``keep_running`` makes it follow the wall clock, so a
  drill plan can move it past a machine's timer while leases still run out in time.
- ``jump_from_env`` makes this process's wall clock jump (``WAYLINE_DRILL_CLOCK_JUMP``
  = seconds, optionally ``@delay``), the way an NTP step or an operator's ``date -s``
  does, while monotonic time keeps running: D19 checks that a worker whose clock jumps
  cannot skew leases or due times. The jump reaches ``time.time`` and the engine's
  ``DatabaseClock`` given ``WALL.now`` as its wall clock.
"""

from __future__ import annotations

import asyncio
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from engine.model.canonical import format_instant, parse_instant, utc

CLOCK_JUMP_ENV = "WAYLINE_DRILL_CLOCK_JUMP"
TICK_SECONDS = 0.05
"""How often ``keep_running`` moves a file clock on: the staleness its readers see."""


class FileClock:
    """A manual clock whose instant lives in a file (see the engine's ManualClock)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def now(self) -> datetime:
        return parse_instant(self.path.read_text().strip())

    def sql_now(self) -> datetime | None:
        return self.now()

    def set(self, instant: datetime) -> None:
        """Move the shared clock (harness side); written whole, then renamed into place."""
        scratch = self.path.with_suffix(".next")
        scratch.write_text(format_instant(utc(instant)))
        scratch.replace(self.path)

    def advance(self, delta: timedelta) -> None:
        self.set(self.now() + delta)


async def keep_running(clock: FileClock) -> None:
    """Move ``clock`` on as time passes, until cancelled: its readers see time run,
    and whoever moves it ahead (``FileClock.set``) keeps the lead. Every write happens
    between two awaits, so a move ahead in the same event loop is never overwritten."""
    last = time.monotonic()
    while True:
        await asyncio.sleep(TICK_SECONDS)
        now = time.monotonic()
        clock.advance(timedelta(seconds=now - last))
        last = now


def jump_from_env() -> None:
    """Apply ``WAYLINE_DRILL_CLOCK_JUMP`` to the engine's clock module, if set."""
    text = os.environ.get(CLOCK_JUMP_ENV, "")
    if not text:
        return
    seconds, _, delay = text.partition("@")
    _install(timedelta(seconds=float(seconds)), time.monotonic() + float(delay or 0))


class JumpingWall:
    """This process's wall clock, off by ``jump`` once monotonic time passes ``at``."""

    def __init__(self) -> None:
        self.jump = timedelta(0)
        self.at = float("inf")

    def now(self) -> datetime:
        real = datetime.now(UTC)
        return real + self.jump if time.monotonic() >= self.at else real


WALL = JumpingWall()


def _install(jump: timedelta, at: float) -> None:
    """Every wall-clock reading of this process jumps; monotonic time does not."""
    WALL.jump, WALL.at = jump, at
    real_time, real_ns = time.time, time.time_ns
    offset = jump.total_seconds()

    def jumped() -> float:
        return real_time() + offset if time.monotonic() >= at else real_time()

    def jumped_ns() -> int:
        return real_ns() + int(offset * 1e9) if time.monotonic() >= at else real_ns()

    time.time, time.time_ns = jumped, jumped_ns
