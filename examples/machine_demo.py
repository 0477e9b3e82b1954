"""``wayline demo --machine``: the document-approval state machine, end to end.

Like the saga's demo (``examples/demo.py``): a private PostgreSQL under ``.data/`` (or
``--dsn``), migrations, the manifest ``examples/document_approval.json`` published, and
a worker with the machine's code (``examples/documents.py``) in this process. It submits
an approval of a new document, lets the review's 60 s timer pass once with no decision
(a reminder), records the reviewer's approval, lets the timer pass again and prints the
execution's status, state and history.

The store runs on a manual clock that the demo moves forward, so the two minutes of
timers pass at once: every lease, claim and timer reads that clock, as the tests do.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

from engine import Client, Executions, Queries, Store, Worker, WorkerConfig, apply_migrations
from engine.store.clock import ManualClock
from examples import documents
from examples.demo import serve, until

TIMER = timedelta(seconds=60)
POLL = timedelta(milliseconds=100)
SCOPE = "operator"
"""The role the demo submits with: the one that starts instances."""


def run(
    dsn: str | None, schema: str = "wayline", actor: str = "demo", team: str = ""
) -> tuple[str, str]:
    """Run the demo on ``dsn``, or on a private cluster when none is given; the
    execution's id and its status at the end (``completed`` unless something refused
    it). It submits as ``actor`` of ``team``: by default the engine's own team, whose
    principal always stands; a studio user and their team (an operator there) make it
    visible in the studio. Each advance re-checks that user, so one who is not a
    member whose role covers the submit is refused (AccessRefused) before anything is
    published or submitted, as ``wayline machine submit`` refuses them."""
    owner = {"actor": actor, "team": team}
    return serve(dsn, lambda found: _demo(found, schema, owner))


async def _demo(dsn: str, schema: str, owner: dict[str, str]) -> tuple[str, str]:
    apply_migrations(dsn, schema)
    clock = ManualClock(datetime.now(UTC))
    store = await Store.open(dsn, schema, clock=clock)
    try:
        executions = Executions(Client(store))
        # as `wayline machine submit` does, before anything is written or run
        await executions.require_standing(owner["actor"], owner["team"], SCOPE)
        config = WorkerConfig(worker_id=f"demo-{uuid.uuid4().hex[:6]}", poll_interval=POLL)
        stop = asyncio.Event()
        worker = asyncio.create_task(Worker(store, documents.app, config).run(stop))
        try:
            return await _walkthrough(executions, store, clock, owner)
        finally:
            stop.set()
            await worker
    finally:
        await store.close()


async def _walkthrough(
    executions: Executions, store: Store, clock: ManualClock, owner: dict[str, str]
) -> tuple[str, str]:
    await executions.client.publish(documents.flow.definition, owner["actor"], owner["team"])
    parent = f"doc-{uuid.uuid4().hex[:6]}"
    async with store.connection() as conn:
        await documents.set_up(conn)
        await conn.execute("INSERT INTO documents (id) VALUES (%s)", [parent])
        await conn.commit()
    key = f"review-{parent}"
    submitted = await executions.submit(
        "document_approval", parent=parent, input="v1", key=key, scope=SCOPE, **owner
    )
    execution = submitted.execution_id
    print(f"submitted {execution} for {parent}")
    await until(executions.client, execution, lambda s: s.machine and s.machine.transitions == 1)
    print(f"in review: {await executions.state(execution, **owner, family=documents.flow)}")
    clock.advance(TIMER)
    print("60 s later, no decision yet: a reminder")
    await until(executions.client, execution, lambda s: s.machine and s.machine.transitions == 2)
    async with store.connection() as conn:
        decide = "UPDATE documents SET decision = 'approved', decided_by = 'ann' WHERE id = %s"
        await conn.execute(decide, [parent])
        await conn.commit()
    print("ann approves the document")
    clock.advance(TIMER)
    await until(executions.client, execution, lambda s: s.status.terminal)
    status = await executions.status(execution, **owner)
    print(f"status {status}")
    print(f"state {await executions.state(execution, **owner, family=documents.flow)}")
    print()
    async for event in Queries(store).history(execution):
        print(f"{event.sequence:>4} {event.kind.label:<26} {event.step}")
    return execution, status
