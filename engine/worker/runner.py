"""The event loop Wayline's own processes run on: uvloop's, not asyncio's standard one.

A worker crosses the event loop several times per step (a handler's result coming back
from its thread, each statement's wait for its answer, each commit's hand-off to its
group's writer), so the loop's own cost is a large share of a worker's CPU (issue 23).
Measured with ``bench.compare`` on one cluster, W1 of 2,000 instances, interleaved runs
(2026-12-05): at 16 slots the worker's CPU per instance fell from 1.46 to 0.97 ms, the
server's from 1.19 to 0.74 ms and the throughput rose from 505 to 595 instances/s; at 32
slots 1.11 to 0.89 ms, 0.84 to 0.62 ms and 688 to 726 instances/s. The server gains
because more commits arrive while a group is being written, so more of them share it.

Every ``wayline`` command, the drills' worker processes (``verification.process_main``)
and the benchmark's worker run on it, so the drills check the loop that production
runs. The engine itself assumes only asyncio: an application that embeds a ``Worker``
or a ``Client`` in its own loop keeps that loop, and the test suite runs the engine on
the standard one.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, TypeVar

import uvloop

T = TypeVar("T")

TIMER_GRAIN_SECONDS = 0.002
"""How much later than asked a deadline that must never come early is set. uvloop's
clock counts whole milliseconds and rounds a timer's delay to one, so its timers may
fire up to 1.5 ms before the instant asked for (asyncio's fire after it); a handler's
timeout is set this much later on any loop, so it ends no sooner than its full time."""


def run(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` to its end on a new uvloop event loop, as ``asyncio.run`` does on the
    standard one (the loop is closed, and any task left is cancelled, when it returns)."""
    return uvloop.run(main)
