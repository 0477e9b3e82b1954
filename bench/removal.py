"""What removing a month of ended instances costs: retention's batches or a dropped partition.

Issue 25 asks for history and the ledger to be partitioned, so that removal drops
partitions instead of deleting rows, *if the measurements show it pays*. This measures
both on the same rows, the oldest month of ``bench.ended_rows``' copies:

- *Deleting* is ``engine.store.retention`` as ``wayline retention run`` does it: batches
  of ``MAX_PRUNE_BATCH`` ended instances found by its statement, exported (one JSON line
  each, synced) and removed in one transaction each. Per batch: the time of each part
  and the WAL the removal wrote. Then the ``VACUUM`` that reclaims the deleted rows
  (autovacuum would run it later; it scans every index of the table whole).
- *Dropping* needs a partitioned table. ``PART_SCHEMA`` holds a copy of the ended
  instances' history and ledger, partitioned by month of the instance's creation (a
  column the production tables do not have: the key of every row must hold the
  partition key, and an instance's rows must all fall in one partition for a drop to
  remove whole instances). The oldest month's partitions are detached (``CONCURRENTLY``,
  so readers of the other partitions do not wait) and dropped; time and WAL.
- The price of partitioning on the read path: the engine reads history by instance id
  alone, which says nothing about the partition, so every read probes every
  partition's index. ``history_page`` of one ended instance on the copy and on the
  production table.

A separate process claims one work item every ``LOOP_PAUSE`` s throughout, from a
backlog of ``LOOP_DUE`` rows, so the report shows whether removal moves a worker's
claim latency: its samples are pooled by what the measuring process was doing then.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg

from bench import claims, ended_rows, histories
from bench.cluster import PROBE, Cluster
from bench.scale_results import Batch, RemovalResults, Sample, sample
from engine.store import leases, reads, retention
from engine.store.migrations import apply_migrations
from engine.store.statements import retention as retention_sql
from engine.store.statements.transitions import LEDGER_READ
from engine.store.store import Store

PART_SCHEMA = "hscale_part"
PARTITION_KEY = "instance_created_at"
PARTITIONED = {
    "history": ("instance_id, sequence", ("instance_id, kind, sequence",)),
    "transitions": ("instance_id, transition_id", ()),
}
"""Per table: its primary key (the partition key is added to it) and its other indexes,
as the production schema has them."""
LOOP_PAUSE = 0.02
LOOP_DUE = 30_000
"""Due rows for the claim loop: at most 50 claims a second for the whole phase."""
IDLE_SECONDS = 15.0
"""The claim loop alone, before the removals and between them."""
READ_SAMPLES = 200
WAL_LSN = f"{PROBE} SELECT pg_current_wal_insert_lsn()"
WAL_DIFF = f"{PROBE} SELECT pg_wal_lsn_diff(%s, %s)::bigint"


class Phases:
    """When the measuring process did what (monotonic seconds, shared by processes)."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, float, float]] = []

    @contextmanager
    def phase(self, label: str) -> Iterator[None]:
        began = time.monotonic()
        try:
            yield
        finally:
            self.spans.append((label, began, time.monotonic()))

    def idle(self, label: str, seconds: float) -> None:
        with self.phase(label):
            time.sleep(seconds)


def pooled(
    spans: list[tuple[str, float, float]], samples: list[tuple[float, float]]
) -> dict[str, list[float]]:
    """The ms of each sample (its start, its ms) under the label of the span it started
    in, labels in the order they first occur; samples outside every span are left out."""
    found: dict[str, list[float]] = {label: [] for label, _, _ in spans}
    for began, ms in samples:
        for label, start, end in spans:
            if start <= began < end:
                found[label].append(ms)
                break
    return found


async def run(
    cluster: Cluster, store: Store, conn: psycopg.Connection, schema: str
) -> RemovalResults:
    shape = ended_rows.shape(0, ended_rows.template_rows(conn, schema))
    results = RemovalResults(shape)
    first, _ = ended_rows.span(conn)
    cutoff = conn.execute(
        f"{PROBE} SELECT %s::timestamptz + interval '1 month'", [first]
    ).fetchone()[0]
    results.copy_seconds, results.partitions = _partitioned_copy(cluster, conn, schema, first)
    _log(f"partitioned copy in {results.copy_seconds:.0f} s")
    results.partition_rows, results.partition_bytes = _partition_size(conn)
    results.reads = await _reads(cluster, store, conn)
    claims.top_up(conn, schema, LOOP_DUE)
    phases = Phases()
    context = multiprocessing.get_context("spawn")
    stop, out = context.Event(), context.Queue()
    loop = context.Process(target=claim_loop, args=(cluster.dsn, schema, LOOP_PAUSE, stop, out))
    loop.start()
    try:
        phases.idle("idle, before", IDLE_SECONDS)
        await _retention(store, conn, cutoff, phases, results)
        _log(f"retention removed {results.removed:,} instances in {len(results.batches)} batches")
        _vacuum(conn, schema, phases, results)
        phases.idle("idle, between", IDLE_SECONDS)
        _drop(conn, phases, results)
        phases.idle("idle, after", IDLE_SECONDS)
    finally:
        stop.set()
        samples = out.get(timeout=60)
        loop.join(timeout=60)
    results.claim_loop = [
        sample(label, ms) for label, ms in pooled(phases.spans, samples).items() if ms
    ]
    results.shape = ended_rows.Shape(
        results.removed,
        shape.events_per_instance,
        shape.ledger_per_instance,
        shape.work_per_instance,
    )
    return results


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] removal: {message}", flush=True)


