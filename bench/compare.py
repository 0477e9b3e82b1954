"""Compare the worker cost of checkouts on the same W1 workload (issue 18: a redesign
must not slow the worker beyond noise).

``.venv/bin/python -m bench.compare [--profile] NAME=CHECKOUT NAME=CHECKOUT ...``

Each CHECKOUT is a git work tree with its own ``.venv`` (``scripts/bootstrap.sh``) and
a ``bench/`` of its own time: its worker (``bench.wayline_worker``) runs W1 from its
own code, on one private cluster (``bench.cluster``) shared by all of them. Runs are
interleaved (each round runs every checkout once), so a drift of the machine's load
hits them all.

A shared machine's clock is not to be trusted, so besides instances per second and
worker and server CPU per instance it reports what does not depend on load: WAL bytes,
durable commits (WAL COMMIT records), transactions and statements per instance, and
with ``--profile`` the worker's Python function calls and event loop iterations per
instance, and which functions gained or lost calls compared with the first checkout.
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import re
import statistics
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from bench.app import W1_DEFINITION
from bench.cluster import PROBE, Cluster, Meter, start_cluster
from bench.profile_summary import label
from bench.w1 import COMPLETED, ENDED_BADLY

DATA = Path(os.environ.get("BENCH_HOME", Path(__file__).resolve().parent.parent)) / "bench/.data"
PREPARE = (
    "import asyncio, sys\n"
    "from bench.w1 import _create_wayline, _prepare_wayline\n"
    "dsn, schema, name, n = sys.argv[1:]\n"
    "asyncio.run(_prepare_wayline(dsn, schema))\n"
    "asyncio.run(_create_wayline(dsn, schema, name, int(n)))\n"
)
"""Run by each checkout's own Python: its schema and client, as its worker expects."""
ENDED = (
    f"{PROBE} SELECT count(*) FROM {{schema}}.instances WHERE status IN {(COMPLETED, *ENDED_BADLY)}"
)
LOOP_STEP = "_run_once"


@dataclass
class Run:
    """One W1 run of one checkout, per instance."""

    cpu_ms: float
    commits: float
    transactions: float
    statements: float
    server_cpu_ms: float
    wal_bytes: float
    rate: float
    """Instances completed per second of the run's window."""
    calls: Counter[str] = field(default_factory=Counter)


