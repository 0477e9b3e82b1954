"""Clocks for drills: one shared across processes, and one that jumps.

- ``FileClock`` is the engine's manual clock shared by the harness and its worker
  subprocesses through a file: the harness writes an instant, every process reads it on
  each use. The stateful drill (D9) uses it to advance time past timers and leases
  without waiting for them.
- ``jump_from_env`` makes this process's wall clock jump (``WAYLINE_DRILL_CLOCK_JUMP``
  = seconds, optionally ``@delay``), the way an NTP step or an operator's ``date -s``
  does, while monotonic time keeps running: D19 checks that a worker whose clock jumps
  cannot skew leases or due times. The jump reaches ``time.time`` and the engine's
  ``DatabaseClock`` given ``WALL.now`` as its wall clock.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from engine.model.canonical import format_instant, parse_instant, utc

CLOCK_JUMP_ENV = "WAYLINE_DRILL_CLOCK_JUMP"


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