def _lsn(conn: psycopg.Connection) -> str:
    return str(conn.execute(WAL_LSN).fetchone()[0])


def _wal_since(conn: psycopg.Connection, lsn: str) -> int:
    return int(conn.execute(WAL_DIFF, [_lsn(conn), lsn]).fetchone()[0])


async def _retention(
    store: Store,
    conn: psycopg.Connection,
    cutoff: datetime,
    phases: Phases,
    results: RemovalResults,
) -> None:
    """Retention's own batches (``engine.store.retention``) until the month is gone."""
    params = {"tenant": "", "cutoff": cutoff, "limit": retention.MAX_PRUNE_BATCH}
    conn.execute(f"{PROBE} SELECT pg_stat_statements_reset()")
    try:
        await _batches(store, conn, params, phases, results)
    finally:
        results.delete_ms = _delete_times(conn)


def _delete_times(conn: psycopg.Connection) -> dict[str, float]:
    """Server ms of each table's DELETE since the reset (``pg_stat_statements``)."""
    rows = conn.execute(
        f"{PROBE} SELECT query, total_exec_time FROM pg_stat_statements "
        "WHERE query LIKE 'DELETE FROM %'"
    ).fetchall()
    return {query.split()[2]: float(ms) for query, ms in rows}


async def _batches(
    store: Store,
    conn: psycopg.Connection,
    params: dict[str, Any],
    phases: Phases,
    results: RemovalResults,
) -> None:
    with (
        tempfile.TemporaryDirectory() as scratch,
        retention.ExportFile(Path(scratch) / "export.jsonl") as export,
    ):
        while True:
            with phases.phase("retention: find"):
                began = time.perf_counter()
                async with store.reading() as reading:
                    expired = await (
                        await reading.execute(retention_sql.EXPIRED, params)
                    ).fetchall()
                found = time.perf_counter()
            if not expired:
                return
            with phases.phase("retention: export"):
                await retention._export(store, [row[0] for row in expired], export)
                exported = time.perf_counter()
            lsn = _lsn(conn)
            with phases.phase("retention: delete"):
                removed = await retention._remove(store, expired)
                done = time.perf_counter()
            wal = _wal_since(conn, lsn)
            results.batches.append(
                Batch(
                    removed,
                    1000 * (found - began),
                    1000 * (exported - found),
                    1000 * (done - exported),
                    wal,
                )
            )
            export.seek(0)
            export.truncate()


def _vacuum(conn: psycopg.Connection, schema: str, phases: Phases, results: RemovalResults) -> None:
    """What reclaims the deleted rows' space (autovacuum's work, done now)."""
    lsn = _lsn(conn)
    with phases.phase("vacuum after delete"):
        began = time.perf_counter()
        conn.execute(
            f"{PROBE} VACUUM {', '.join(f'{schema}.{table}' for table in ended_rows.TABLES)}"
        )
        results.vacuum_ms = 1000 * (time.perf_counter() - began)
    results.vacuum_wal_bytes = _wal_since(conn, lsn)


def _partitioned_copy(
    cluster: Cluster, conn: psycopg.Connection, schema: str, first: datetime
) -> tuple[float, int]:
    """``PART_SCHEMA``: history and ledger of the ended copies, a partition per month."""
    conn.execute(f"{PROBE} DROP SCHEMA IF EXISTS {PART_SCHEMA} CASCADE")
    apply_migrations(cluster.dsn, PART_SCHEMA)  # so a Store opens on it
    bounds = conn.execute(
        f"{PROBE} SELECT m, m + interval '1 month' FROM generate_series(%s::timestamptz, "
        "%s::timestamptz + (%s - 1) * interval '1 month', interval '1 month') m",
        [first, first, ended_rows.SPAN_MONTHS],
    ).fetchall()
    began = time.perf_counter()
    for table, (key, indexes) in PARTITIONED.items():
        for statement in partitioned_table(PART_SCHEMA, table, schema, key, indexes, bounds):
            conn.execute(statement)
        conn.execute(
            f"{PROBE} INSERT INTO {PART_SCHEMA}.{table} SELECT t.*, i.created_at "
            f"FROM {schema}.{table} t JOIN {schema}.instances i USING (instance_id) "
            "WHERE i.instance_id LIKE %s AND i.instance_id <> %s",
            [ended_rows.PREFIX + "%", ended_rows.TEMPLATE_ID],
        )
    conn.execute(f"{PROBE} VACUUM ANALYZE {PART_SCHEMA}.history, {PART_SCHEMA}.transitions")
    return time.perf_counter() - began, len(bounds)


def partition_name(table: str, index: int) -> str:
    return f"{table}_m{index:02d}"


