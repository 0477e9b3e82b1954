"""The procrastinate side of the benchmark; runs in ``bench/.venv-procrastinate``
(``pip install procrastinate==3.10.0 uvloop==0.23.0``), as
``python -m bench.procrastinate_side``. Its processes run on uvloop's event loop, as
Wayline's do (``engine.worker.runner``): the two async engines share one loop.

procrastinate is a PostgreSQL task queue, not a workflow engine: the closest shape to a
3-step instance is a chain of three jobs in which each job defers the next, run by a
separate worker process. Each job's row (deferred, then finished) is committed before
the next one can start, so each step is durable as Wayline's and DBOS's are. Its tables
live in a schema of their own (``search_path``), as Wayline's and DBOS's do.

- ``setup``: create the schema and procrastinate's tables in it, print ``ready``; on
  ``go`` defer N first jobs, 8 at a time, and print the seconds taken.
- ``worker``: open the app (its pool), print ``ready``; ``go`` starts the worker (and
  its CPU clock), ``stop`` prints one JSON line (CPU since ``go``) and exits. Held back
  this way, the N chains deferred before are drained from ``go`` on.
- ``latency``: defer one chain at a time on an idle system, each after the same seeded
  random idle gap as Wayline's run, and poll every millisecond until its third job
  succeeded.

The worker listens for new jobs (LISTEN/NOTIFY) and polls every 10 ms as well, like the
other engines; its pool holds a connection for each concurrent job and a few more (the
job's own defer, fetching, finishing, listening), so no job waits for a connection.
"""

from __future__ import annotations

import argparse
import asyncio
import threading
import time

import psycopg
import uvloop
from procrastinate import App, PsycopgConnector

from bench import peer_side

QUEUE = "chain"
POLLING_INTERVAL = 0.01
POOL_SPARE = 4
"""Connections beyond one per concurrent job: the worker's fetch, finish and LISTEN."""
CHAIN_DONE = (
    "/* bench-probe */ SELECT count(*) FILTER (WHERE status = 'succeeded'), "
    "count(*) FILTER (WHERE status IN ('failed', 'cancelled', 'aborted')) "
    "FROM procrastinate_jobs WHERE task_name = 'three' AND args->>'chain' = %s"
)


def make_app(dsn: str, schema: str, pool_size: int) -> App:
    """The app with the three chained tasks, its tables found through ``search_path``."""
    connector = PsycopgConnector(
        conninfo=dsn,
        kwargs={"options": f"-c search_path={schema}"},
        min_size=1,
        max_size=pool_size,
    )
    app = App(connector=connector)

    @app.task(name="three", queue=QUEUE)
    async def three(chain: str) -> None:
        """Does nothing: the benchmark measures the queue, not the job."""

    @app.task(name="two", queue=QUEUE)
    async def two(chain: str) -> None:
        await three.defer_async(chain=chain)

    @app.task(name="one", queue=QUEUE)
    async def one(chain: str) -> None:
        await two.defer_async(chain=chain)

    return app


async def _setup(args: argparse.Namespace) -> None:
    with psycopg.connect(args.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {args.schema}")
    app = make_app(args.dsn, args.schema, peer_side.CREATE_CONCURRENCY + POOL_SPARE)
    async with app.open_async():
        await app.schema_manager.apply_schema_async()
        await asyncio.to_thread(peer_side.held_back)
        one = app.tasks["one"]
        gate = asyncio.Semaphore(peer_side.CREATE_CONCURRENCY)

        async def defer(k: int) -> None:
            async with gate:
                await one.defer_async(chain=f"i{k}")

        started = time.perf_counter()
        await asyncio.gather(*(defer(k) for k in range(args.n)))
        peer_side.done({"enqueue_seconds": time.perf_counter() - started})


async def _worker(args: argparse.Namespace) -> None:
    app = make_app(args.dsn, args.schema, args.concurrency + POOL_SPARE)
    async with app.open_async():
        await asyncio.to_thread(peer_side.held_back)
        since = peer_side.cpu()
        threading.Thread(target=peer_side.until_stop, args=(since,), daemon=True).start()
        await app.run_worker_async(
            queues=[QUEUE],
            concurrency=args.concurrency,
            fetch_job_polling_interval=POLLING_INTERVAL,
            listen_notify=True,
            install_signal_handlers=False,
            wait=True,
        )


def _latency(args: argparse.Namespace) -> None:
    app = make_app(args.dsn, args.schema, POOL_SPARE)
    loop = asyncio.new_event_loop()
    loop.run_until_complete(app.open_async())
    one = app.tasks["one"]
    probe = psycopg.connect(args.dsn, autocommit=True, options=f"-c search_path={args.schema}")

    def start(chain: str) -> None:
        loop.run_until_complete(one.defer_async(chain=chain))

    def finished(chain: str) -> bool:
        succeeded, failed = probe.execute(CHAIN_DONE, [chain], prepare=True).fetchone()
        if failed:
            raise RuntimeError(f"chain {chain} failed")
        return bool(succeeded)

    peer_side.measure_latency(args, start, finished)


def main() -> None:
    parser = argparse.ArgumentParser(description="procrastinate side of the Wayline benchmark")
    parser.add_argument("action", choices=("setup", "worker", "latency"))
    parser.add_argument("--dsn", required=True, help="psycopg DSN of the cluster")
    parser.add_argument("--schema", required=True, help="schema of procrastinate's tables")
    parser.add_argument("--n", type=int, default=0, help="chains to defer (setup)")
    parser.add_argument("--concurrency", type=int, default=16, help="jobs at a time (worker)")
    peer_side.add_latency_arguments(parser)
    args = parser.parse_args()
    if args.action == "latency":
        _latency(args)
    else:
        uvloop.run({"setup": _setup, "worker": _worker}[args.action](args))


if __name__ == "__main__":
    main()
