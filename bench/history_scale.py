"""Issue 25, bounded history: W2 and W4 with 10^7 ended history rows, and removal's cost.

``bench/run --history-scale`` (about 10 minutes at 10^7 on 2 cores; ``--ended-events``
for development sizes). In one schema of the run's private cluster:

1. *Before.* The engine commits the long W4 instance (``LONG_STEPS`` steps) and one
   ended instance (the template of ``bench.ended_rows``); bulk SQL adds
   ``LIST_INSTANCES`` running instances for the list and ``CLAIM_DUE`` due work rows for
   the claims. After ``VACUUM ANALYZE``: W2 (claims of 1 and of 16, the backlog topped
   up to ``CLAIM_DUE`` before each) and W4 (the instance page's and the list's reads).
2. *After.* ``bench.ended_rows`` adds ended instances until history holds ``events``
   more rows (with their ledger and work rows), ``VACUUM ANALYZE``, the same W2 and W4
   again, and the sizes of the tables and indexes.
3. *Removal* (``bench.removal``): retention's batches against dropping a partition of a
   partitioned copy, with a claim loop running alongside.

The schemas are dropped at the end, so the disk is freed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg

from bench import claims, ended_rows, histories, machine, removal
from bench.app import W1_DEFINITION, definitions
from bench.cluster import PROBE, Cluster
from bench.rows import add_started_instances
from bench.scale_results import Sample, ScaleResults, TableSize
from engine.model.instance import InstanceStatus
from engine.model.registry import Registry
from engine.store import catalog, reads
from engine.store.migrations import apply_migrations
from engine.store.reads import InstanceView
from engine.store.rows import WorkState
from engine.store.store import Store

SCHEMA = "hscale"
ENDED_EVENTS = 10**7
"""History rows of ended instances added between the two measurements (issue 25)."""
LONG_STEPS = 3333
"""The W4 instance: 10,001 events, as in the full run's W4."""
LIST_INSTANCES = 10**5
"""Running instances for the list, as in the full run's W4."""
CLAIM_DUE = 10**4
"""Due work rows before every series of claims: W2's first level."""
CLAIM_SAMPLES = 200
CLAIM_WARMUP = 20
READ_SAMPLES = 200
INSPECT_SAMPLES = 5
LIST_PREFIX = "list-"


