"""Entry point of drill subprocesses: ``python -m verification.process_main worker|signal``.

Drill workers are real processes so that SIGKILL, SIGSTOP and restart are real. This
runs the engine's own ``Worker`` (and, for ``signal``, the engine's ``Client``) with what
a drill needs and ``wayline worker`` does not offer:

- the fault plan from ``WAYLINE_FAULT_PLAN`` (with the hit report and the proxy's sever
  channel, see ``engine.worker.faults``);
- short timings for every interval (lease, renewal, poll, sweep, heartbeat), so a drill
  takes seconds;
- the harness's observers, as the store's hooks: the fencing oracle
  (``verification.lease_audit``) and the settlement recorder
  (``verification.observations``);
- the self-test's broken build named by ``WAYLINE_DRILL_MUTANT``, if any
  (``verification.mutants``), through the store's and the worker's seams; otherwise,
  for a drill plan's workers, the marks of the code-first step bodies they enter
  (``verification.effects.BodyEntries``);
- an optional shared file clock (``--clock-file``, D9) or a wall-clock jump after
  start-up (``WAYLINE_DRILL_CLOCK_JUMP``, D19).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from datetime import timedelta

from engine import Client, load_app
from engine.store.clock import DatabaseClock
from engine.store.seams import StatementFilter, StoreHooks
from engine.store.store import Store
from engine.worker import runner
from engine.worker.faults import Faults
from engine.worker.loop import Worker, WorkerConfig
from verification import clocks, effects, lease_audit, mutants, observations
from verification.processes import WORKER_CONCURRENCY, WORKER_LEASE_SECONDS, WORKER_POLL_SECONDS


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    return runner.run(args.run(args))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="verification.process_main")
    commands = parser.add_subparsers(required=True)
    worker = commands.add_parser("worker")
    _common(worker)
    worker.add_argument("--app", default="verification.drill_app:app")
    worker.add_argument("--worker-id", required=True)
    worker.add_argument("--concurrency", type=int, default=WORKER_CONCURRENCY)
    worker.add_argument("--lease-seconds", type=float, default=WORKER_LEASE_SECONDS)
    worker.add_argument("--poll-seconds", type=float, default=WORKER_POLL_SECONDS)
    worker.add_argument("--sweep-seconds", type=float, default=0.25)
    worker.add_argument("--drain-seconds", type=float, default=2.0)
    worker.set_defaults(run=_worker)
    sig = commands.add_parser("signal")
    _common(sig)
    sig.add_argument("--instance", required=True)
    sig.add_argument("--step", required=True)
    sig.add_argument("--signal-id", required=True)
    sig.add_argument("--payload", default="null")
    sig.set_defaults(run=_signal)
    return parser


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--schema", required=True)
    parser.add_argument("--clock-file", help="a shared controllable clock (D9)")


async def _open(
    args: argparse.Namespace,
    hooks: StoreHooks,
    statement_filter: StatementFilter | None = None,
) -> Store:
    clock = clocks.FileClock(args.clock_file) if args.clock_file else DatabaseClock(clocks.WALL.now)
    store = await Store.open(
        args.dsn, args.schema, clock=clock, statement_filter=statement_filter, hooks=hooks
    )
    clocks.jump_from_env()  # after the store measured its offset, as a real jump would be
    return store


async def _worker(args: argparse.Namespace) -> int:
    registry = load_app(args.app)
    build = mutants.from_env(registry)
    observers = lease_audit.FencingOracle(observations.SettlementRecorder(build.store_hooks))
    lease = timedelta(seconds=args.lease_seconds)
    config = WorkerConfig(
        worker_id=args.worker_id,
        concurrency=args.concurrency,
        lease=lease,
        renew_every=lease / 3,
        poll_interval=timedelta(seconds=args.poll_seconds),
        drain_timeout=timedelta(seconds=args.drain_seconds),
        heartbeat_every=timedelta(seconds=max(args.sweep_seconds, 0.5)),
        sweep_every=timedelta(seconds=args.sweep_seconds),
    )
    store = await _open(args, observers, build.statement_filter)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        hooks = build.worker_hooks or effects.worker_hooks()
        worker = Worker(store, registry, config, Faults.from_env(), hooks=hooks)
        await worker.run(stop)
    finally:
        await store.close()
    return 0


async def _signal(args: argparse.Namespace) -> int:
    store = await _open(args, observations.SettlementRecorder())
    try:
        client = Client(store, faults=Faults.from_env())
        await client.signal(args.instance, args.step, args.signal_id, json.loads(args.payload))
    finally:
        await store.close()
    print("acknowledged", flush=True)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.getcwd())
    sys.exit(main())
