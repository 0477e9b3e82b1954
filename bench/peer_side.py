"""What the peers' sides of the benchmark share (``bench/dbos_side.py``,
``bench/procrastinate_side.py``).

Each peer runs in its own virtual environment, where Wayline is not installed, so this
module imports only the standard library: the line protocol a worker speaks with the
benchmark (``ready``, ``go``, ``stop``, one JSON line), the CPU clock, and the idle
latency loop every shape of every peer is measured with (the same seeded random gaps as
Wayline's run, the same 1 ms status probe).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any, NoReturn

PROBE_SECONDS = 0.001
"""How often the latency probe reads the instance's status (the same as Wayline's)."""
CREATE_CONCURRENCY = 8
"""Instances started at a time in the creation window (the same as Wayline's)."""


def cpu() -> float:
    """CPU seconds of this process so far (user + system, every thread)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def done(result: dict[str, Any]) -> NoReturn:
    """Print the answer and leave at once (shutting a peer down politely is not measured)."""
    print(json.dumps(result), flush=True)
    sys.stdout.flush()
    os._exit(0)


def held_back() -> None:
    """Say ``ready`` and wait for ``go``; anything else ends the process."""
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        done({"aborted": True})


def until_stop(since: float) -> NoReturn:
    """Block until ``stop`` (or EOF), then report the CPU used since ``since``."""
    sys.stdin.readline()
    done({"cpu": cpu() - since})


def add_latency_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--max-gap", type=float, default=0.0, help="random idle gap, s")
    parser.add_argument("--gap-seed", type=int, default=0)


def measure_latency(
    args: argparse.Namespace,
    start: Callable[[str], None],
    finished: Callable[[str], bool],
) -> NoReturn:
    """One instance at a time on an idle system: after a seeded random idle gap,
    ``start(id)``, then ``finished(id)`` every millisecond until it is true. A shape
    whose start call returns only once the instance completed (a direct call) passes a
    ``finished`` that is always true. Prints the samples and start-call times."""
    samples, calls = [], []
    gaps = random.Random(args.gap_seed)
    for k in range(args.warmup + args.count):
        instance = f"lat-{k}"
        time.sleep(gaps.uniform(0, args.max_gap))  # the same seeded gaps as Wayline's run
        started = time.perf_counter()
        start(instance)
        called = time.perf_counter() - started
        while not finished(instance):
            time.sleep(PROBE_SECONDS)
        if k >= args.warmup:
            samples.append(time.perf_counter() - started)
            calls.append(called)
    done({"samples": samples, "calls": calls, "median": statistics.median(samples)})
