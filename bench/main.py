"""``bench/run``: every workload of issue 5 in one run, then ``bench/RESULTS.md``.

One private PostgreSQL 15 cluster (``bench/.data/pg``, recreated each run) serves the
whole run. Order: pgbench, W1 throughput (Wayline and DBOS interleaved per
configuration, so slow drifts of the machine hit both), idle latency, recovery after
SIGKILL, a profiled untimed Wayline run, W2, W3/W4, pgbench again. A section that fails
is reported as failed (with its error) and the run goes on.

``--quick`` is for development: small sizes, one run each, and it writes
``bench/.data/RESULTS-quick.md`` so the committed full results stay put.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from bench import claims, histories, machine, pgbench, report, w1
from bench import saved as saved_results
from bench.cluster import Meter, settings, start_cluster
from bench.procs import CODE, ROOT
from bench.profile_summary import summarise
from bench.results import Results, Sizes

DATA = ROOT / "bench" / ".data"
T = TypeVar("T")


CONFIGS = ((1, 16), (1, 32), (2, 16), (2, 32))
FULL = Sizes(2000, 3, CONFIGS, 200, 20, 2000, (10**4, 10**5, 10**6), 200, 3333, 10**5, 200, 10)
QUICK = Sizes(200, 1, CONFIGS, 30, 5, 200, (10**4,), 50, 333, 10**4, 30, 3)


def _log(message: str) -> None:
    print(f"[{datetime.now():%H:%M:%S}] {message}", file=sys.stderr, flush=True)


def _section(results: Results, name: str, action: Callable[[], T]) -> T | None:
    """Run one section; a failure is recorded for the report instead of ending the run."""
    _log(f"{name} ...")
    started = time.perf_counter()
    try:
        value = action()
    except Exception as exc:  # one failed section must not lose the others' figures
        results.errors[name] = f"{type(exc).__name__}: {exc}"
        _log(f"{name} FAILED: {exc}")
        traceback.print_exc()
        return None
    _log(f"{name} done in {time.perf_counter() - started:.1f} s")
    return value


def run(quick: bool) -> Path:
    sizes = QUICK if quick else FULL
    results = Results(
        "quick" if quick else "full", sizes, f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
    )
    results.machine = machine.machine_line()
    results.load_before = machine.load_average()
    results.head, results.dirty, results.code_digest = machine.engine_revision(CODE)
    began = time.perf_counter()
    cluster = start_cluster(DATA / "pg")
    meter = Meter(cluster)
    try:
        results.versions = machine.versions(cluster)
        results.settings = settings(cluster)
        _measure(results, cluster, meter, sizes)
    finally:
        meter.close()
        cluster.stop()
    results.duration_seconds = time.perf_counter() - began
    results.load_after = machine.load_average()
    DATA.mkdir(parents=True, exist_ok=True)
    (DATA / f"results-{results.mode}.json").write_text(json.dumps(asdict(results), default=str))
    target = DATA / "RESULTS-quick.md" if quick else ROOT / "bench" / "RESULTS.md"
    target.write_text(report.render(results))
    _log(f"wrote {target.relative_to(ROOT)} after {results.duration_seconds / 60:.1f} min")
    return target


def _measure(results: Results, cluster: Any, meter: Meter, sizes: Sizes) -> None:
    seconds = sizes.pgbench_seconds
    _section(results, "pgbench init", lambda: pgbench.initialise(cluster))
    results.pgbench_before += _pgbench_runs(results, cluster, meter, seconds, "before")

    for repetition in range(sizes.runs):
        for processes, concurrency in sizes.configs:
            for engine, measure in (
                ("wayline", w1.wayline_throughput),
                ("dbos", w1.dbos_throughput),
            ):
                tag = f"r{repetition}_p{processes}_c{concurrency}"
                background = machine.wait_for_quiet()
                done = _section(
                    results,
                    f"W1 {engine} {processes}x{concurrency} run {repetition + 1}",
                    lambda m=measure, t=tag, p=processes, c=concurrency: m(
                        cluster, meter, t, sizes.instances, p, c
                    ),
                )
                if done:
                    done.background = background
                    results.throughput.append(done)
                    _log(
                        f"  {done.instances_per_second:.0f} instances/s, "
                        f"{done.processing.commit_records / done.instances:.2f} commits/instance"
                    )

    for engine, measure in (("wayline", w1.wayline_latency), ("dbos", w1.dbos_latency)):
        machine.wait_for_quiet()
        done = _section(
            results,
            f"latency {engine}",
            lambda m=measure: m(cluster, sizes.latency_count, sizes.latency_warmup),
        )
        if done:
            results.latency[engine] = done
    for engine, measure in (("wayline", w1.wayline_recovery), ("dbos", w1.dbos_recovery)):
        machine.wait_for_quiet()
        done = _section(
            results,
            f"recovery {engine}",
            lambda m=measure: m(cluster, sizes.recovery_instances),
        )
        if done:
            results.recovery[engine] = done

    profile_path = DATA / "wayline-worker.prof"
    profiled_instances = max(200, sizes.instances // 2)
    profiled = _section(
        results,
        "profile (untimed)",
        lambda: w1.profile_wayline(cluster, profiled_instances, profile_path),
    )
    if profiled:
        results.profile, results.profile_seconds = profiled
        results.profile["instances"] = profiled_instances
        results.profile_summary = _section(
            results, "profile summary", lambda: summarise(profile_path)
        )

    levels = _section(
        results,
        "W2 claims",
        lambda: claims.run(cluster, sizes.claim_levels, sizes.claim_samples, 20),
    )
    results.claims = levels or []
    results.histories = _section(
        results,
        "W3/W4 histories and reads",
        lambda: histories.run(
            cluster, sizes.history_steps, sizes.list_instances, sizes.read_samples
        ),
    )
    results.pgbench_after += _pgbench_runs(results, cluster, meter, seconds, "after")


def _pgbench_runs(
    results: Results, cluster: Any, meter: Meter, seconds: int, when: str
) -> list[pgbench.PgbenchRun]:
    """pgbench -N with 1 and 8 clients; run ``when`` "before" and "after" the workloads,
    so the report shows whether the cluster itself changed during the run."""
    runs = []
    for clients in (1, 8):
        done = _section(
            results,
            f"pgbench -N -c {clients} ({when})",
            lambda c=clients: pgbench.run(cluster, meter, c, seconds),
        )
        if done:
            runs.append(done)
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description="Wayline vs DBOS vs pgbench (issue 5)")
    parser.add_argument(
        "--quick", action="store_true", help="small sizes, one run; writes bench/.data/"
    )
    parser.add_argument(
        "--render",
        type=Path,
        metavar="RESULTS.json",
        help="only render the report again from a saved run (no measuring)",
    )
    args = parser.parse_args()
    if args.render:
        render(args.render)
    else:
        run(args.quick)


def render(saved: Path) -> Path:
    """Rebuild a saved run's results and write its report again."""
    results = saved_results.load(Results, json.loads(saved.read_text()))
    target = DATA / "RESULTS-quick.md" if results.mode == "quick" else ROOT / "bench" / "RESULTS.md"
    target.write_text(report.render(results))
    _log(f"wrote {target.relative_to(ROOT)} from {saved}")
    return target


if __name__ == "__main__":
    main()
