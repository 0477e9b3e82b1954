"""The peers Wayline is compared with, the shapes each is driven in, and which shape
is a peer's best: a comparison is only honest against what the peer does best.

Pure: the report (``bench.report``) and its unit tests use it on measured figures.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable
from typing import TypeVar

PEERS = ("dbos", "procrastinate")
SHAPES: dict[str, tuple[str, ...]] = {
    "dbos": ("queue", "direct"),
    "procrastinate": ("chain",),
}
"""DBOS through its polled queue (a separate worker process) and by a direct in-process
call (how DBOS's own latency is usually quoted); procrastinate as a chain of three jobs,
each deferring the next, through a separate worker process."""
NAMES = {"wayline": "Wayline", "dbos": "DBOS", "procrastinate": "procrastinate"}

T = TypeVar("T")


def key(engine: str, shape: str) -> str:
    """How one engine's shape is filed in a run's results: ``dbos direct``, ``wayline``."""
    return f"{engine} {shape}" if shape else engine


def label(engine: str, shape: str = "") -> str:
    """How the report names it: ``DBOS (direct)``."""
    name = NAMES.get(engine, engine)
    return f"{name} ({shape})" if shape else name


def best(candidates: Iterable[T], cost: Callable[[T], float | None]) -> T | None:
    """The candidate with the lowest cost (for throughput, pass the negated rate);
    candidates without a figure are skipped; on a tie the first one listed wins."""
    found: T | None = None
    lowest = 0.0
    for candidate in candidates:
        value = cost(candidate)
        if value is not None and (found is None or value < lowest):
            found, lowest = candidate, value
    return found


def ratio(ours: float | None, theirs: float | None) -> float | None:
    """ours / theirs, or None when either figure is missing or zero."""
    if not ours or not theirs:
        return None
    return ours / theirs


def median(values: Iterable[float]) -> float | None:
    values = list(values)
    return statistics.median(values) if values else None
