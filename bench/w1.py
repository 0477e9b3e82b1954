"""W1 for Wayline and its peers: throughput, idle latency, and recovery after SIGKILL.

Throughput (copied from issue 5): an instance is 3 no-op activities in sequence; N
instances are created first with the workers held back; the clock starts when the
workers are released and stops when a separate connection, polling every 20 ms, sees
the last instance's completion committed. Each run uses a fresh schema, so no run reads
another's rows. Holding back means: Wayline worker processes wait for ``go`` on stdin
with their store open; DBOS worker processes are launched with the queue's worker
concurrency at 0 and are released by raising it in the database (they re-read it on
every 10 ms poll); procrastinate's N first jobs are deferred before its worker processes
start working (on ``go``), and an instance is done when its third job succeeded.

Latency: one instance at a time on an idle system (one worker process), each started
after a seeded random idle gap, from the start call until a probe polling every
millisecond sees it complete. Each peer is measured in each of its shapes
(``bench.peers.SHAPES``): DBOS through its queue and by a direct in-process call,
procrastinate as a chain of three jobs through a separate worker.

Recovery: the same shape, but each step inserts a row into a side table. When half of
the 3 N step executions are in the table the worker gets SIGKILL and a fresh one is
started at once; we report how long until all N completed, and the missing and
duplicated executions. A Wayline re-execution that follows a recorded
``attempt_unknown`` (the activity declares ``on_unknown: retry_same_key``) is counted
apart from a silent one, which no record announces.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg

from bench import latency_marks, peers, procs
from bench.app import EFFECTS_DSN_ENV, EFFECTS_TABLE_ENV, RECOVERY_DEFINITION, W1_DEFINITION
from bench.app import definitions as wayline_definitions
from bench.cluster import PROBE, Cluster, Meter, Window
from engine.api.client import Client
from engine.model.events import EventKind
from engine.store.migrations import apply_migrations
from engine.store.rows import WorkState
from engine.store.store import Store

STEPS_PER_INSTANCE = 3
POLL_SECONDS = 0.02
LATENCY_POLL_SECONDS = 0.001
LATENCY_MAX_GAP_SECONDS = 0.02
"""Each latency sample starts after a random idle gap of up to this long (the same
seeded gaps for both engines), so a start never locks in step with an engine's poll
interval: requests reach a real system at random moments."""
LATENCY_GAP_SEED = 5
WAYLINE_AWAITED = "awaited"
"""Wayline's shape that awaits ``Client.wait`` instead of probing (issue 23); the probed
shape keeps the empty name it always had."""
RUN_TIMEOUT_SECONDS = 300.0
LATENCY_WAIT = timedelta(seconds=RUN_TIMEOUT_SECONDS)
"""How long the awaited shape's ``Client.wait`` waits for one instance at most."""
CREATE_CONCURRENCY = 8
COMPLETED = 4  # engine.model.instance.InstanceStatus.COMPLETED
ENDED_BADLY = (5, 6, 7)  # failed, cancelled, terminated

WAYLINE_PROGRESS = (
    PROBE + " SELECT count(*) FILTER (WHERE status = 4), "
    "count(*) FILTER (WHERE status IN (5, 6, 7)) FROM {schema}.instances"
)
DBOS_PROGRESS = (
    PROBE + " SELECT count(*) FILTER (WHERE status = 'SUCCESS'), "
    "count(*) FILTER (WHERE status IN ('ERROR', 'CANCELLED', 'MAX_RECOVERY_ATTEMPTS_EXCEEDED')) "
    "FROM {schema}.workflow_status WHERE queue_name = %(queue)s"
)
PROCRASTINATE_PROGRESS = (
    PROBE + " SELECT count(*) FILTER (WHERE status = 'succeeded' AND task_name = 'three'), "
    "count(*) FILTER (WHERE status IN ('failed', 'cancelled', 'aborted')) "
    "FROM {schema}.procrastinate_jobs"
)
DBOS_RELEASE = (
    PROBE + " UPDATE {schema}.queues SET worker_concurrency = %(concurrency)s, "
    "updated_at = (extract(epoch FROM clock_timestamp()) * 1000)::bigint WHERE name = %(queue)s"
)
"""What ``Queue.set_worker_concurrency`` writes; DBOS workers re-read it on every poll."""


