"""W3 (replay cost) and W4 (the reads behind the studio's pages) on long histories.

The long instance is built by the engine's own pure core, exactly as workers would have
built it: a definition of ``steps`` activities, each scheduled, started and succeeded in
its own transitions (3 events per step, plus start and completion: 10,001 events for
3,333 steps). Its transitions are committed through ``Store.commit_all``, 100 per
PostgreSQL transaction.

W3 times the pure fold (``engine.replay.fold``) per 1,000 events, at the start of the history
and at its end (where the state already holds thousands of steps, so any per-event cost
that grows with the state shows), a cold load through ``InstanceCache`` (history pages
from the store plus the fold), and the incremental case: one new event applied to a
cached instance, in memory and through the cache (one history page read).

W4: the studio does not exist yet, so we time the store calls it will make, from the
caller (median and p99) and on the server (statement execution time per call from
``pg_stat_statements``, round trips not included): the instance page is
``reads.get_instance`` + the first ``reads.history_page`` (100 and 1,000 events) and,
if it shows the replayed state, ``reads.inspect``; the instance list is
``reads.list_instances`` with 10^5 instances in the schema, unfiltered, filtered, and a
page deep in the keyset.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from bench import plans
from bench.app import W1_DEFINITION, definitions
from bench.cluster import PROBE, Cluster
from bench.rows import add_started_instances
from engine.decide import decisions, lifecycle
from engine.model.definitions import Definition
from engine.model.events import Event, EventKind
from engine.model.instance import InstanceStatus
from engine.model.registry import Registry
from engine.model.transitions import Draft, Transition
from engine.model.validation import parse_definition
from engine.modes import decide
from engine.replay.fold import apply, replay
from engine.store import catalog, reads
from engine.store.migrations import apply_migrations
from engine.store.store import Store
from engine.worker.instance_cache import InstanceCache, RegistrySource

SCHEMA = "w4"
LONG_INSTANCE = "long-1"
COMMIT_CHUNK = 100
STATEMENT_TIME = (
    PROBE + " SELECT COALESCE(sum(total_exec_time), 0), COALESCE(sum(calls), 0) "
    "FROM pg_stat_statements WHERE query NOT LIKE %s"
)


@dataclass
class Timing:
    """Per call: caller-side median and p99 (ms), server execution (ms), statements."""

    name: str
    calls: int
    median_ms: float
    p99_ms: float
    server_ms: float
    statements: float


W3_EVENTS = (10**2, 10**3, 10**4, 10**5)
"""History lengths W3 opens cold. Each instance has at most this many events: a
definition has at most 10,000 steps, so every step here fails ``W3_ATTEMPTS - 1``
times before it succeeds (12 events a step, one shape at every length)."""
W3_ATTEMPTS = 4
W3_EVENTS_PER_STEP = 3 * W3_ATTEMPTS


@dataclass
class ScaleRow:
    """Opening one instance of ``events`` events cold (median ms), and what it read."""

    events: int
    snapshot_at: int
    """Where its newest snapshot is (0: none), so ``events - snapshot_at`` were folded."""
    cold_load_ms: float
    """``InstanceCache.load`` on an empty cache (its registry already loaded): what a
    worker pays for an instance it has not seen since it started."""
    inspect_ms: float
    """``reads.inspect``: what ``wayline inspect`` and the client pay."""
    inspect_without_snapshot_ms: float
    """``reads.inspect`` once the snapshot is deleted: the whole history, read and folded."""
    inspect_cpu_ms: float
    """This process's CPU time of ``inspect_ms`` (decoding, folding, reading rows): what a
    busy shared machine blurs least."""
    inspect_without_snapshot_cpu_ms: float
    full_fold_ms: float
    """The pure fold of every event (no I/O)."""


@dataclass
class HistoryResults:
    events: int
    steps: int
    build_seconds: float
    commit_seconds: float
    replay_first_1000_ms: float
    replay_last_1000_ms: float
    replay_all_ms: float
    cold_load_ms: float
    apply_one_us: float
    cached_load_ms: float
    instance_page: list[Timing]
    list_instances: int
    list_generate_seconds: float
    instance_list: list[Timing]
    plans: dict[str, list[str]]
    scaling: list[ScaleRow] = field(default_factory=list)
    """W3 by history length (``W3_EVENTS``); empty in results saved before it existed."""


def long_definition(steps: int, version: str = "1", attempts: int = 3) -> Definition:
    step = {
        "kind": "activity",
        "target": "bench.noop",
        "timeout": "30s",
        "input_limit": 1024,
        "result_limit": 1024,
        "retry": {"max_attempts": attempts, "initial_delay": "1s", "max_delay": "1m"},
    }
    return parse_definition(
        {
            "name": "bench.long",
            "version": version,
            "mode": "orchestration",
            "steps": [{"name": f"s{k}", **step} for k in range(steps)],
        }
    )


def build_history(
    definition: Definition,
    registry: Registry,
    instance_id: str = LONG_INSTANCE,
    *,
    now: datetime | None = None,
    input: Any = None,
    run_last: bool = True,
) -> list[Transition]:
    """The transitions a worker would commit for one instance that runs every step, a
    millisecond apart from ``now`` (default: a day ago); without ``run_last``, it stops
    with its last step scheduled (its work due), as the snapshot tests need."""
    now = now or datetime.now(UTC) - timedelta(days=1)
    draft = lifecycle.start_draft(registry, definition, instance_id, now, input)
    decide(draft)
    transitions = [draft.build("start")]
    state = draft.state
    for step in definition.steps if run_last else definition.steps[:-1]:
        now += timedelta(milliseconds=1)
        draft = Draft(registry, state, now)
        key = decisions.attempt_key(instance_id, step.name, 1)
        decisions.start_activity_attempt(draft, step.name, 1, key)
        transitions.append(draft.build())
        now += timedelta(milliseconds=1)
        draft = Draft(registry, draft.state, now)
        decisions.record_outcome(draft, step.name, 1, EventKind.ATTEMPT_SUCCEEDED)
        decide(draft)
        transitions.append(draft.build())
        state = draft.state
    assert state is not None and (state.status is InstanceStatus.COMPLETED or not run_last)
    return transitions


def retried_history(
    definition: Definition, registry: Registry, instance_id: str, attempts: int
) -> list[Transition]:
    """Like ``build_history``, but each step fails ``attempts - 1`` times (retryable)
    before it succeeds, each retry started when its backoff says."""
    now = datetime.now(UTC) - timedelta(days=1)
    draft = lifecycle.start_draft(registry, definition, instance_id, now)
    decide(draft)
    transitions = [draft.build("start")]
    for step in definition.steps:
        for attempt in range(1, attempts + 1):
            progress = draft.state.activities[step.name]
            now = max(now + timedelta(milliseconds=1), progress.retry_at or now)
            key = progress.next_key or decisions.attempt_key(instance_id, step.name, attempt)
            draft = Draft(registry, draft.state, now)
            decisions.start_activity_attempt(draft, step.name, attempt, key)
            transitions.append(draft.build())
            draft = Draft(registry, draft.state, now)
            if attempt == attempts:
                decisions.record_outcome(draft, step.name, attempt, EventKind.ATTEMPT_SUCCEEDED)
            else:
                failed = EventKind.ATTEMPT_FAILED
                decisions.record_outcome(
                    draft, step.name, attempt, failed, code="bench-failure", retryable=True
                )
            decide(draft)
            transitions.append(draft.build())
    assert draft.state.status is InstanceStatus.COMPLETED
    return transitions


def _median_seconds(action: Callable[[], object], repeat: int) -> float:
    timings = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        timings.append(time.perf_counter() - started)
    return statistics.median(timings)


def run(cluster: Cluster, steps: int, list_instances: int, samples: int) -> HistoryResults:
    with cluster.connect() as conn:
        conn.execute(f"{PROBE} DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
    apply_migrations(cluster.dsn, SCHEMA)
    results = asyncio.run(_run(cluster, steps, list_instances, samples))
    longest = 10 * (3 * steps + 2)  # the quick run stops at 10^4
    results.scaling = scaling(cluster.dsn, tuple(e for e in W3_EVENTS if e <= longest))
    return results


def scaling(dsn: str, sizes: tuple[int, ...], schema: str = "w3") -> list[ScaleRow]:
    """W3 at each history length of ``sizes``, in a fresh ``schema`` on ``dsn``."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"{PROBE} DROP SCHEMA IF EXISTS {schema} CASCADE")
    apply_migrations(dsn, schema)
    return asyncio.run(_scaling(dsn, sizes, schema))


