"""W2: how long one claim takes with 10^4, 10^5 and 10^6 due work rows, and its plan.

A claim is ``engine.store.leases.claim`` as the worker calls it (its own transaction,
committed: the lease is durable), timed from the caller. Claims of 1 item (a worker
with one free slot, the steady state) and of 16 (a worker starting up) are measured
separately, 20 warm-ups then ``samples`` claims each. Every claim leases what it
returns, so the backlog shrinks during a level; the table says by how much. Before each
level the backlog is topped up to the level and ``VACUUM ANALYZE`` runs (what
autovacuum would have done on a table this size).

The plan is the one PostgreSQL executed for a real 16-item claim (``bench.plans``), so it
is exactly the engine's statement with the engine's parameters, whatever they are today.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import dataclass, field
from datetime import timedelta

import psycopg

from bench import plans
from bench.app import W1_DEFINITION, definitions
from bench.cluster import PROBE, Cluster
from bench.rows import add_started_instances
from engine.store import catalog, leases
from engine.store.migrations import apply_migrations
from engine.store.rows import WorkState
from engine.store.store import Store

OWNER = "w2-claimer"
LEASE = timedelta(minutes=10)
TARGETS = ["bench.effect", "bench.noop"]
DUE = PROBE + f" SELECT count(*) FROM {{schema}}.work WHERE state = {WorkState.AVAILABLE}"


@dataclass
class ClaimLevel:
    level: int
    generate_seconds: float
    due_before: int
    due_after: int
    latency_ms: dict[int, list[float]] = field(default_factory=dict)
    plan: str = ""

    def median(self, limit: int) -> float:
        return statistics.median(self.latency_ms[limit])

    def p99(self, limit: int) -> float:
        ordered = sorted(self.latency_ms[limit])
        return ordered[min(len(ordered) - 1, round(0.99 * len(ordered) + 0.5) - 1)]


def run(cluster: Cluster, levels: tuple[int, ...], samples: int, warmup: int) -> list[ClaimLevel]:
    schema = "w2"
    with cluster.connect() as conn:
        conn.execute(f"{PROBE} DROP SCHEMA IF EXISTS {schema} CASCADE")
    apply_migrations(cluster.dsn, schema)
    return asyncio.run(_run(cluster, schema, levels, samples, warmup))


async def _run(
    cluster: Cluster, schema: str, levels: tuple[int, ...], samples: int, warmup: int
) -> list[ClaimLevel]:
    store = await Store.open(cluster.dsn, schema, max_size=1)
    results = []
    try:
        for definition in definitions():
            await catalog.publish(store, definition, "bench")
        ref = next(d.ref for d in definitions() if d.name == W1_DEFINITION)
        created = 0
        for level in levels:
            with cluster.connect() as conn:
                due = conn.execute(DUE.format(schema=schema)).fetchone()[0]
                seconds = add_started_instances(
                    conn, schema, "w2-", created, created + level - due, ref, "bench.noop"
                )
                created += level - due
                conn.execute(f"{PROBE} VACUUM ANALYZE {schema}.work")
                result = ClaimLevel(
                    level, seconds, conn.execute(DUE.format(schema=schema)).fetchone()[0], 0
                )
                for limit in (1, 16):
                    result.latency_ms[limit] = await _claims(store, limit, samples, warmup)
                result.plan = await _plan(cluster, schema)
                result.due_after = conn.execute(DUE.format(schema=schema)).fetchone()[0]
            results.append(result)
    finally:
        await store.close()
    return results


async def _claims(store: Store, limit: int, samples: int, warmup: int) -> list[float]:
    timings = []
    for k in range(warmup + samples):
        started = time.perf_counter()
        claimed = await leases.claim(store, OWNER, LEASE, limit, targets=TARGETS)
        elapsed = time.perf_counter() - started
        if len(claimed) != limit:
            raise RuntimeError(f"a claim of {limit} returned {len(claimed)} leases")
        if k >= warmup:
            timings.append(1000 * elapsed)
    return timings


async def _plan(cluster: Cluster, schema: str) -> str:
    """The executed plan of a 16-item claim, as a worker that has run a while sees it."""
    found = await plans.executed_plans(
        cluster.dsn, schema, lambda store: leases.claim(store, OWNER, LEASE, 16, targets=TARGETS)
    )
    return found[-1] if found else "(no plan was reported)"


RESET_LEASES = (
    PROBE + f" UPDATE {{schema}}.work SET state = {WorkState.COMPLETED}, completed_at = now(), "
    f"lease_owner = '', lease_expires_at = NULL WHERE state = {WorkState.LEASED}"
)
"""Leases taken by earlier claims end as completed, so a later series of claims (perhaps
after those leases expired) starts from a backlog of available rows only."""
TOP_UP_PREFIX = "due-"


def top_up(conn: psycopg.Connection, schema: str, due: int) -> int:
    """End earlier leases (``RESET_LEASES``), then start instances until ``due`` work rows
    are available, and ``VACUUM ANALYZE`` work as autovacuum would; how many were added."""
    conn.execute(RESET_LEASES.format(schema=schema))
    available = conn.execute(DUE.format(schema=schema)).fetchone()[0]
    missing = max(0, due - available)
    if missing:
        made = conn.execute(
            f"{PROBE} SELECT count(*) FROM {schema}.instances WHERE instance_id LIKE %s",
            [TOP_UP_PREFIX + "%"],
        ).fetchone()[0]
        ref = next(d.ref for d in definitions() if d.name == W1_DEFINITION)
        add_started_instances(conn, schema, TOP_UP_PREFIX, made, made + missing, ref, "bench.noop")
    conn.execute(f"{PROBE} VACUUM ANALYZE {schema}.work")
    return missing
