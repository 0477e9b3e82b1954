"""``bench/run``: every workload of issues 5 and 23 in one run, then ``bench/RESULTS.md``.

One private PostgreSQL 15 cluster (``bench/.data/pg``, recreated each run) serves the
whole run. Order: pgbench, W1 throughput (Wayline, DBOS and procrastinate interleaved
per configuration, so slow drifts of the machine hit all of them), idle latency (every
engine in every shape), recovery after SIGKILL, a profiled untimed Wayline run, W2,
W3/W4, pgbench again. A section that fails is reported as failed (with its error) and
the run goes on.

``--quick`` is for development: small sizes, one run each, and it writes
``bench/.data/RESULTS-quick.md`` so the committed full results stay put. ``--latency``
measures only the idle latency, for Wayline and each peer's shapes side by side, in
interleaved rounds (a few minutes), and writes ``bench/.data/RESULTS-latency.md``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from bench import (
    claims,
    histories,
    history_report,
    history_scale,
    machine,
    peers,
    pgbench,
    report,
    scale_results,
    w1,
)
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
LATENCY_ROUNDS = 3
"""``--latency`` measures each engine and shape this many times, interleaved, so that a
slow stretch of a shared machine falls on all of them; a shape's samples are pooled."""
W1_ENGINES = (
    ("wayline", w1.wayline_throughput),
    ("dbos", w1.dbos_throughput),
    ("procrastinate", w1.procrastinate_throughput),
)


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


TARGETS = {
    "quick": DATA / "RESULTS-quick.md",
    "full": ROOT / "bench" / "RESULTS.md",
    "latency": DATA / "RESULTS-latency.md",
}