@dataclass
class Throughput:
    """One W1 run of one engine."""

    engine: str
    processes: int
    concurrency: int
    instances: int
    seconds: float
    client_cpu: float
    processing: Window
    creation: Window
    creation_seconds: float
    failed: int = 0
    workers: list[dict[str, Any]] = field(default_factory=list)
    background: float = 0.0
    """Busy fraction of the machine's cores just before the run (other sessions' work)."""

    @property
    def instances_per_second(self) -> float:
        return self.instances / self.seconds

    @property
    def steps_per_second(self) -> float:
        return STEPS_PER_INSTANCE * self.instances / self.seconds


@dataclass
class Latency:
    engine: str
    samples: list[float]
    """Start call to completion seen by the probe, seconds."""
    calls: list[float] = field(default_factory=list)
    """How long the start call itself took (Client.start / enqueue_workflow), seconds."""
    timeline: list[tuple[int, str, str, float]] = field(default_factory=list)
    """Wayline: per history position, the event and the median ms since the previous one."""
    shape: str = ""
    """How a peer was driven (``bench.peers.SHAPES``); empty for Wayline."""
    marks: list[dict[str, float]] = field(default_factory=list)
    """Wayline: per sample, its named marks in ms since the start call
    (``bench.latency_marks``)."""

    @property
    def key(self) -> str:
        return peers.key(self.engine, self.shape)

    def percentile(self, p: float) -> float:
        """Nearest-rank percentile, in seconds."""
        ordered = sorted(self.samples)
        rank = max(1, min(len(ordered), round(p / 100 * len(ordered) + 0.5)))
        return ordered[rank - 1]

    @property
    def median(self) -> float:
        """The nearest-rank median, as every table's median column shows it (the goals
        once used the interpolated one and could print another figure for it)."""
        return self.percentile(50)


@dataclass
class Recovery:
    engine: str
    instances: int
    executions_at_kill: int
    seconds_before_kill: float
    fresh_ready_seconds: float
    in_flight: int
    released_seconds: float
    """Until no lease of the killed worker was still valid (Wayline: the dead-owner sweep
    expired them; DBOS: a new execution owned every workflow it had in flight)."""
    reclaimed_seconds: float
    """Until a live worker held all of that work (Wayline: the fresh worker claimed it)."""
    progressed_seconds: float
    """Until every instance in flight at the kill recorded progress again (Wayline: the
    lost attempt's unknown outcome; DBOS: the re-run step's checkpoint)."""
    in_flight_done_seconds: float
    all_done_seconds: float
    missing: int
    declared_repeats: int
    silent_repeats: int
    same_key_repeats: int
    unknown_events: int
    failed: int

    @property
    def rate_before_kill(self) -> float:
        """Step executions per second before the kill (for the expected remaining time)."""
        return self.executions_at_kill / self.seconds_before_kill

    @property
    def expected_rest_seconds(self) -> float:
        remaining = STEPS_PER_INSTANCE * self.instances - self.executions_at_kill
        return remaining / self.rate_before_kill


# Helpers -------------------------------------------------------------------------------


def _wait_until_done(
    conn: psycopg.Connection,
    query: str,
    params: dict[str, Any],
    n: int,
    started: float,
    timeout: float = RUN_TIMEOUT_SECONDS,
) -> tuple[float, int]:
    """Poll every 20 ms until n instances ended; (seconds since ``started``, failures)."""
    while True:
        tick = time.perf_counter()
        done, failed = conn.execute(query, params).fetchone()
        if done + failed >= n:
            return time.perf_counter() - started, failed
        if tick - started > timeout:
            raise TimeoutError(f"only {done} of {n} instances completed in {timeout:.0f} s")
        time.sleep(max(0.0, POLL_SECONDS - (time.perf_counter() - tick)))


def drop_schema(cluster: Cluster, schema: str) -> None:
    """Start from nothing: a leftover schema of the same name would count old rows."""
    with cluster.connect() as conn:
        conn.execute(f"{PROBE} DROP SCHEMA IF EXISTS {schema} CASCADE")
        conn.execute(f"{PROBE} DROP TABLE IF EXISTS {schema}_effects")


def _finish_all(workers: list[procs.Worker]) -> list[dict[str, Any]]:
    with _killed_on_error(workers):
        return [w.finish() for w in workers]


@contextlib.contextmanager
def _killed_on_error(workers: list[procs.Worker]) -> Iterator[None]:
    """Kill every worker when the block fails, so none outlives the run."""
    try:
        yield
    except BaseException:
        for w in workers:
            w.kill()
        raise