async def _scaling(dsn: str, sizes: tuple[int, ...], schema: str) -> list[ScaleRow]:
    rows = []
    store = await Store.open(dsn, schema)
    try:
        for events in sizes:
            steps = (events - 2) // W3_EVENTS_PER_STEP
            definition = long_definition(steps, version=str(steps), attempts=W3_ATTEMPTS)
            registry = Registry([definition])
            await catalog.publish(store, definition, "bench")
            instance = f"long-{events}"
            transitions = retried_history(definition, registry, instance, W3_ATTEMPTS)
            for k in range(0, len(transitions), COMMIT_CHUNK):
                await store.commit_all(transitions[k : k + COMMIT_CHUNK])
            history = [e for t in transitions for e in t.events]
            loaded = await reads.load(store, registry, instance)

            async def cold(instance: str = instance, registry: Registry = registry) -> None:
                await InstanceCache(store, RegistrySource(store, registry)).load(instance)

            async def inspect(instance: str = instance, registry: Registry = registry) -> None:
                await reads.inspect(store, registry, instance)

            cold_ms, _ = await _median_ms(cold, SCALE_SAMPLES)
            inspect_ms, inspect_cpu = await _median_ms(inspect, SCALE_SAMPLES)
            async with store.connection() as conn:
                await conn.execute(DROP_SNAPSHOT, {"instance": instance})
                await conn.commit()
            whole_ms, whole_cpu = await _median_ms(inspect, SCALE_SAMPLES)
            rows.append(
                ScaleRow(
                    len(history),
                    loaded.snapshot_sequence,
                    cold_ms,
                    inspect_ms,
                    whole_ms,
                    inspect_cpu,
                    whole_cpu,
                    1000 * _median_seconds(lambda h=history, r=registry: replay(r, h), 1),
                )
            )
    finally:
        await store.close()
    return rows


