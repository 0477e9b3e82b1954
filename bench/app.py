"""The benchmark's Wayline definitions and activities (``wayline worker --app bench.app:app``).

W1 is three no-op activities in sequence. The recovery workload is the same shape, but
each activity records its execution as one row in a side table, committed before the
handler returns, so lost and repeated executions can be counted after a SIGKILL.

Handlers are plain ``def`` functions, as in the README and as DBOS steps are written, so
both engines run user code the way their users normally would (Wayline runs sync
handlers in a thread).

Every activity declares ``on_unknown: retry_same_key`` with a short first retry delay:
an execution cut off by a SIGKILL is then re-run with its idempotency key (and counted
as such) instead of waiting for an operator, so the instance can complete.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from psycopg_pool import ConnectionPool

from engine.model.definitions import Definition
from engine.model.validation import parse_definition
from engine.worker.activities import ActivityRegistry, ActivityRequest

W1_DEFINITION = "bench.w1"
RECOVERY_DEFINITION = "bench.recovery"
EFFECTS_DSN_ENV = "BENCH_EFFECTS_DSN"
EFFECTS_TABLE_ENV = "BENCH_EFFECTS_TABLE"
STEPS = ("one", "two", "three")

app = ActivityRegistry()
_pool: ConnectionPool | None = None
_pool_lock = threading.Lock()


def definition(name: str, target: str) -> Definition:
    """Three activity steps on ``target``; retries fast after an unknown outcome."""
    step = {
        "kind": "activity",
        "target": target,
        "timeout": "30s",
        "input_limit": 1024,
        "result_limit": 1024,
        "retry": {"max_attempts": 5, "initial_delay": "10ms", "max_delay": "1s"},
        "on_unknown": "retry_same_key",
    }
    return parse_definition(
        {
            "name": name,
            "version": "1",
            "mode": "orchestration",
            "steps": [{"name": s, **step} for s in STEPS],
        }
    )


def definitions() -> list[Definition]:
    return [
        definition(W1_DEFINITION, "bench.noop"),
        definition(RECOVERY_DEFINITION, "bench.effect"),
    ]


@app.activity("bench.noop")
def noop(request: ActivityRequest) -> Any:
    """Does nothing: W1 measures the engine, not the activity."""
    return None


@app.activity("bench.effect")
def effect(request: ActivityRequest) -> Any:
    """Insert one row per execution (autocommit: durable before the handler returns)."""
    table = os.environ[EFFECTS_TABLE_ENV]
    with _effects_pool().connection() as conn:
        conn.execute(
            f"INSERT INTO {table} (instance, step, key, attempt, pid) VALUES (%s, %s, %s, %s, %s)",
            [
                request.instance_id,
                request.step,
                request.idempotency_key,
                request.attempt,
                os.getpid(),
            ],
        )
    return None


def _effects_pool() -> ConnectionPool:
    """One small pool per worker process, made on first use (handlers run in threads)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ConnectionPool(
                os.environ[EFFECTS_DSN_ENV],
                min_size=1,
                max_size=8,
                kwargs={"autocommit": True},
                open=True,
            )
        return _pool
