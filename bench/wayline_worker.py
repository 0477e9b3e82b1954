"""A Wayline worker process the benchmark can hold back, release and stop.

``python -m bench.wayline_worker --dsn DSN --schema S --concurrency C``

It opens the store and builds ``engine.worker.loop.Worker`` exactly as ``wayline worker``
does (same defaults: a pool of ``DEFAULT_POOL_SIZE`` connections, 30 s leases, the same
event loop: ``engine.worker.runner``), prints
``ready``, and waits. ``go`` on stdin starts the worker (so process start-up is not
timed); ``stop`` stops it, drains, and prints one JSON line with the CPU time this
process used since ``go`` and the worker's metrics. The benchmark SIGKILLs it to test
recovery.

``--marks`` adds the worker's marks (``bench.latency_marks``) to that JSON line: the
latency loop's breakdown of where one instance's milliseconds go.

``--profile FILE`` is for a separate, untimed run: it profiles the event loop with
cProfile (on the thread's CPU time) and counts how the instance cache is used (loads,
hits, events read).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import resource
import sys
import time
from datetime import timedelta

from bench.app import app
from bench.latency_marks import MarkingFaults, MarkingMetrics
from engine.model.instance import Instance
from engine.model.registry import Registry
from engine.store.store import Store
from engine.worker import runner
from engine.worker.instance_cache import InstanceCache
from engine.worker.loop import Worker, WorkerConfig


class CountingCache(InstanceCache):
    """An InstanceCache that counts loads, entries found, and events read to advance."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.loads = 0
        self.found = 0
        self.current = 0

    async def _advance(self, instance_id: str, registry: Registry) -> Instance:
        cached = self._entries.get(instance_id)
        state = await super()._advance(instance_id, registry)
        self.loads += 1
        if cached is not None:
            self.found += 1
            if cached.sequence == state.sequence:
                self.current += 1
        return state


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _main(args: argparse.Namespace) -> dict[str, object]:
    store = await Store.open(args.dsn, args.schema)
    config = WorkerConfig(
        worker_id=args.worker_id or f"bench-{os.getpid()}",
        concurrency=args.concurrency,
        poll_interval=timedelta(seconds=args.poll_seconds),
    )
    faults, metrics = (MarkingFaults(), MarkingMetrics()) if args.marks else (None, None)
    worker = Worker(store, app, config, faults=faults, metrics=metrics)
    cache = None
    if args.profile:
        cache = CountingCache(store, worker.ctx.registries)
        worker.ctx.cache = cache
    await worker.ctx.registries.get()  # the catalog read is start-up, not the workload
    print("ready", flush=True)
    line = await asyncio.to_thread(sys.stdin.readline)
    if line.strip() != "go":
        await store.close()
        return {"aborted": True}
    cpu = _cpu()
    # Thread CPU time, not wall time: on a shared machine a wall-clock profile charges
    # whatever function was running when the process was preempted.
    profiler = cProfile.Profile(time.thread_time) if args.profile else None
    stop = asyncio.Event()
    if profiler:
        profiler.enable()
    running = asyncio.create_task(worker.run(stop))
    await asyncio.to_thread(sys.stdin.readline)  # "stop" or EOF
    stop.set()
    await running
    if profiler:
        profiler.disable()
        profiler.dump_stats(args.profile)
    used = _cpu() - cpu
    await store.close()
    result: dict[str, object] = {"cpu": used, "metrics": worker.metrics.counts()}
    if faults is not None and metrics is not None:
        result["marks"] = sorted(faults.marks + metrics.marks)
    if cache is not None:
        result["cache"] = {
            "loads": cache.loads,
            "found": cache.found,
            "current": cache.current,
            "events_read": cache.events_read,
        }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--schema", required=True)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--poll-seconds", type=float, default=0.01)
    parser.add_argument("--worker-id")
    parser.add_argument("--marks", action="store_true", help="report the worker's marks")
    parser.add_argument("--profile", help="write cProfile stats here (untimed runs only)")
    args = parser.parse_args()
    print(json.dumps(runner.run(_main(args))), flush=True)


if __name__ == "__main__":
    main()