def run(mode: str, samples: int | None = None) -> Path:
    """Measure in ``mode`` (``full``, ``quick`` or ``latency``), save the results and write
    the report; ``samples`` overrides the number of latency samples per shape."""
    sizes = QUICK if mode == "quick" else FULL
    if samples:
        sizes = replace(sizes, latency_count=samples, latency_warmup=min(samples, 20))
    results = Results(mode, sizes, f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    results.machine = machine.machine_line()
    results.load_before = machine.load_average()
    results.head, results.dirty, results.code_digest = machine.engine_revision(CODE)
    began = time.perf_counter()
    cluster = start_cluster(DATA / "pg")
    meter = Meter(cluster)
    try:
        results.versions = machine.versions(cluster)
        results.settings = settings(cluster)
        if mode == "latency":
            _section(results, "pgbench init", lambda: pgbench.initialise(cluster))
            results.pgbench_before += _pgbench_runs(
                results, cluster, meter, sizes.pgbench_seconds, "before", client_counts=(1,)
            )
            _idle_floor(results, cluster, meter, sizes.pgbench_seconds)
            _latencies(results, cluster, sizes, LATENCY_ROUNDS)
        else:
            _measure(results, cluster, meter, sizes)
    finally:
        meter.close()
        cluster.stop()
    results.duration_seconds = time.perf_counter() - began
    results.load_after = machine.load_average()
    DATA.mkdir(parents=True, exist_ok=True)
    (DATA / f"results-{results.mode}.json").write_text(json.dumps(asdict(results), default=str))
    target = _write(results)
    _log(f"wrote {target.relative_to(ROOT)} after {results.duration_seconds / 60:.1f} min")
    return target


def _write(results: Results) -> Path:
    target = TARGETS[results.mode]
    target.parent.mkdir(parents=True, exist_ok=True)
    render = report.render_latency if results.mode == "latency" else report.render
    kept = history_report.section_of(target.read_text()) if target.exists() else ""
    target.write_text(history_report.splice(render(results), kept))
    return target


def run_history_scale(events: int) -> Path:
    """``--history-scale``: W2 and W4 before and after ``events`` ended history rows, and
    removal (``bench.history_scale``), on a private cluster of its own. At the issue's
    size the section goes into ``bench/RESULTS.md``, otherwise into ``bench/.data/``."""
    results = scale_results.ScaleResults(
        events,
        started_at=f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        machine=machine.machine_line(),
        load_before=machine.load_average(),
        head=machine.engine_revision(CODE)[0],
    )
    began = time.perf_counter()
    cluster = start_cluster(DATA / "pg-history")
    try:
        results.server_version = settings(cluster)["server_version"]
        history_scale.run(cluster, results)
    finally:
        cluster.stop()
        shutil.rmtree(cluster.data_dir, ignore_errors=True)  # gigabytes of WAL and tables
    results.duration_seconds = time.perf_counter() - began
    results.load_after = machine.load_average()
    DATA.mkdir(parents=True, exist_ok=True)
    saved = DATA / "results-history-scale.json"
    saved.write_text(json.dumps(asdict(results), default=str))
    return _write_history_scale(results)


def _write_history_scale(results: scale_results.ScaleResults) -> Path:
    section = history_report.render(results, history_report.DECISION)
    if results.ended_events != history_scale.ENDED_EVENTS:
        target = DATA / "RESULTS-history-scale.md"
        target.write_text(section)
    else:
        target = TARGETS["full"]
        target.write_text(history_report.splice(target.read_text(), section))
    _log(f"wrote {target.relative_to(ROOT)}")
    return target


def _measure(results: Results, cluster: Any, meter: Meter, sizes: Sizes) -> None:
    seconds = sizes.pgbench_seconds
    _section(results, "pgbench init", lambda: pgbench.initialise(cluster))
    results.pgbench_before += _pgbench_runs(results, cluster, meter, seconds, "before")
    _idle_floor(results, cluster, meter, seconds)

    for repetition in range(sizes.runs):
        for processes, concurrency in sizes.configs:
            for engine, measure in W1_ENGINES:
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

    _latencies(results, cluster, sizes, 1)
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


def _latencies(results: Results, cluster: Any, sizes: Sizes, rounds: int) -> None:
    """Idle latency of every engine in every shape, ``rounds`` times interleaved; the
    samples of one engine and shape are pooled in ``results.latency`` (Wayline's
    timeline is the first round's)."""
    for round_ in range(rounds):
        for engine, shape, measure in w1.LATENCIES:
            machine.wait_for_quiet()
            done = _section(
                results,
                f"latency {peers.key(engine, shape)} round {round_ + 1}",
                lambda m=measure: m(cluster, sizes.latency_count, sizes.latency_warmup),
            )
            if done:
                held = results.latency.get(done.key)
                if held:
                    held.samples += done.samples
                    held.calls += done.calls
                    held.marks += done.marks
                else:
                    results.latency[done.key] = done


def _pgbench_runs(
    results: Results,
    cluster: Any,
    meter: Meter,
    seconds: int,
    when: str,
    client_counts: tuple[int, ...] = (1, 8),
) -> list[pgbench.PgbenchRun]:
    """pgbench -N with each of ``client_counts`` clients; run ``when`` "before" and "after" the
    workloads, so the report shows whether the cluster itself changed during the run
    (``--latency`` runs it once, at 1 client: the floor of one commit)."""
    runs = []
    for clients in client_counts:
        done = _section(
            results,
            f"pgbench -N -c {clients} ({when})",
            lambda c=clients: pgbench.run(cluster, meter, c, seconds),
        )
        if done:
            runs.append(done)
    return runs


def _idle_floor(results: Results, cluster: Any, meter: Meter, seconds: int) -> None:
    """pgbench -N at 1 client held to ``pgbench.IDLE_RATE`` transactions a second: what a
    commit costs when the machine is idle between commits, as before each latency sample."""
    results.pgbench_idle = _section(
        results,
        f"pgbench -N -c 1 -R {pgbench.IDLE_RATE} (idle)",
        lambda: pgbench.run(cluster, meter, 1, seconds, rate=pgbench.IDLE_RATE),
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Wayline vs DBOS vs procrastinate vs pgbench (issues 5 and 23)"
    )
    modes = parser.add_mutually_exclusive_group()
    modes.add_argument(
        "--quick", action="store_true", help="small sizes, one run; writes bench/.data/"
    )
    modes.add_argument(
        "--latency",
        action="store_true",
        help="only the idle latency of every engine and shape, side by side (a few "
        "minutes); writes bench/.data/RESULTS-latency.md",
    )
    modes.add_argument(
        "--history-scale",
        action="store_true",
        help="issue 25: W2 and W4 before and after 10^7 ended history rows, and removal "
        "(about 10 minutes); writes its section of bench/RESULTS.md",
    )
    parser.add_argument(
        "--ended-events",
        type=sample_count,
        default=history_scale.ENDED_EVENTS,
        metavar="N",
        help="with --history-scale: history rows of ended instances to add (below 10^7 the "
        "section goes to bench/.data/RESULTS-history-scale.md)",
    )
    parser.add_argument(
        "--samples",
        type=sample_count,
        metavar="N",
        help="latency samples per engine and shape (and round), instead of the mode's",
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
    elif args.history_scale:
        run_history_scale(args.ended_events)
    else:
        run("quick" if args.quick else "latency" if args.latency else "full", args.samples)


def sample_count(text: str) -> int:
    """``--samples``: a whole number, at least 1 (argparse shows the message)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(
            f"expected a whole number of samples, at least 1: {text!r}"
        )
    return value


def render(saved: Path) -> Path:
    """Rebuild a saved run's results and write its report again."""
    data = json.loads(saved.read_text())
    if "ended_events" in data:
        return _write_history_scale(saved_results.load(scale_results.ScaleResults, data))
    results = saved_results.load(Results, data)
    target = _write(results)
    _log(f"wrote {target.relative_to(ROOT)} from {saved}")
    return target


if __name__ == "__main__":
    main()
