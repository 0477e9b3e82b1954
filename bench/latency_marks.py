"""Where the milliseconds of one Wayline instance go (issue 23): marks on one clock.

The latency loop marks when each start call begins and is answered and when the probe
sees the instance completed (in the awaited shape: when ``Client.wait`` returns it);
the worker marks, through its own seams (``Faults`` counts every persistence boundary
it reaches, ``Metrics`` times every claim), when the claim that took the work began and
was answered, when each fenced commit was sent and answered, and when each handler
began and returned. Both processes read
``time.perf_counter`` (``CLOCK_MONOTONIC`` on Linux, one clock for every process on the
host), so the marks of one sample line up; the samples run one at a time, so the worker
marks between a start call and its completion belong to that instance.

Marking costs a clock read and a list append per mark, so the timed run carries it.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterable, Sequence

from engine.worker.faults import Boundary, Faults
from engine.worker.metrics import Metrics

Mark = tuple[float, str]
"""A ``perf_counter`` reading and what happened then."""

START_ANSWERED = "start call answered"
SEEN_COMPLETED = "probe saw it completed"
WAIT_RETURNED = "Client.wait returned it completed"
"""The awaited shape's end mark, where the probed shape has ``SEEN_COMPLETED``."""
CLAIM_TIMED = "claim"
"""The worker metric whose observations end when a claim is answered."""
CLAIM_BEGAN = "claim that took it began"
CLAIMED = "claim answered"
WORKER_LABELS = {
    Boundary.BEFORE_COMMIT.value: "commit {n} sent",
    Boundary.AFTER_COMMIT.value: "commit {n} answered",
    Boundary.AFTER_ATTEMPT_START.value: "handler {n} called",
    Boundary.AFTER_HANDLER.value: "handler {n} returned",
}
"""Worker boundaries a sample's breakdown names, each numbered by its occurrence."""


class MarkingFaults(Faults):
    """Faults with no plan that also mark each boundary reached."""

    def __init__(self) -> None:
        super().__init__()
        self.marks: list[Mark] = []

    def reach(self, boundary: Boundary, step: str = "") -> None:
        self.marks.append((time.perf_counter(), boundary.value))
        super().reach(boundary, step)


class MarkingMetrics(Metrics):
    """Metrics that also mark when each timed claim began."""

    def __init__(self) -> None:
        super().__init__()
        self.marks: list[Mark] = []

    def observe(self, name: str, value: float, unit: str = "seconds", **labels: str) -> None:
        if name == CLAIM_TIMED:
            self.marks.append((time.perf_counter() - value, CLAIM_TIMED))
        super().observe(name, value, unit, **labels)


def offsets(
    called: float,
    answered: float,
    done: float,
    worker: Sequence[Mark],
    seen: str = SEEN_COMPLETED,
) -> dict[str, float]:
    """One sample's named marks, in ms since its start call began (``called``; it was
    ``answered``, and the probe saw the instance ``done``, or ``Client.wait`` returned
    it: ``seen`` names that mark); ``worker``: every
    worker mark in time order (those outside ``called``..``done`` are not this
    sample's). The claim that took the work is the last one to begin before the first
    claimed item; earlier claims of the window were polls that found nothing."""
    inside = [(t, what) for t, what in worker if called <= t <= done]
    named = {START_ANSWERED: answered, seen: done}
    claims = [t for t, what in inside if what == CLAIM_TIMED]
    first_claimed = next((t for t, what in inside if what == Boundary.AFTER_CLAIM.value), None)
    if first_claimed is not None:
        named[CLAIMED] = first_claimed
        began = [t for t in claims if t <= first_claimed]
        if began:
            named[CLAIM_BEGAN] = began[-1]
    seen: dict[str, int] = {}
    for t, what in inside:
        label = WORKER_LABELS.get(what)
        if label is not None:
            seen[what] = seen.get(what, 0) + 1
            named[label.format(n=seen[what])] = t
    return {label: (t - called) * 1000 for label, t in named.items()}


def breakdown(samples: Iterable[dict[str, float]]) -> list[tuple[str, int, float]]:
    """Per mark: how many samples have it and the median ms since the start call, in the
    order of those medians."""
    by_label: dict[str, list[float]] = {}
    for sample in samples:
        for label, ms in sample.items():
            by_label.setdefault(label, []).append(ms)
    rows = [(label, len(ms), statistics.median(ms)) for label, ms in by_label.items()]
    return sorted(rows, key=lambda row: row[2])


COMMITTED_MARKS = (START_ANSWERED,)
"""Marks that end a durable commit besides the fenced commits: the start call's answer
(its transition commits before it is answered). A claim commits the lease it takes
without waiting for its flush (``engine.store.leases``), so its answer is not one."""


def durable_commits(rows: Iterable[tuple[str, int, float]], samples: int) -> int:
    """How many durable commits the path of most samples waits for, from
    ``breakdown``'s rows: the start's and each fenced commit answered (a mark counts
    when at least half of the ``samples`` have it)."""
    return sum(
        1
        for label, count, _ in rows
        if 2 * count >= samples and (label in COMMITTED_MARKS or _fenced_commit(label))
    )


def _fenced_commit(label: str) -> bool:
    return label.startswith("commit ") and label.endswith(" answered")
