"""``wayline demo``: the order-fulfillment saga, end to end, on a real PostgreSQL.

Starts a private PostgreSQL under ``.data/`` (or uses ``--dsn``/``WAYLINE_DSN``),
applies migrations, publishes ``examples/order_fulfillment.json``, runs a worker with
the example activities in this process, starts an order, approves it as an operator,
delivers the ``shipped`` signal, and prints the instance and its history.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import TypeVar

from engine import (
    Action,
    AttemptStatus,
    Client,
    EmbeddedPostgres,
    Instance,
    Queries,
    Store,
    Worker,
    WorkerConfig,
    apply_migrations,
    describe_instance,
    load_definition,
)
from examples.orders import app

T = TypeVar("T")

ROOT = Path(__file__).resolve().parent.parent
DEFINITION = ROOT / "examples" / "order_fulfillment.json"
DATA_DIR = ROOT / ".data" / "pg"
WAIT_SECONDS = 30.0


def run(dsn: str | None, schema: str = "wayline") -> int:
    """Run the demo; on a private cluster when no DSN is given."""
    return serve(dsn, lambda found: _demo(found, schema))


def serve(dsn: str | None, demo: Callable[[str], Awaitable[T]]) -> T:
    """Run ``demo`` on ``dsn``, or on the private cluster under ``.data/`` (started for
    it and stopped after)."""
    if dsn:
        return asyncio.run(demo(dsn))
    server = EmbeddedPostgres(DATA_DIR)
    try:
        return asyncio.run(demo(server.start()))
    finally:
        server.stop()


async def _demo(dsn: str, schema: str) -> int:
    apply_migrations(dsn, schema)
    store = await Store.open(dsn, schema)
    client = Client(store)
    stop = asyncio.Event()
    config = WorkerConfig(
        worker_id=f"demo-{os.getpid()}",
        lease=timedelta(seconds=10),
        renew_every=timedelta(seconds=3),
        poll_interval=timedelta(milliseconds=200),
    )
    worker = asyncio.create_task(Worker(store, app, config).run(stop))
    try:
        await _walkthrough(client)
    finally:
        stop.set()
        await worker
        await store.close()
    return 0


async def _walkthrough(client: Client) -> None:
    definition = load_definition(DEFINITION)
    await client.publish(definition, "demo")
    order = f"order-{uuid.uuid4().hex[:8]}"
    await client.start(definition.name, order, {"order": order, "amount": 42})
    print(f"started {order} on {definition.ref}")
    await until(client, order, _checks_done)
    await client.command(
        order,
        Action.APPROVE,
        "demo-manager",
        "amount within limits",
        step="manager_approval",
        payload={"approved": True},
    )
    print("approved by demo-manager")
    await client.signal(order, "shipped", f"{order}-shipped", {"carrier": "demo-post"})
    print("signal shipped delivered")
    state = await until(client, order, lambda s: s.status.terminal)
    print()
    print(describe_instance(state))
    print()
    async for event in Queries(client.store).history(order):
        print(f"{event.sequence:>4} {event.kind.label:<28} {event.step}")


def _checks_done(state: Instance) -> bool:
    checks = [state.activities.get(step) for step in ("fraud_check", "inventory_check")]
    return all(p is not None and p.status is AttemptStatus.SUCCEEDED for p in checks)


async def until(client: Client, instance: str, done: Callable[[Instance], bool]) -> Instance:
    """The instance once ``done`` (or ended), read from the store every 0.1 s."""
    deadline = asyncio.get_running_loop().time() + WAIT_SECONDS
    while True:
        client.cache.forget(instance)
        state = await client.inspect(instance)
        if done(state) or state.status.terminal:
            return state
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(f"{instance} did not progress within {WAIT_SECONDS} s")
        await asyncio.sleep(0.1)
