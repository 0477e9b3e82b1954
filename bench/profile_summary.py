"""Where a Wayline worker's CPU goes, from the cProfile stats of an untimed run.

cProfile sees the event-loop thread (all engine code; sync handlers run in other threads
and are no-ops here) and is timed by that thread's CPU time. Its overhead inflates
call-heavy code, so the shares matter, not the absolute seconds. Time in ``epoll`` is
reported apart (with a CPU-time timer it is the syscall's own cost) where the loop is
asyncio's; uvloop waits inside its own C code, which cProfile sees as one call of the
loop's (``engine.worker.runner``), counted with the event loop.
"""

from __future__ import annotations

import pstats
from dataclasses import dataclass
from pathlib import Path

GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("idle: waiting in epoll", ("select.epoll",)),
    ("psycopg + pool (driver, protocol, adaptation)", ("/psycopg/", "/psycopg_pool/")),
    (
        "event loop: uvloop, asyncio (psycopg adds and removes a reader per wait)",
        ("uvloop", "/asyncio/", "selectors.py", "_contextvars", "_asyncio", "_heapq", "weakref.py"),
    ),
    (
        "engine replay + instance state",
        ("engine/replay/", "engine/modes/steps/fold/", "engine/model/instance"),
    ),
    (
        "engine model: events, transitions, canonical JSON, fingerprints",
        ("engine/model/",),
    ),
    (
        "engine decisions + orchestration",
        ("engine/decide/", "engine/modes/"),
    ),
    ("engine store (SQL calls, rows, fencing)", ("engine/store/",)),
    ("engine worker + processors + activities", ("engine/worker/",)),
    ("json, hashlib, datetime, dataclasses (stdlib)", ("json", "hashlib", "dataclasses")),
)


@dataclass
class ProfileSummary:
    total_seconds: float
    groups: list[tuple[str, float]]
    top_self: list[tuple[str, int, float]]
    engine_cumulative: list[tuple[str, int, float]]


def label(key: tuple[str, int, str]) -> str:
    filename, line, name = key
    if filename == "~":
        return name
    short = filename.split("site-packages/")[-1]
    for root in ("/engine/", "/bench/"):
        if root in short:
            short = root[1:] + short.rsplit(root, 1)[1]
            break
    return f"{short}:{line}({name})"


def summarise(path: Path, top: int = 15) -> ProfileSummary:
    stats = pstats.Stats(str(path))
    entries = stats.stats  # type: ignore[attr-defined]
    totals: dict[str, float] = {name: 0.0 for name, _ in GROUPS}
    totals["other"] = 0.0
    total = 0.0
    rows = []
    for key, (_, calls, tottime, cumtime, _) in entries.items():
        text = label(key)
        total += tottime
        rows.append((text, calls, tottime, cumtime))
        for name, needles in GROUPS:
            if any(n in key[0] or n in key[2] for n in needles):
                totals[name] += tottime
                break
        else:
            totals["other"] += tottime
    by_self = sorted(rows, key=lambda r: r[2], reverse=True)[:top]
    engine = [r for r in rows if r[0].startswith("engine/")]
    by_cumulative = sorted(engine, key=lambda r: r[3], reverse=True)[:top]
    return ProfileSummary(
        total,
        sorted(totals.items(), key=lambda item: item[1], reverse=True),
        [(text, calls, tottime) for text, calls, tottime, _ in by_self],
        [(text, calls, cumtime) for text, calls, _, cumtime in by_cumulative],
    )
