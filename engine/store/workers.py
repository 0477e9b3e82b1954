"""The worker registry: who is running, what targets it can run, when it last spoke.

Workers upsert their row on start and on every heartbeat; the studio lists them and
offers their targets when authoring. A row is information, not a lease: correctness
never depends on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import psycopg

from engine.store.statements import workers as sql
from engine.store.store import Store
from engine.store.transactions import transact


@dataclass(frozen=True)
class WorkerInfo:
    worker_id: str
    targets: tuple[str, ...]
    started_at: datetime
    heartbeat_at: datetime
    concurrency: int
    hostname: str
    pid: int
    stopped_at: datetime | None = None
    """When it stopped cleanly (None while it runs, and when it died without stopping)."""


async def heartbeat(
    store: Store, worker_id: str, targets: list[str], concurrency: int, hostname: str, pid: int
) -> None:
    """Record that ``worker_id`` is alive now (by the store's clock)."""
    params = {
        "worker": worker_id,
        "targets": targets,
        "concurrency": concurrency,
        "hostname": hostname,
        "pid": pid,
        "now": store.clock.sql_now(),
    }

    async def body(conn: psycopg.AsyncConnection) -> None:
        await conn.execute(sql.HEARTBEAT, params)

    await transact(store, f"heartbeat of {worker_id}", body)


async def stopped(store: Store, worker_id: str, pid: int) -> None:
    """Record that ``worker_id`` (process ``pid``) stopped cleanly: its targets are no
    longer anyone's, so the instances whose work needs them say so at once."""
    params = {"worker": worker_id, "pid": pid, "now": store.clock.sql_now()}

    async def body(conn: psycopg.AsyncConnection) -> None:
        await conn.execute(sql.STOPPED, params)

    await transact(store, f"stop of {worker_id}", body)


async def list_workers(store: Store, limit: int = 100) -> list[WorkerInfo]:
    async with store.connection() as conn:
        rows = await (await conn.execute(sql.LIST_WORKERS, {"limit": limit})).fetchall()
    return [WorkerInfo(r[0], tuple(r[1]), *r[2:]) for r in rows]


RUNNING_WITHIN = timedelta(seconds=30)
"""A worker that sent a heartbeat within this long (it beats every 5 s) and has not
stopped counts as running its targets, as the studio's Workers page shows it live: a
worker that died goes unseen for at most this long, one that stopped not at all."""


async def running_targets(store: Store) -> list[str]:
    """The targets running workers run: what an instance's open work needs one of
    (``engine.store.work_views.unserved``)."""
    return await advertised_targets(store, store.now() - RUNNING_WITHIN)


async def advertised_targets(store: Store, since: datetime) -> list[str]:
    """Targets advertised by workers that spoke after ``since`` and have not stopped."""
    async with store.connection() as conn:
        rows = await (await conn.execute(sql.KNOWN_TARGETS, {"since": since})).fetchall()
    return [r[0] for r in rows]