def partitioned_table(
    schema: str,
    table: str,
    like: str,
    key: str,
    indexes: tuple[str, ...],
    bounds: list[tuple[datetime, datetime]],
) -> list[str]:
    """The statements that replace ``schema.table`` by a copy of ``like.table``'s columns
    plus ``PARTITION_KEY``, range-partitioned by it at ``bounds`` (a partition each)."""
    name = f"{schema}.{table}"
    statements = [
        f"DROP TABLE {name} CASCADE",
        f"CREATE TABLE {name} (LIKE {like}.{table} INCLUDING DEFAULTS INCLUDING CONSTRAINTS, "
        f"{PARTITION_KEY} timestamptz NOT NULL) PARTITION BY RANGE ({PARTITION_KEY})",
        f"ALTER TABLE {name} ADD PRIMARY KEY ({key}, {PARTITION_KEY})",
        *(f"CREATE INDEX ON {name} ({columns})" for columns in indexes),
    ]
    statements += [
        f"CREATE TABLE {schema}.{partition_name(table, k)} PARTITION OF {name} "
        f"FOR VALUES FROM ('{low.isoformat()}') TO ('{high.isoformat()}')"
        for k, (low, high) in enumerate(bounds)
    ]
    return [f"{PROBE} {s}" for s in statements]


def _partition_size(conn: psycopg.Connection) -> tuple[dict[str, int], int]:
    """Rows per table and bytes (heap and indexes) of the oldest month's partitions."""
    rows, size = {}, 0
    for table in PARTITIONED:
        name = f"{PART_SCHEMA}.{partition_name(table, 0)}"
        rows[table] = conn.execute(f"{PROBE} SELECT count(*) FROM {name}").fetchone()[0]
        size += conn.execute(f"{PROBE} SELECT pg_total_relation_size(%s)", [name]).fetchone()[0]
    return rows, size


def _drop(conn: psycopg.Connection, phases: Phases, results: RemovalResults) -> None:
    """Detach (concurrently) and drop the oldest month's partition of each table."""
    lsn = _lsn(conn)
    with phases.phase("detach + drop partition"):
        for table in PARTITIONED:
            partition = f"{PART_SCHEMA}.{partition_name(table, 0)}"
            began = time.perf_counter()
            conn.execute(
                f"{PROBE} ALTER TABLE {PART_SCHEMA}.{table} "
                f"DETACH PARTITION {partition} CONCURRENTLY"
            )
            detached = time.perf_counter()
            conn.execute(f"{PROBE} DROP TABLE {partition}")
            results.detach_ms[table] = 1000 * (detached - began)
            results.drop_ms[table] = 1000 * (time.perf_counter() - detached)
    results.drop_wal_bytes = _wal_since(conn, lsn)


async def _reads(cluster: Cluster, store: Store, conn: psycopg.Connection) -> list[Sample]:
    """Each read both ways, production table first: ``history_page`` of one ended
    instance of the second month, and the ledger lookup every commit makes
    (``LEDGER_READ``) of one of its transition ids and of a new one."""
    instance, transition = conn.execute(
        f"{PROBE} SELECT instance_id, transition_id "
        f"FROM {PART_SCHEMA}.{partition_name('transitions', 1)} LIMIT 1"
    ).fetchone()
    found = []
    partitioned = await Store.open(cluster.dsn, PART_SCHEMA, max_size=1)
    try:
        for name, call in (
            ("history_page 100 (ended)", lambda on: reads.history_page(on, instance, limit=100)),
            ("ledger lookup, committed id", lambda on: _ledger(on, instance, transition)),
            ("ledger lookup, new id", lambda on: _ledger(on, instance, transition + "#new")),
        ):
            for label, on in (("production", store), ("partitioned", partitioned)):
                timed = await histories._timed(
                    conn, f"{name}, {label}", READ_SAMPLES, lambda c=call, s=on: c(s)
                )
                found.append(
                    Sample(timed.name, timed.calls, timed.median_ms, timed.p99_ms, timed.server_ms)
                )
    finally:
        await partitioned.close()
    return found


async def _ledger(store: Store, instance_id: str, transition_id: str) -> None:
    async with store.reading() as conn:
        key = {"instance": instance_id, "id": transition_id}
        await (await conn.execute(LEDGER_READ, key)).fetchall()


def claim_loop(dsn: str, schema: str, pause: float, stop: Any, out: Any) -> None:
    """In its own process: claim one item every ``pause`` s until ``stop``; puts the
    (monotonic start, ms) of every claim on ``out``."""
    out.put(asyncio.run(_claims_until(dsn, schema, pause, stop)))


async def _claims_until(
    dsn: str, schema: str, pause: float, stop: Any
) -> list[tuple[float, float]]:
    store = await Store.open(dsn, schema, max_size=1)
    found = []
    try:
        while not stop.is_set():
            began = time.monotonic()
            await leases.claim(store, claims.OWNER, claims.LEASE, 1, targets=claims.TARGETS)
            found.append((began, 1000 * (time.monotonic() - began)))
            await asyncio.sleep(pause)
    finally:
        await store.close()
    return found
