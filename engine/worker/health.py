"""Readiness for orchestrators: whether a process can do its work right now.

``/healthz`` only says the process answers; ``/readyz`` asks ``readiness``, which says
why not in a few words (never a driver's text, which may name hosts or users): the
database does not answer within ``READY_TIMEOUT``, or its schema lacks migrations this
build needs, or (a worker) the owner lock that makes its leases safe is not held, so it
claims nothing (``engine.worker.loop``).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import psycopg

from engine.store.errors import StoreError
from engine.store.migrations import MigrationError, check_schema_current_async
from engine.store.store import Store
from engine.store.sweeps import OWNER_LOCK_WAIT

if TYPE_CHECKING:
    from engine.worker.loop import Worker

READY_TIMEOUT = 2.0
"""Seconds a readiness check waits for the database before it answers not ready."""


async def readiness(store: Store) -> str:
    """'' when the database answers and its schema is current, else why not."""
    try:
        async with asyncio.timeout(READY_TIMEOUT), store.reading() as conn:
            await check_schema_current_async(conn, store.schema)
    except MigrationError:
        return "the schema is not current: run `wayline migrate`"
    except (StoreError, psycopg.Error, OSError, TimeoutError):
        return "the database is not reachable"
    return ""


async def worker_readiness(worker: Worker) -> str:
    """``readiness`` of the worker's store, and its owner lock held. The database is
    asked first: while it is down the lock is lost too, and the lock's reason would send
    an operator after another worker (or the lock) instead of the database."""
    if why := await readiness(worker.store):
        return why
    if not worker.owner_locked.is_set():
        return worker.shared_id or NOT_LOCKED
    return ""


NOT_LOCKED = (
    "the worker's owner lock is not held: it claims no work until it takes it (when another "
    f"live worker uses this --worker-id, this says so within {OWNER_LOCK_WAIT.seconds} s)"
)
"""Why a worker is not ready while it takes its lock (at its start, after reconnecting,
and for ``OWNER_LOCK_WAIT`` before it concludes that another worker holds it)."""