SCALE_SAMPLES = 5
DROP_SNAPSHOT = "DELETE FROM snapshots WHERE instance_id = %(instance)s"


async def _median_ms(call: Callable[[], Awaitable[Any]], calls: int) -> tuple[float, float]:
    """Median wall time and median CPU time of this process per call, in ms."""
    await call()  # warm-up: the pool's connections, the registry
    wall, cpu = [], []
    for _ in range(calls):
        started, used = time.perf_counter(), time.process_time()
        await call()
        wall.append(1000 * (time.perf_counter() - started))
        cpu.append(1000 * (time.process_time() - used))
    return statistics.median(wall), statistics.median(cpu)


async def _run(cluster: Cluster, steps: int, list_count: int, samples: int) -> HistoryResults:
    definition = long_definition(steps)
    registry = Registry([definition])
    started = time.perf_counter()
    transitions = build_history(definition, registry)
    build_seconds = time.perf_counter() - started
    events: list[Event] = [e for t in transitions for e in t.events]

    # W3, pure: the fold per 1,000 events, early and late in the history.
    replay_first = _median_seconds(lambda: replay(registry, events[:1000]), 10)
    before_last = replay(registry, events[:-1000])
    last = events[-1000:]

    def fold_last() -> None:
        state = before_last
        for event in last:
            state = apply(registry, state, event)

    replay_last = _median_seconds(fold_last, 10)
    replay_all = _median_seconds(lambda: replay(registry, events), 3)
    penultimate = replay(registry, events[:-2])
    apply_one = _median_seconds(lambda: apply(registry, penultimate, events[-2]), 1000)

    store = await Store.open(cluster.dsn, SCHEMA)
    probe = psycopg.connect(cluster.dsn, autocommit=True)
    try:
        for published in [*definitions(), definition]:
            await catalog.publish(store, published, "bench")
        started = time.perf_counter()
        for k in range(0, len(transitions), COMMIT_CHUNK):
            await store.commit_all(transitions[k : k + COMMIT_CHUNK])
        commit_seconds = time.perf_counter() - started

        # W3, through the store: cold load, and one new event onto a cached instance.
        async def cold() -> None:
            await InstanceCache(store, RegistrySource(store)).load(LONG_INSTANCE)

        cold_load = await _timed(probe, "cold load", 5, cold)
        cache = InstanceCache(store, RegistrySource(store))
        one_behind = replay(registry, events[:-1])

        async def one_new_event() -> None:
            cache.forget(LONG_INSTANCE)
            cache.put(one_behind)
            await cache.load(LONG_INSTANCE)

        cached_load = await _timed(probe, "cached load", samples, one_new_event)

        # W4: the instance page.
        page = [
            await _timed(
                probe, "get_instance", samples, lambda: reads.get_instance(store, LONG_INSTANCE)
            ),
            await _timed(
                probe,
                "history_page (100 events)",
                samples,
                lambda: reads.history_page(store, LONG_INSTANCE, limit=100),
            ),
            await _timed(
                probe,
                "history_page (1,000 events)",
                samples,
                lambda: reads.history_page(store, LONG_INSTANCE, limit=1000),
            ),
            await _timed(
                probe,
                "inspect (replays all events)",
                5,
                lambda: reads.inspect(store, registry, LONG_INSTANCE),
            ),
        ]

        # W4: the instance list at list_count instances.
        ref = next(d.ref for d in definitions() if d.name == W1_DEFINITION)
        generate = add_started_instances(
            probe, SCHEMA, "list-", 0, list_count - 1, ref, "bench.noop"
        )
        probe.execute(f"{PROBE} VACUUM ANALYZE {SCHEMA}.instances")
        middle = probe.execute(
            f"{PROBE} SELECT created_at, instance_id FROM {SCHEMA}.instances "
            "ORDER BY created_at, instance_id OFFSET %s LIMIT 1",
            [list_count // 2],
        ).fetchone()
        listing = [
            await _timed(probe, "first page", samples, lambda: reads.list_instances(store)),
            await _timed(
                probe,
                "status = running",
                samples,
                lambda: reads.list_instances(store, status=InstanceStatus.RUNNING),
            ),
            await _timed(
                probe,
                "definition = bench.w1",
                samples,
                lambda: reads.list_instances(store, definition_name=W1_DEFINITION),
            ),
            await _timed(
                probe,
                "page after 50 %",
                samples,
                lambda: reads.list_instances(store, after=(middle[0], middle[1])),
            ),
        ]
        executed = {
            "history_page (100 events)": await plans.executed_plans(
                cluster.dsn, SCHEMA, lambda s: reads.history_page(s, LONG_INSTANCE, limit=100)
            ),
            "list_instances, status = running": await plans.executed_plans(
                cluster.dsn,
                SCHEMA,
                lambda s: reads.list_instances(s, status=InstanceStatus.RUNNING),
            ),
        }
    finally:
        probe.close()
        await store.close()
    return HistoryResults(
        events=len(events),
        steps=steps,
        build_seconds=build_seconds,
        commit_seconds=commit_seconds,
        replay_first_1000_ms=1000 * replay_first,
        replay_last_1000_ms=1000 * replay_last,
        replay_all_ms=1000 * replay_all,
        cold_load_ms=cold_load.median_ms,
        apply_one_us=1e6 * apply_one,
        cached_load_ms=cached_load.median_ms,
        instance_page=page,
        list_instances=list_count,
        list_generate_seconds=generate,
        instance_list=listing,
        plans=executed,
    )


async def _timed(
    probe: psycopg.Connection,
    name: str,
    calls: int,
    call: Callable[[], Awaitable[Any]],
) -> Timing:
    """Time ``calls`` calls after 3 warm-ups; server time from pg_stat_statements."""
    for _ in range(3):
        await call()
    probe.execute(f"{PROBE} SELECT pg_stat_statements_reset()")
    timings = []
    for _ in range(calls):
        started = time.perf_counter()
        await call()
        timings.append(1000 * (time.perf_counter() - started))
    server, statements = probe.execute(STATEMENT_TIME, ["%bench-probe%"]).fetchone()
    ordered = sorted(timings)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * len(ordered) + 0.5) - 1)]
    return Timing(
        name,
        calls,
        statistics.median(timings),
        p99,
        float(server) / calls,
        float(statements) / calls,
    )
