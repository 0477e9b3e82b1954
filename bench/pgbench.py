"""``pgbench -N`` on the benchmark's cluster: the durable-commit rate this machine allows.

``-N`` (simple-update) is one small transaction per unit: an UPDATE, a SELECT and an
INSERT, then COMMIT, so its rate is close to the rate of durable commits a client can
get, with 1 client (no group commit) and 8 (commits flushed together). It runs at the
start of a benchmark run and again at the end; the difference is part of the noise note.
Scale 10, over TCP like every other client in the run.

Flat out, the client and the server hardly sleep. A latency sample's commits come one at
a time on a machine that is otherwise idle, and on a virtual machine a process that
sleeps takes time to wake, so the run also measures 1 client at ``IDLE_RATE``
transactions a second (``-R``): the floor of a commit on an idle host.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass

import psycopg

from bench.cluster import PROBE, Cluster, Meter, Window

DATABASE = "bench_pgbench"
SCALE = 10
IDLE_RATE = 100
"""Transactions a second of the idle floor: one every 10 ms, about as often as the
latency samples start, so the machine is idle between them."""


@dataclass
class PgbenchRun:
    clients: int
    seconds: int
    tps: float
    latency_ms: float
    window: Window
    rate: int | None = None
    """Transactions a second pgbench held to (``-R``); None: as fast as it can."""

    @property
    def transactions(self) -> float:
        return self.tps * self.seconds


def initialise(cluster: Cluster) -> None:
    with cluster.connect() as conn:
        conn.execute(f"{PROBE} DROP DATABASE IF EXISTS {DATABASE}")
        conn.execute(f"{PROBE} CREATE DATABASE {DATABASE}")
    _pgbench(cluster, "-i", "-q", "-s", str(SCALE))
    with psycopg.connect(cluster.dsn, dbname=DATABASE, autocommit=True) as conn:
        conn.execute(f"{PROBE} VACUUM FREEZE")


def run(
    cluster: Cluster, meter: Meter, clients: int, seconds: int, rate: int | None = None
) -> PgbenchRun:
    """``pgbench -N`` with ``clients`` for ``seconds``, at most ``rate`` transactions a
    second when given (its latency then counts from each transaction's scheduled start)."""
    meter.checkpoint()
    meter.begin()
    limit = ("-R", str(rate)) if rate else ()
    output = _pgbench(
        cluster, "-N", "-c", str(clients), "-j", str(min(clients, 2)), "-T", str(seconds), *limit
    )
    meter.mark_end()
    tps = re.search(r"tps = ([\d.]+) \(without initial connection time\)", output)
    latency = re.search(r"latency average = ([\d.]+) ms", output)
    if not tps or not latency:
        raise RuntimeError(f"unexpected pgbench output: {output[-500:]}")
    run = PgbenchRun(clients, seconds, float(tps[1]), float(latency[1]), meter.finish(), rate)
    # Vacuum now, or autovacuum does it (with full-page images) during the next window.
    with psycopg.connect(cluster.dsn, dbname=DATABASE, autocommit=True) as conn:
        conn.execute(f"{PROBE} VACUUM")
    return run


def _pgbench(cluster: Cluster, *args: str) -> str:
    result = subprocess.run(
        [
            str(cluster.bin_dir / "pgbench"),
            "-h",
            "127.0.0.1",
            "-p",
            str(cluster.port),
            "-U",
            "postgres",
            *args,
            DATABASE,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"pgbench {' '.join(args)} failed: {result.stderr[-500:]}")
    return result.stdout + result.stderr