async def _prepare_wayline(dsn: str, schema: str) -> None:
    """A fresh schema with the benchmark's definitions published."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"{PROBE} DROP SCHEMA IF EXISTS {schema} CASCADE")
    await asyncio.to_thread(apply_migrations, dsn, schema)
    store = await Store.open(dsn, schema)
    try:
        client = Client(store)
        for definition in wayline_definitions():
            await client.publish(definition, "bench")
    finally:
        await store.close()


async def _create_wayline(dsn: str, schema: str, name: str, n: int) -> float:
    """Start n instances (8 at a time) as a client would; returns the seconds taken."""
    store = await Store.open(dsn, schema)
    try:
        client = Client(store)
        gate = asyncio.Semaphore(CREATE_CONCURRENCY)

        async def start(k: int) -> None:
            async with gate:
                await client.start(name, f"i{k}")

        started = time.perf_counter()
        await asyncio.gather(*(start(k) for k in range(n)))
        return time.perf_counter() - started
    finally:
        await store.close()


def _dbos_setup(
    cluster: Cluster,
    meter: Meter | None,
    schema: str,
    queue: str,
    workflow: str,
    n: int,
    worker_concurrency: int = 0,
) -> tuple[float, Window | None]:
    """Register the queue and enqueue n workflows; measured by ``meter`` when given."""
    drop_schema(cluster, schema)
    setup = procs.dbos(
        f"{schema}-setup",
        "setup",
        *_dbos_args(cluster, schema, queue),
        "--workflow",
        workflow,
        "--n",
        str(n),
        "--worker-concurrency",
        str(worker_concurrency),
    )
    setup.expect("ready", timeout=120)
    if meter is None:
        return _enqueued(setup), None
    return _measured(meter, lambda: _enqueued(setup))


def _enqueued(setup: procs.Worker) -> float:
    """Let a peer's setup process (ready, waiting for ``go``) enqueue its workflows; the
    seconds it reports they took."""
    setup.send("go")
    return float(setup.result(timeout=300)["enqueue_seconds"])


def _measured(meter: Meter, create: Callable[[], float]) -> tuple[float, Window]:
    """The seconds ``create`` reports creating a run's instances took, and the server's
    work meanwhile: a window of its own, begun right after a checkpoint."""
    meter.checkpoint()
    meter.begin()
    seconds = create()
    meter.mark_end()
    return seconds, meter.finish()


def _dbos_args(cluster: Cluster, schema: str, queue: str) -> list[str]:
    return [
        "--url",
        cluster.url(),
        "--schema",
        schema,
        "--queue",
        queue,
        "--effects-dsn",
        cluster.dsn,
    ]


def _dbos_worker(
    cluster: Cluster, schema: str, queue: str, executor: str, concurrency: int = 16
) -> procs.Worker:
    return procs.dbos(
        executor,
        "worker",
        *_dbos_args(cluster, schema, queue),
        "--executor-id",
        executor,
        "--concurrency",
        str(concurrency),
        env={EFFECTS_TABLE_ENV: f"{schema}_effects"},
    )


def _procrastinate_args(cluster: Cluster, schema: str) -> list[str]:
    return ["--dsn", cluster.dsn, "--schema", schema]


def _latency_args(count: int, warmup: int) -> list[str]:
    """The latency loop's sizes and the idle gaps every engine's samples start after."""
    return [
        "--count",
        str(count),
        "--warmup",
        str(warmup),
        "--max-gap",
        str(LATENCY_MAX_GAP_SECONDS),
        "--gap-seed",
        str(LATENCY_GAP_SEED),
    ]


def _peer_latency(engine: str, shape: str, driver: procs.Worker) -> Latency:
    result = driver.result(timeout=600)
    samples = [float(s) for s in result["samples"]]
    return Latency(engine, samples, [float(c) for c in result["calls"]], shape=shape)


# Throughput ----------------------------------------------------------------------------


def wayline_throughput(
    cluster: Cluster, meter: Meter, tag: str, n: int, processes: int, concurrency: int
) -> Throughput:
    schema = f"wl_{tag}"
    asyncio.run(_prepare_wayline(cluster.dsn, schema))
    creation_seconds, creation = _measured(
        meter, lambda: asyncio.run(_create_wayline(cluster.dsn, schema, W1_DEFINITION, n))
    )
    workers = [
        procs.wayline_worker(f"{schema}-{k}", cluster.dsn, schema, concurrency)
        for k in range(processes)
    ]
    query = WAYLINE_PROGRESS.format(schema=schema)
    run = _created("wayline", processes, concurrency, n, creation, creation_seconds)
    return _drain(run, cluster, meter, schema, workers, (query, {}))


def dbos_throughput(
    cluster: Cluster, meter: Meter, tag: str, n: int, processes: int, concurrency: int
) -> Throughput:
    schema, queue = f"dbos_{tag}", "w1"
    creation_seconds, creation = _dbos_setup(cluster, meter, schema, queue, "w1", n)
    assert creation is not None
    workers = [
        _dbos_worker(cluster, schema, queue, f"{schema}-e{k}", concurrency)
        for k in range(processes)
    ]
    params = {"queue": queue, "concurrency": concurrency}
    run = _created("dbos", processes, concurrency, n, creation, creation_seconds)
    return _drain(
        run,
        cluster,
        meter,
        schema,
        workers,
        (DBOS_PROGRESS.format(schema=schema), params),
        release=lambda probe: probe.execute(DBOS_RELEASE.format(schema=schema), params),
    )


def procrastinate_throughput(
    cluster: Cluster, meter: Meter, tag: str, n: int, processes: int, concurrency: int
) -> Throughput:
    schema = f"pq_{tag}"
    drop_schema(cluster, schema)
    setup = procs.procrastinate(
        f"{schema}-setup", "setup", *_procrastinate_args(cluster, schema), "--n", str(n)
    )
    setup.expect("ready", timeout=120)
    creation_seconds, creation = _measured(meter, lambda: _enqueued(setup))
    workers = [
        procs.procrastinate(
            f"{schema}-{k}",
            "worker",
            *_procrastinate_args(cluster, schema),
            "--concurrency",
            str(concurrency),
        )
        for k in range(processes)
    ]
    query = PROCRASTINATE_PROGRESS.format(schema=schema)
    run = _created("procrastinate", processes, concurrency, n, creation, creation_seconds)
    return _drain(run, cluster, meter, schema, workers, (query, {}))


def _created(
    engine: str, processes: int, concurrency: int, n: int, creation: Window, seconds: float
) -> Throughput:
    """A run whose ``n`` instances are created (in ``seconds``, the server's work in
    ``creation``) and whose processing is still to be measured: ``_drain`` fills it in."""
    return Throughput(engine, processes, concurrency, n, 0.0, 0.0, Window(), creation, seconds)


def _drain(
    run: Throughput,
    cluster: Cluster,
    meter: Meter,
    schema: str,
    workers: list[procs.Worker],
    progress: tuple[str, dict[str, Any]],
    release: Callable[[psycopg.Connection], object] | None = None,
) -> Throughput:
    """The timed window, the same for every engine: once every worker is ready, the
    clock starts, the workers get ``go`` (and, for DBOS, the queue is ``release``d), and
    it stops when the probe sees ``run.instances`` instances ended."""
    with cluster.connect() as probe, _killed_on_error(workers):
        for w in workers:
            w.expect("ready", timeout=120)
        meter.checkpoint()
        meter.begin()
        started = time.perf_counter()
        for w in workers:
            w.send("go")  # starts their CPU clocks (DBOS's still dequeue nothing)
        if release:
            release(probe)
        query, params = progress
        seconds, failed = _wait_until_done(probe, query, params, run.instances, started)
        meter.mark_end()
    run = replace(run, seconds=seconds, failed=failed)
    return _finished(run, cluster, meter, schema, workers)


def _finished(
    run: Throughput, cluster: Cluster, meter: Meter, schema: str, workers: list[procs.Worker]
) -> Throughput:
    """``run`` (its client CPU and processing window still empty) completed with what
    its workers report and the window measured since ``meter.begin``."""
    results = _finish_all(workers)
    processing = meter.finish()
    drop_schema(cluster, schema)  # else autovacuum works on it during the next window
    cpu = sum(float(r["cpu"]) for r in results)
    return replace(run, client_cpu=cpu, processing=processing, workers=results)


# Latency -------------------------------------------------------------------------------


def wayline_latency(cluster: Cluster, count: int, warmup: int) -> Latency:
    """The probed shape: ``Client.start``, then the probe polls the status every 1 ms
    (as the peers' queued shapes are measured)."""
    return _wayline_shape(cluster, count, warmup, "")


def wayline_awaited_latency(cluster: Cluster, count: int, warmup: int) -> Latency:
    """The awaited shape: ``Client.start``, then ``Client.wait``, which the end's own
    NOTIFY wakes (how an application learns that its instance ended)."""
    return _wayline_shape(cluster, count, warmup, WAYLINE_AWAITED)


def _wayline_shape(cluster: Cluster, count: int, warmup: int, shape: str) -> Latency:
    schema = f"wl_latency{'_' + shape if shape else ''}"
    asyncio.run(_prepare_wayline(cluster.dsn, schema))
    worker = procs.wayline_worker(f"{schema}-0", cluster.dsn, schema, 16, marks=True)
    with _killed_on_error([worker]):
        worker.expect("ready")
        worker.send("go")
        samples, calls, windows = asyncio.run(
            _wayline_latency(cluster.dsn, schema, count, warmup, awaited=bool(shape))
        )
    worker_marks = [(float(t), what) for t, what in worker.finish()["marks"]]
    ids = [f"lat-{k}" for k in range(warmup, warmup + count)]
    with cluster.connect() as conn:
        rows = conn.execute(TIMELINE.format(schema=schema), [ids]).fetchall()
    timeline = [(seq, EventKind(kind).label, step, float(ms)) for seq, kind, step, ms in rows]
    seen = latency_marks.WAIT_RETURNED if shape else latency_marks.SEEN_COMPLETED
    marks = [latency_marks.offsets(*window, worker_marks, seen=seen) for window in windows]
    return Latency("wayline", samples, calls, timeline, shape=shape, marks=marks)


TIMELINE = (
    PROBE
    + """
SELECT h.sequence, h.kind, h.step_name,
       percentile_cont(0.5) WITHIN GROUP (
           ORDER BY extract(epoch FROM h.occurred_at - p.occurred_at) * 1000)
FROM {schema}.history h
JOIN {schema}.history p ON p.instance_id = h.instance_id AND p.sequence = h.sequence - 1
WHERE h.instance_id = ANY(%s)
GROUP BY h.sequence, h.kind, h.step_name
ORDER BY h.sequence
"""
)
"""Event times are the deciding worker's clock (the store clock), taken before the commit."""


async def _wayline_latency(
    dsn: str, schema: str, count: int, warmup: int, awaited: bool
) -> tuple[list[float], list[float], list[tuple[float, float, float]]]:
    """Samples and start calls (seconds), and each sample's ``perf_counter`` readings
    when its start call began and was answered and when the probe saw it completed
    (``awaited``: when ``Client.wait`` returned it completed)."""
    store = await Store.open(dsn, schema)
    probe = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    status = f"{PROBE} SELECT status FROM {schema}.instances WHERE instance_id = %s"
    samples, calls, windows = [], [], []
    try:
        client = Client(store)
        gaps = random.Random(LATENCY_GAP_SEED)
        for k in range(warmup + count):
            instance = f"lat-{k}"
            await asyncio.sleep(gaps.uniform(0, LATENCY_MAX_GAP_SECONDS))
            started = time.perf_counter()
            await client.start(W1_DEFINITION, instance)
            answered = time.perf_counter()
            if awaited:
                ended = (await client.wait(instance, LATENCY_WAIT)).status
            else:
                ended = await _probed(probe, status, instance)
            done = time.perf_counter()
            if ended != COMPLETED:
                raise RuntimeError(f"instance {instance} ended with status {int(ended)}")
            if k >= warmup:
                samples.append(done - started)
                calls.append(answered - started)
                windows.append((started, answered, done))
    finally:
        await probe.close()
        await store.close()
    return samples, calls, windows


async def _probed(probe: psycopg.AsyncConnection, status: str, instance: str) -> int:
    """The instance's status once it has ended, read every LATENCY_POLL_SECONDS."""
    while True:
        row = await (await probe.execute(status, [instance], prepare=True)).fetchone()
        if row and row[0] in (COMPLETED, *ENDED_BADLY):
            return row[0]
        await asyncio.sleep(LATENCY_POLL_SECONDS)


def dbos_latency(cluster: Cluster, count: int, warmup: int) -> Latency:
    """The queue shape: enqueued by one process, run by a separate worker process."""
    schema, queue = "dbos_latency", "latency"
    _dbos_setup(cluster, None, schema, queue, "w1", 0, worker_concurrency=16)
    worker = _dbos_worker(cluster, schema, queue, f"{schema}-e0")
    with _killed_on_error([worker]):
        worker.expect("ready", timeout=120)
        worker.send("go")
        driver = procs.dbos(
            f"{schema}-driver",
            "latency",
            *_dbos_args(cluster, schema, queue),
            *_latency_args(count, warmup),
        )
        latency = _peer_latency("dbos", "queue", driver)
    worker.finish()
    return latency


def dbos_direct_latency(cluster: Cluster, count: int, warmup: int) -> Latency:
    """The direct shape: the workflow function called in the measuring process."""
    schema = "dbos_direct"
    drop_schema(cluster, schema)
    driver = procs.dbos(
        f"{schema}-driver",
        "direct",
        *_dbos_args(cluster, schema, "direct"),
        *_latency_args(count, warmup),
    )
    return _peer_latency("dbos", "direct", driver)


def procrastinate_latency(cluster: Cluster, count: int, warmup: int) -> Latency:
    """The chain shape: three jobs, each deferring the next, run by a separate worker."""
    schema = "pq_latency"
    drop_schema(cluster, schema)
    args = _procrastinate_args(cluster, schema)
    setup = procs.procrastinate(f"{schema}-setup", "setup", *args)
    setup.expect("ready", timeout=120)
    setup.send("go")
    setup.result(timeout=60)
    worker = procs.procrastinate(f"{schema}-0", "worker", *args, "--concurrency", "16")
    with _killed_on_error([worker]):
        worker.expect("ready", timeout=120)
        worker.send("go")
        driver = procs.procrastinate(
            f"{schema}-driver", "latency", *args, *_latency_args(count, warmup)
        )
        latency = _peer_latency("procrastinate", "chain", driver)
    worker.finish()
    return latency


LATENCIES = (
    ("wayline", "", wayline_latency),
    ("wayline", WAYLINE_AWAITED, wayline_awaited_latency),
    ("dbos", "queue", dbos_latency),
    ("dbos", "direct", dbos_direct_latency),
    ("procrastinate", "chain", procrastinate_latency),
)
"""Every engine and shape the idle latency is measured in, in the order they run."""


# Recovery ------------------------------------------------------------------------------

EFFECTS_TABLE = """
CREATE TABLE {table} (
    id bigserial PRIMARY KEY,
    instance text NOT NULL,
    step text NOT NULL,
    key text NOT NULL,
    attempt integer NOT NULL,
    pid integer NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
)
"""
EFFECTS_COUNT = PROBE + " SELECT count(*) FROM {table}"
EFFECTS_AUDIT = (
    PROBE
    + """
WITH expected AS (
    SELECT 'i' || k AS instance, s AS step
    FROM generate_series(0, %(n)s - 1) k, unnest(ARRAY['one', 'two', 'three']) s
),
seen AS (
    SELECT instance, step, count(*) AS runs, count(DISTINCT key) AS keys
    FROM {table} GROUP BY instance, step
),
joined AS (
    SELECT x.instance, x.step, COALESCE(s.runs, 0) AS runs, COALESCE(s.keys, 0) AS keys,
           {unknown} AS unknown
    FROM expected x LEFT JOIN seen s USING (instance, step)
)
SELECT count(*) FILTER (WHERE runs = 0),
       COALESCE(sum(runs - 1) FILTER (WHERE runs > 1 AND unknown), 0),
       COALESCE(sum(runs - 1) FILTER (WHERE runs > 1 AND NOT unknown), 0),
       COALESCE(sum(runs - 1) FILTER (WHERE runs > 1 AND keys = 1), 0)
FROM joined
"""
)
WAYLINE_UNKNOWN = (
    "EXISTS (SELECT 1 FROM {schema}.history h WHERE h.instance_id = x.instance "
    "AND h.step_name = x.step AND h.kind = 15)"
)


@dataclass(frozen=True)
class Stages:
    """How to see each recovery stage of the instances in flight at the kill.

    ``in_flight`` returns (instance id, mark) rows read right after the SIGKILL; each
    other query takes ``ids`` and ``marks`` (text arrays) and returns true once that
    stage is reached for all of them.
    """

    in_flight: str
    released: str
    reclaimed: str
    progressed: str
    completed: str


def _wayline_stages(schema: str, dead: str) -> Stages:
    """Mark = the instance's position at the kill; the dead worker's leases by owner."""
    held = f"FROM {schema}.work w WHERE w.state = {WorkState.LEASED} AND w.lease_owner = '{dead}'"
    return Stages(
        in_flight=(
            f"{PROBE} SELECT DISTINCT w.instance_id, i.sequence::text FROM {schema}.work w "
            f"JOIN {schema}.instances i USING (instance_id) "
            f"WHERE w.state = {WorkState.LEASED} AND w.lease_owner = '{dead}'"
        ),
        released=(
            f"{PROBE} SELECT NOT EXISTS (SELECT 1 {held} "
            "AND w.lease_expires_at > statement_timestamp())"
        ),
        reclaimed=f"{PROBE} SELECT NOT EXISTS (SELECT 1 {held})",
        progressed=(
            f"{PROBE} SELECT count(*) = cardinality(%(ids)s::text[]) "
            f"FROM {schema}.instances i "
            "JOIN unnest(%(ids)s::text[], %(marks)s::text[]) k(id, mark) "
            "ON i.instance_id = k.id WHERE i.sequence > k.mark::bigint"
        ),
        completed=(
            f"{PROBE} SELECT count(*) = cardinality(%(ids)s::text[]) FROM {schema}.instances "
            "WHERE instance_id = ANY(%(ids)s::text[]) AND status = 4"
        ),
    )


def _dbos_stages(schema: str, executor: str) -> Stages:
    """Mark = the execution that owned the workflow (owner_xid) and its checkpoints."""
    return Stages(
        in_flight=(
            f"{PROBE} SELECT s.workflow_uuid, COALESCE(s.owner_xid, '') || ' ' || "
            f"(SELECT count(*) FROM {schema}.operation_outputs o "
            "WHERE o.workflow_uuid = s.workflow_uuid) "
            f"FROM {schema}.workflow_status s "
            f"WHERE s.status = 'PENDING' AND s.executor_id = '{executor}'"
        ),
        released=(
            f"{PROBE} SELECT NOT EXISTS (SELECT 1 FROM {schema}.workflow_status s "
            "JOIN unnest(%(ids)s::text[], %(marks)s::text[]) k(id, mark) "
            "ON s.workflow_uuid = k.id "
            "WHERE COALESCE(s.owner_xid, '') = split_part(k.mark, ' ', 1) "
            "AND s.status = 'PENDING')"
        ),
        reclaimed=(
            f"{PROBE} SELECT NOT EXISTS (SELECT 1 FROM {schema}.workflow_status s "
            "JOIN unnest(%(ids)s::text[], %(marks)s::text[]) k(id, mark) "
            "ON s.workflow_uuid = k.id "
            "WHERE COALESCE(s.owner_xid, '') = split_part(k.mark, ' ', 1) "
            "AND s.status = 'PENDING')"
        ),
        progressed=(
            f"{PROBE} SELECT bool_and((SELECT count(*) FROM {schema}.operation_outputs o "
            "WHERE o.workflow_uuid = k.id) > split_part(k.mark, ' ', 2)::bigint "
            f"OR (SELECT s.status FROM {schema}.workflow_status s "
            "WHERE s.workflow_uuid = k.id) = 'SUCCESS') "
            "FROM unnest(%(ids)s::text[], %(marks)s::text[]) k(id, mark)"
        ),
        completed=(
            f"{PROBE} SELECT count(*) = cardinality(%(ids)s::text[]) "
            f"FROM {schema}.workflow_status "
            "WHERE workflow_uuid = ANY(%(ids)s::text[]) AND status = 'SUCCESS'"
        ),
    )


def wayline_recovery(cluster: Cluster, n: int) -> Recovery:
    schema = "wl_recovery"
    table = f"{schema}_effects"
    drop_schema(cluster, schema)
    asyncio.run(_prepare_wayline(cluster.dsn, schema))
    with cluster.connect() as conn:
        conn.execute(EFFECTS_TABLE.format(table=table))
    asyncio.run(_create_wayline(cluster.dsn, schema, RECOVERY_DEFINITION, n))
    env = {EFFECTS_DSN_ENV: cluster.dsn, EFFECTS_TABLE_ENV: table}

    def start(worker_id: str) -> procs.Worker:
        return procs.wayline_worker(
            worker_id, cluster.dsn, schema, 16, worker_id=worker_id, env=env
        )

    return _recovery(
        cluster,
        "wayline",
        n,
        table,
        start,
        stages=_wayline_stages(schema, "rec-a"),
        progress=(WAYLINE_PROGRESS.format(schema=schema), {}),
        unknown_sql=WAYLINE_UNKNOWN.format(schema=schema),
        unknown_events=f"{PROBE} SELECT count(*) FROM {schema}.history WHERE kind = 15",
        names=("rec-a", "rec-b"),
    )


def dbos_recovery(cluster: Cluster, n: int) -> Recovery:
    schema, queue = "dbos_recovery", "recovery"
    table = f"{schema}_effects"
    _dbos_setup(cluster, None, schema, queue, "recovery", n)
    with cluster.connect() as conn:
        conn.execute(EFFECTS_TABLE.format(table=table))
    executor = f"{schema}-e0"
    return _recovery(
        cluster,
        "dbos",
        n,
        table,
        lambda name: _dbos_worker(cluster, schema, queue, executor),
        stages=_dbos_stages(schema, executor),
        progress=(DBOS_PROGRESS.format(schema=schema), {"queue": queue}),
        unknown_sql="false",
        unknown_events="",
        names=("dbos-rec-a", "dbos-rec-b"),
        release=lambda conn: conn.execute(
            DBOS_RELEASE.format(schema=schema), {"queue": queue, "concurrency": 16}
        ),
    )


def _recovery(
    cluster: Cluster,
    engine: str,
    n: int,
    table: str,
    start: Any,
    *,
    stages: Stages,
    progress: tuple[str, dict[str, Any]],
    unknown_sql: str,
    unknown_events: str,
    names: tuple[str, str],
    release: Any = None,
) -> Recovery:
    """Run, SIGKILL at half the executions, start a fresh worker, audit the side table."""
    half = STEPS_PER_INSTANCE * n // 2
    first = start(names[0])
    with cluster.connect() as probe:
        with _killed_on_error([first]):
            first.expect("ready", timeout=120)
            started = time.perf_counter()
            first.send("go")
            if release:
                release(probe)
            count_sql = EFFECTS_COUNT.format(table=table)
            while (executed := probe.execute(count_sql).fetchone()[0]) < half:
                if time.perf_counter() - started > RUN_TIMEOUT_SECONDS:
                    raise TimeoutError(f"{engine} recovery: {executed} executions before the kill")
                time.sleep(0.005)
        first.kill()
        killed = time.perf_counter()
        executed = probe.execute(count_sql).fetchone()[0]
        marked = probe.execute(stages.in_flight).fetchall()
        marks = {"ids": [row[0] for row in marked], "marks": [row[1] for row in marked]}
        fresh = start(names[1])
        reached: dict[str, float] = {}
        checks = {
            "released": stages.released,
            "reclaimed": stages.reclaimed,
            "progressed": stages.progressed,
            "completed": stages.completed,
        }
        with _killed_on_error([fresh]):
            fresh.expect("ready", timeout=120)
            ready = time.perf_counter() - killed
            fresh.send("go")
            query, params = progress
            while True:
                tick = time.perf_counter()
                for name, check in checks.items():
                    if name not in reached and probe.execute(check, marks).fetchone()[0]:
                        reached[name] = tick - killed
                done, failed = probe.execute(query, params).fetchone()
                if done + failed >= n:
                    all_seconds = tick - killed
                    break
                if tick - killed > RUN_TIMEOUT_SECONDS:
                    raise TimeoutError(f"{engine} recovery: only {done} of {n} completed")
                time.sleep(max(0.0, POLL_SECONDS - (time.perf_counter() - tick)))
        fresh.finish()
        audit = EFFECTS_AUDIT.format(table=table, unknown=unknown_sql)
        missing, declared, silent, same_key = probe.execute(audit, {"n": n}).fetchone()
        unknowns = probe.execute(unknown_events).fetchone()[0] if unknown_events else 0
    return Recovery(
        engine,
        n,
        executed,
        killed - started,
        ready,
        len(marked),
        reached.get("released", all_seconds),
        reached.get("reclaimed", all_seconds),
        reached.get("progressed", all_seconds),
        reached.get("completed", all_seconds),
        all_seconds,
        int(missing),
        int(declared),
        int(silent),
        int(same_key),
        int(unknowns),
        int(failed),
    )


def profile_wayline(cluster: Cluster, n: int, out: Path) -> tuple[dict[str, Any], float]:
    """An untimed run of one profiled worker (cProfile + cache counters)."""
    schema = "wl_profile"
    asyncio.run(_prepare_wayline(cluster.dsn, schema))
    asyncio.run(_create_wayline(cluster.dsn, schema, W1_DEFINITION, n))
    worker = procs.wayline_worker(f"{schema}-0", cluster.dsn, schema, 16, profile=out)
    with cluster.connect() as probe, _killed_on_error([worker]):
        worker.expect("ready")
        started = time.perf_counter()
        worker.send("go")
        seconds, _ = _wait_until_done(probe, WAYLINE_PROGRESS.format(schema=schema), {}, n, started)
    return worker.finish(), seconds