def run_once(
    checkout: Path, cluster: Cluster, meter: Meter, schema: str, args: argparse.Namespace
) -> Run:
    """W1 with ``args.instances`` instances on ``checkout``'s worker, in ``schema``."""
    n = args.instances
    python = str(checkout / ".venv" / "bin" / "python")
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    subprocess.run(
        [python, "-c", PREPARE, cluster.dsn, schema, W1_DEFINITION, str(n)],
        cwd=checkout,
        env=env,
        check=True,
        capture_output=True,
    )
    profile = DATA / f"compare-{schema}.prof"
    argv = [python, "-m", "bench.wayline_worker", "--dsn", cluster.dsn, "--schema", schema]
    argv += ["--concurrency", str(args.concurrency)]
    if args.profile:
        argv += ["--profile", str(profile)]
    worker = subprocess.Popen(
        argv, cwd=checkout, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert worker.stdin and worker.stdout
    if worker.stdout.readline().strip() != "ready":
        raise RuntimeError(f"the worker of {checkout} did not start")
    meter.checkpoint()
    meter.begin()
    released = time.perf_counter()
    worker.stdin.write("go\n")
    worker.stdin.flush()
    with cluster.connect() as probe:
        while probe.execute(ENDED.format(schema=schema)).fetchone()[0] < n:
            time.sleep(0.02)
    meter.mark_end()
    seconds = time.perf_counter() - released
    worker.stdin.write("stop\n")
    worker.stdin.flush()
    report = json.loads(worker.stdout.readline())
    worker.wait()
    window = meter.finish()
    with cluster.connect() as conn:
        conn.execute(f"{PROBE} DROP SCHEMA {schema} CASCADE")
    calls: Counter[str] = Counter()
    if args.profile:
        for key, (_, count, *_) in pstats.Stats(str(profile)).stats.items():  # type: ignore[attr-defined]
            calls[_portable(label(key))] += count / n
        profile.unlink()
    return Run(
        1000 * report["cpu"] / n,
        window.commit_records / n,
        window.xact_commit / n,
        window.statement_calls / n,
        1000 * window.server_cpu / n,
        window.wal_bytes / n,
        n / seconds,
        calls,
    )


def _portable(text: str) -> str:
    """A function's label as it reads in any checkout: an engine module by its file name
    alone (modules move between packages), the standard library's from its root, no
    line numbers, no object addresses."""
    place, _, name = text.rpartition("(")
    place = re.sub(r":\d+$", "", re.sub(r".*/lib/python3\.\d+/", "", place))
    if place.startswith("engine/"):
        place = "engine/.../" + place.rsplit("/", 1)[-1]
    return re.sub(r" at 0x[0-9a-f]+", "", f"{place}({name}" if place else name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("checkouts", nargs="+", metavar="NAME=CHECKOUT")
    parser.add_argument("--instances", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--profile", action="store_true", help="count calls with cProfile")
    parser.add_argument("--top", type=int, default=25, help="functions listed by call change")
    args = parser.parse_args()
    checkouts = dict(spec.split("=", 1) for spec in args.checkouts)
    runs: dict[str, list[Run]] = {name: [] for name in checkouts}
    cluster = start_cluster(DATA / "compare-pg")
    meter = Meter(cluster)
    try:
        for round_ in range(args.runs):
            for name, checkout in checkouts.items():
                schema = f"cmp_{name}_{round_}"
                done = run_once(Path(checkout).resolve(), cluster, meter, schema, args)
                runs[name].append(done)
                print(f"{name} run {round_ + 1}: {done.cpu_ms:.2f} ms CPU/instance", flush=True)
    finally:
        meter.close()
        cluster.stop()
    print(render(runs, args.top))


def _median(runs: list[Run], field_name: str) -> float:
    return statistics.median(getattr(run, field_name) for run in runs)


def render(runs: dict[str, list[Run]], top: int) -> str:
    """Medians per checkout, then (profiled) the functions whose calls changed most."""
    lines = [
        "| checkout | instances/s | worker CPU ms/inst | server CPU ms/inst | WAL bytes/inst "
        "| durable commits/inst | transactions/inst | statements/inst | Python calls/inst "
        "| loop iterations/inst |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    totals: dict[str, Counter[str]] = {}
    for name, done in runs.items():
        total: Counter[str] = Counter()
        for run in done:
            total.update({k: v / len(done) for k, v in run.calls.items()})
        totals[name] = total
        loop = sum(v for k, v in total.items() if k.endswith(f"({LOOP_STEP})"))
        counted = f"{sum(total.values()):.0f} | {loop:.2f}" if total else "- | -"
        lines.append(
            f"| {name} | {_median(done, 'rate'):.0f} | {_median(done, 'cpu_ms'):.2f} "
            f"| {_median(done, 'server_cpu_ms'):.2f} "
            f"| {_median(done, 'wal_bytes'):.0f} | {_median(done, 'commits'):.3f} "
            f"| {_median(done, 'transactions'):.3f} | {_median(done, 'statements'):.3f} "
            f"| {counted} |"
        )
    first, *others = totals
    for name in others if totals[first] else []:
        changed = totals[name].copy()
        changed.subtract(totals[first])
        lines += ["", f"Calls per instance, {first} -> {name} (largest changes):", ""]
        for key, delta in sorted(changed.items(), key=lambda kv: -abs(kv[1]))[:top]:
            before, after = totals[first][key], totals[name][key]
            lines.append(f"    {before:8.2f} {after:8.2f} {delta:+8.2f}  {key}")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
