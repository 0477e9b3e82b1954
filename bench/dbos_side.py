"""The DBOS side of the benchmark; runs in ``bench/.venv-dbos`` (``pip install dbos==3.4.0``),
as ``python -m bench.dbos_side``.

DBOS is not a project dependency, so this file imports nothing from Wayline (only
``bench.peer_side``, which needs the standard library alone):

- ``setup``: launch DBOS without listening to any user queue (this also creates or
  migrates its system schema), register the queue with ``polling_interval_sec=0.01`` and
  ``worker_concurrency=0``, and enqueue N workflows. With a worker concurrency of 0 the
  workers dequeue nothing: they are held back until the benchmark raises the queue's
  worker concurrency in the database (what ``Queue.set_worker_concurrency`` writes), which
  they re-read on every poll.
- ``worker``: launch DBOS listening to that queue, print ``ready``; ``go`` on stdin starts
  the CPU clock, ``stop`` prints one JSON line (CPU since ``go``) and exits. The benchmark
  SIGKILLs it to test recovery; a fresh worker with the same executor id recovers the
  killed one's workflows at launch, as DBOS does without Conductor.
- ``latency``: the queue shape: enqueue one workflow at a time on an idle system, each
  after the same seeded random idle gap as Wayline's run, and poll its status every
  millisecond (the same probe) until it succeeded; a separate worker process runs it.
- ``direct``: the direct shape, DBOS's best latency and the way it is usually quoted:
  call the workflow function in this process (it returns once the workflow's outcome is
  recorded), after the same gaps.

The workflow is three ``@DBOS.step``s in sequence: no-ops (``w1``) or, for recovery,
steps that each insert one row into a side table (``effects``).

Configuration (what a user tuning DBOS for throughput would set; none of it changes
durability, see ``bench/RESULTS.md``): a system-database pool with one connection per
concurrent workflow plus the background threads' (``sys_db_pool_size``; DBOS's default
of 20 made 32 workflows wait for connections), and no pre-ping on checkout
(``pool_pre_ping`` is DBOS's default, a round trip on every checkout, which only guards
against connections a server dropped while idle; nothing drops them here).
"""

from __future__ import annotations

import argparse
import os
import queue
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import psycopg
from dbos import DBOS, DBOSConfig, SetWorkflowID

from bench import peer_side

APP_NAME = "wayline-bench"
APP_VERSION = "bench-1"
POLLING_INTERVAL = 0.01
STEPS = ("one", "two", "three")
POOL_SPARE = 8
"""System-database connections beyond one per concurrent workflow: the queue thread,
the notification listener, recovery and the other background threads."""
DEFAULT_CONCURRENCY = 16

_effects: _Pool | None = None


class _Pool:
    """A few autocommit connections for the side-table inserts (DBOS runs steps in threads)."""

    def __init__(self, dsn: str, size: int = 8) -> None:
        self.dsn = dsn
        self.idle: queue.Queue[psycopg.Connection] = queue.Queue()
        self.slots = threading.Semaphore(size)

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        with self.slots:
            try:
                conn = self.idle.get_nowait()
            except queue.Empty:
                conn = psycopg.connect(self.dsn, autocommit=True)
            try:
                yield conn
            finally:
                self.idle.put(conn)


@DBOS.step()
def noop_step() -> None:
    """Does nothing: W1 measures the engine, not the step."""
    return


@DBOS.step()
def effect_step(instance: str, step: str) -> None:
    """Insert one row per execution (autocommit: durable before the step returns)."""
    assert _effects is not None
    table = os.environ["BENCH_EFFECTS_TABLE"]
    with _effects.connection() as conn:
        conn.execute(
            f"INSERT INTO {table} (instance, step, key, attempt, pid) VALUES (%s, %s, %s, 0, %s)",
            [instance, step, f"{DBOS.workflow_id}/{step}", os.getpid()],
        )


@DBOS.workflow()
def w1(instance: str) -> None:
    for _ in STEPS:
        noop_step()


@DBOS.workflow()
def recovery(instance: str) -> None:
    for step in STEPS:
        effect_step(instance, step)


WORKFLOWS = {"w1": w1, "recovery": recovery}


