"""A worker running a state machine's advance, in process: the lease stays renewed while
an advance runs inside its transaction, so a slow advance commits once."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import datetime, timedelta

from engine import ActivityRegistry, MachineCall, Worker, WorkerConfig
from engine.model.instance import InstanceStatus
from examples import documents as approval
from tests.e2e.conftest import Harness

LEASE = timedelta(seconds=1)
EXPIRY = "SELECT lease_expires_at FROM work WHERE instance_id = %(id)s AND state = 2"


async def test_an_advance_longer_than_the_lease_keeps_it_and_commits_once(e2e: Harness) -> None:
    holding, release, calls = asyncio.Event(), asyncio.Event(), []

    async def slow(call: MachineCall) -> approval.Approval:
        calls.append(call.attempt)
        holding.set()
        await release.wait()  # released once the worker has renewed the lease
        return await approval.advance(call)

    app = ActivityRegistry()
    app.machine(replace(approval.flow, advance_function=slow))
    config = WorkerConfig(
        worker_id="machines",
        lease=LEASE,
        renew_every=timedelta(milliseconds=200),
        poll_interval=timedelta(milliseconds=100),
    )
    async with e2e.store.connection() as conn:
        await approval.set_up(conn)
        await conn.execute("INSERT INTO documents (id) VALUES ('doc-1')")
        await conn.commit()
    stop = asyncio.Event()
    running = asyncio.create_task(Worker(e2e.store, app, config).run(stop))
    try:
        start = {"input": "v1", "parent": "doc-1"}
        await e2e.start(approval.flow.definition, "slow-1", start)
        await holding.wait()
        [(claimed,)] = await e2e.query(EXPIRY, {"id": "slow-1"})
        await e2e.until(lambda: _renewed(e2e, "slow-1", claimed), what="a renewal")
        release.set()
        state = await e2e.until(lambda: _in_review(e2e, "slow-1"), what="InReview")
    finally:
        stop.set()
        await running

    assert calls == [1], "the advance ran once"
    assert state.machine.transitions == 1
    assert await e2e.query("SELECT status FROM documents") == [("in-review",)]


async def _renewed(e2e: Harness, instance: str, claimed: datetime) -> bool:
    """The lease now ends a whole lease after it first did: renewed while held."""
    [(expires,)] = await e2e.query(EXPIRY, {"id": instance})
    return expires >= claimed + LEASE


async def _in_review(e2e: Harness, instance: str):
    state = await e2e.state(instance)
    running = state.status is InstanceStatus.RUNNING and state.machine is not None
    return state if running and state.machine.state == "InReview" else None