def run(cluster: Cluster, results: ScaleResults) -> ScaleResults:
    """Fill ``results`` measuring in a fresh schema of ``cluster``; the schemas are
    dropped afterwards, so the disk is freed."""
    with cluster.connect() as conn:
        conn.execute(f"{PROBE} DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
    apply_migrations(cluster.dsn, SCHEMA)
    try:
        return asyncio.run(_run(cluster, results))
    finally:
        with cluster.connect() as conn:
            conn.execute(f"{PROBE} DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
            conn.execute(f"{PROBE} DROP SCHEMA IF EXISTS {removal.PART_SCHEMA} CASCADE")


async def _run(cluster: Cluster, results: ScaleResults) -> ScaleResults:
    store = await Store.open(cluster.dsn, SCHEMA, max_size=2)
    try:
        with cluster.connect() as conn:
            middle, registry = await _setup(store, conn, LONG_STEPS, LIST_INSTANCES)
            results.sizes_before = sizes(conn, SCHEMA)
            results.busy_before = machine.wait_for_quiet()
            results.before = await _measure(store, conn, middle, registry)
            results.shape = ended_rows.shape(
                results.ended_events, ended_rows.template_rows(conn, SCHEMA)
            )
            _log(f"adding {results.shape.instances:,} ended instances")
            results.load_seconds = ended_rows.add_ended(conn, SCHEMA, results.shape.instances)
            started = time.perf_counter()
            conn.execute(f"{PROBE} VACUUM ANALYZE")
            results.vacuum_seconds = time.perf_counter() - started
            _log(
                f"loaded in {results.load_seconds:.0f} s, "
                f"vacuumed in {results.vacuum_seconds:.0f} s"
            )
            results.sizes_after = sizes(conn, SCHEMA)
            results.busy_after = machine.wait_for_quiet()
            results.after = await _measure(store, conn, middle, registry)
            try:
                results.removal = await removal.run(cluster, store, conn, SCHEMA)
            except Exception as exc:  # the figures before it are worth keeping
                results.error = f"removal: {type(exc).__name__}: {exc}"
                _log(results.error)
    finally:
        await store.close()
    return results


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] history-scale: {message}", flush=True)


async def _setup(
    store: Store, conn: psycopg.Connection, long_steps: int, list_count: int
) -> tuple[tuple[Any, str], Registry]:
    """The instances both measurements read; the keyset cursor half way down the list,
    and the registry that replays the long instance."""
    long = histories.long_definition(long_steps)
    template = histories.long_definition(ended_rows.STEPS, version="ended")
    for published in [*definitions(), long, template]:
        await catalog.publish(store, published, "bench")
    for definition, instance in (
        (long, histories.LONG_INSTANCE),
        (template, ended_rows.TEMPLATE_ID),
    ):
        transitions = histories.build_history(definition, Registry([definition]), instance)
        for k in range(0, len(transitions), histories.COMMIT_CHUNK):
            await store.commit_all(transitions[k : k + histories.COMMIT_CHUNK])
    ref = next(d.ref for d in definitions() if d.name == W1_DEFINITION)
    add_started_instances(conn, SCHEMA, LIST_PREFIX, 0, list_count, ref, "bench.noop")
    conn.execute(
        f"{PROBE} UPDATE {SCHEMA}.work SET state = {WorkState.COMPLETED}, completed_at = now() "
        "WHERE instance_id LIKE %s",
        [LIST_PREFIX + "%"],
    )
    conn.execute(f"{PROBE} VACUUM ANALYZE")
    middle = conn.execute(
        f"{PROBE} SELECT created_at, instance_id FROM {SCHEMA}.instances "
        "WHERE archived_at IS NULL ORDER BY created_at, instance_id OFFSET %s LIMIT 1",
        [list_count // 2],
    ).fetchone()
    return middle, Registry([long])


async def _measure(
    store: Store, conn: psycopg.Connection, middle: tuple[Any, str], registry: Registry
) -> list[Sample]:
    """W2 then W4, as the module says."""
    found = []
    for limit in (1, 16):
        claims.top_up(conn, SCHEMA, CLAIM_DUE)
        await claims._claims(store, limit, 0, CLAIM_WARMUP)

        async def claim(limit: int = limit) -> None:
            await claims._claims(store, limit, 1, 0)

        timed = await histories._timed(conn, f"claim {limit}", CLAIM_SAMPLES, claim)
        found.append(
            Sample(timed.name, timed.calls, timed.median_ms, timed.p99_ms, timed.server_ms)
        )
    long, ended = histories.LONG_INSTANCE, ended_rows.TEMPLATE_ID
    calls: list[tuple[str, int, Callable[[], Awaitable[Any]]]] = [
        ("get_instance (long)", READ_SAMPLES, lambda: reads.get_instance(store, long)),
        (
            "history_page 100 (long)",
            READ_SAMPLES,
            lambda: reads.history_page(store, long, limit=100),
        ),
        (
            "history_page 1,000 (long)",
            READ_SAMPLES,
            lambda: reads.history_page(store, long, limit=1000),
        ),
        ("inspect (long)", INSPECT_SAMPLES, lambda: reads.inspect(store, registry, long)),
        ("get_instance (ended)", READ_SAMPLES, lambda: reads.get_instance(store, ended)),
        (
            "history_page 100 (ended)",
            READ_SAMPLES,
            lambda: reads.history_page(store, ended, limit=100),
        ),
        ("list: first page", READ_SAMPLES, lambda: reads.list_instances(store)),
        (
            "list: status = running",
            READ_SAMPLES,
            lambda: reads.list_instances(store, status=InstanceStatus.RUNNING),
        ),
        (
            "list: definition = bench.w1",
            READ_SAMPLES,
            lambda: reads.list_instances(store, definition_name=W1_DEFINITION),
        ),
        (
            "list: page after 50 %",
            READ_SAMPLES,
            lambda: reads.list_instances(store, after=(middle[0], middle[1])),
        ),
        (
            "list: ended, first page",
            READ_SAMPLES,
            lambda: reads.list_instances(store, view=InstanceView.ARCHIVED),
        ),
    ]
    for name, count, call in calls:
        timed = await histories._timed(conn, name, count, call)
        found.append(Sample(name, timed.calls, timed.median_ms, timed.p99_ms, timed.server_ms))
    return found


SIZES = (
    PROBE
    + """
SELECT c.relname, c.reltuples::bigint, pg_relation_size(c.oid), pg_indexes_size(c.oid),
       COALESCE((SELECT json_object_agg(i.relname, pg_relation_size(i.oid))
                 FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
                 WHERE x.indrelid = c.oid), '{}')
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %s AND c.relname = ANY(%s) ORDER BY array_position(%s, c.relname::text)
"""
)


def sizes(conn: psycopg.Connection, schema: str) -> list[TableSize]:
    """Rows (as ANALYZE counted them), heap and index bytes of the per-instance tables."""
    tables = list(ended_rows.TABLES)
    rows = conn.execute(SIZES, [schema, tables, tables]).fetchall()
    return [
        TableSize(name, max(0, n), heap, index, dict(each)) for name, n, heap, index, each in rows
    ]