def _configure(args: argparse.Namespace, executor_id: str) -> None:
    global _effects
    config: DBOSConfig = {
        "name": APP_NAME,
        "system_database_url": args.url,
        "dbos_system_schema": args.schema,
        "application_version": APP_VERSION,
        "executor_id": executor_id,
        "log_level": "WARNING",
        "sys_db_pool_size": args.concurrency + POOL_SPARE,
        "db_engine_kwargs": {"pool_pre_ping": False},
    }
    DBOS(config=config)
    if args.effects_dsn:
        _effects = _Pool(args.effects_dsn, args.concurrency)


def setup(args: argparse.Namespace) -> None:
    _configure(args, "bench-setup")
    DBOS.listen_queues([])
    DBOS.launch()
    DBOS.register_queue(
        args.queue,
        worker_concurrency=args.worker_concurrency,
        polling_interval_sec=POLLING_INTERVAL,
        on_conflict="always_update",
    )
    peer_side.held_back()  # then enqueue: the benchmark measures this window
    workflow = WORKFLOWS[args.workflow]
    started = time.perf_counter()

    def enqueue(k: int) -> None:
        DBOS.enqueue_workflow(args.queue, workflow, f"i{k}")

    with ThreadPoolExecutor(max_workers=peer_side.CREATE_CONCURRENCY) as pool:
        list(pool.map(enqueue, range(args.n)))
    peer_side.done({"enqueue_seconds": time.perf_counter() - started})


def worker(args: argparse.Namespace) -> None:
    _configure(args, args.executor_id)
    DBOS.listen_queues([args.queue])
    DBOS.launch()
    peer_side.held_back()
    peer_side.until_stop(peer_side.cpu())


def latency(args: argparse.Namespace) -> None:
    _configure(args, "bench-latency")
    DBOS.listen_queues([])
    DBOS.launch()
    probe = psycopg.connect(args.effects_dsn, autocommit=True)
    status = (
        f"/* bench-probe */ SELECT status FROM {args.schema}.workflow_status "
        "WHERE workflow_uuid = %s"
    )

    def start(workflow_id: str) -> None:
        with SetWorkflowID(workflow_id):
            DBOS.enqueue_workflow(args.queue, w1, workflow_id)

    def finished(workflow_id: str) -> bool:
        row = probe.execute(status, [workflow_id], prepare=True).fetchone()
        if row and row[0] == "ERROR":
            raise RuntimeError(f"workflow {workflow_id} failed")
        return bool(row and row[0] == "SUCCESS")

    peer_side.measure_latency(args, start, finished)


def direct(args: argparse.Namespace) -> None:
    """The workflow called in this process: the call returns once it completed."""
    _configure(args, "bench-direct")
    DBOS.listen_queues([])
    DBOS.launch()

    def start(workflow_id: str) -> None:
        with SetWorkflowID(workflow_id):
            w1(workflow_id)

    peer_side.measure_latency(args, start, lambda workflow_id: True)


def main() -> None:
    parser = argparse.ArgumentParser(description="DBOS side of the Wayline benchmark")
    parser.add_argument("action", choices=sorted(ACTIONS))
    parser.add_argument("--url", required=True, help="system database URL")
    parser.add_argument("--schema", required=True, help="DBOS system schema")
    parser.add_argument("--queue", default="bench")
    parser.add_argument("--workflow", choices=sorted(WORKFLOWS), default="w1")
    parser.add_argument("--n", type=int, default=0)
    parser.add_argument(
        "--worker-concurrency", type=int, default=0, help="0 holds the workers back"
    )
    parser.add_argument("--executor-id", default="bench-worker")
    parser.add_argument("--effects-dsn", default="", help="psycopg DSN for side-table inserts")
    parser.add_argument(
        "--concurrency",
        type=int,
        default=DEFAULT_CONCURRENCY,
        help="workflows this process runs at a time (sizes its pool)",
    )
    peer_side.add_latency_arguments(parser)
    args = parser.parse_args()
    ACTIONS[args.action](args)


ACTIONS = {"setup": setup, "worker": worker, "latency": latency, "direct": direct}


if __name__ == "__main__":
    main()
