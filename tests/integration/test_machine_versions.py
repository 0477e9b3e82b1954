"""Two versions of one state machine on one store: an execution runs only the code of
the version it is pinned to, and a migration moves its work to the new version's
workers, also when an old worker holds the work's lease across the migration."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from engine import ActivityRegistry, MachineCall
from engine.decide import lifecycle
from engine.decide.migrations import record_migration
from engine.decide.operator_actions import Action
from engine.decide.operator_commands import record_command
from engine.model.registry import MigrationEdge, Registry
from engine.model.transitions import Draft
from engine.model.validation import parse_definition
from engine.modes import decide, follow
from engine.modes.machines.declaration import Machine
from engine.store import leases, reads
from engine.store.clock import ManualClock
from engine.store.store import Store
from engine.worker.instance_cache import RegistrySource
from engine.worker.leased_commits import Context, LeaseHolder
from engine.worker.loop import process
from examples import documents as approval

T0 = datetime(2031, 6, 7, 8, 0, tzinfo=UTC)
LEASE = timedelta(seconds=30)
TIMER = timedelta(seconds=60)

v2 = Machine(parse_definition({**approval.flow.document, "version": "2"}), approval.Approval)
"""Version 1's manifest as version 2, with its own code (below): the same function name."""


@v2.advance
async def advance_v2(call: MachineCall) -> approval.Approval:
    """Version 2 marks the document as its own, then expires a review at its timer."""
    marked = "UPDATE documents SET status = %s WHERE id = %s"
    if isinstance(call.state, approval.Submitted):
        await call.execute(marked, ["in-review-v2", call.parent])
        return approval.InReview(0)
    await call.execute(marked, ["expired-v2", call.parent])
    return approval.Expired()


@v2.compensate
async def compensate_v2(call: MachineCall) -> str:
    return "kept"


V1_APP = approval.app
V2_APP = ActivityRegistry()
V2_APP.machine(v2)
REGISTRY = Registry(
    [approval.flow.definition, v2.definition],
    [MigrationEdge("document_approval", "1", "2", lambda value: value)],
)


@pytest.fixture
async def documents(aconn: psycopg.AsyncConnection) -> psycopg.AsyncConnection:
    await approval.set_up(aconn)
    return aconn


def worker(store: Store, app: ActivityRegistry) -> Context:
    return Context(store, app, RegistrySource(store, REGISTRY))


async def claim(ctx: Context) -> list[leases.Lease]:
    """What a worker with ``ctx``'s app claims: the work that names its targets."""
    return await leases.claim(ctx.store, "worker", LEASE, 10, targets=ctx.activities.targets)


async def run_due(ctx: Context) -> int:
    """Claim and process what ``ctx``'s worker can run, until nothing is left."""
    processed = 0
    while claimed := await claim(ctx):
        for lease in claimed:
            await process(ctx, LeaseHolder(lease, LEASE))
        processed += len(claimed)
    return processed


async def submitted(store: Store, aconn: psycopg.AsyncConnection, parent: str, flow) -> str:
    await aconn.execute("INSERT INTO documents (id) VALUES (%s)", [parent])
    execution = f"document_approval/{parent}"
    start = {"input": "v1", "parent": parent}
    draft = lifecycle.start_draft(REGISTRY, flow.definition, execution, store.now(), start)
    decide(draft)
    await store.commit(draft.build("start"))
    return execution


async def status(aconn: psycopg.AsyncConnection, parent: str) -> str:
    query = "SELECT status FROM documents WHERE id = %s"
    return (await (await aconn.execute(query, [parent])).fetchone())[0]


async def targets(aconn: psycopg.AsyncConnection, execution: str) -> list[tuple[str, int]]:
    """The targets and states of the execution's work rows, oldest first."""
    query = "SELECT target, state FROM work WHERE instance_id = %s ORDER BY sequence"
    return await (await aconn.execute(query, [execution])).fetchall()


async def command(store: Store, execution: str, label: str, build: Callable[[Draft], None]):
    draft = Draft(REGISTRY, await reads.inspect(store, REGISTRY, execution), store.now())
    build(draft)
    follow(draft)
    await store.commit(draft.build(label))


async def migrate_to_v2(store: Store, execution: str) -> None:
    """Pause, migrate and resume, each its own commit, as ``Client.migrate`` does."""
    why = "v2 expires reviews"
    await command(store, execution, "p", lambda d: record_command(d, "p", Action.PAUSE, "ann", why))
    await command(
        store, execution, "m", lambda d: record_migration(d, "m", v2.definition, "ann", why)
    )
    await command(
        store, execution, "r", lambda d: record_command(d, "r", Action.RESUME, "ann", why)
    )


async def test_a_worker_runs_only_the_executions_pinned_to_a_version_it_has(
    store: Store, documents: psycopg.AsyncConnection
) -> None:
    old = await submitted(store, documents, "doc-1", approval.flow)
    new = await submitted(store, documents, "doc-2", v2)
    assert await run_due(worker(store, V1_APP)) == 1, "version 1's worker leaves version 2's work"
    assert await status(documents, "doc-1") == "in-review"
    assert await status(documents, "doc-2") == "draft", "version 1's code never ran it"
    assert await run_due(worker(store, V2_APP)) == 1
    assert await status(documents, "doc-2") == "in-review-v2"
    assert (await reads.inspect(store, REGISTRY, new)).machine.state == "InReview"
    assert [t for t, _ in await targets(documents, old)] == ["machine:document_approval@1"] * 2


async def test_a_migrated_execution_is_advanced_by_the_new_version_s_workers(
    store: Store, clock: ManualClock, documents: psycopg.AsyncConnection
) -> None:
    execution = await submitted(store, documents, "doc-3", approval.flow)
    await run_due(worker(store, V1_APP))  # InReview, its timer's advance due in 60 s
    await migrate_to_v2(store, execution)
    assert (await targets(documents, execution))[-1] == ("machine:document_approval@2", 1)
    assert (await targets(documents, execution))[0][0] == "machine:document_approval@1", (
        "finished work keeps the version it ran"
    )
    clock.advance(TIMER)
    assert await run_due(worker(store, V1_APP)) == 0, "nothing is left for version 1"
    assert await run_due(worker(store, V2_APP)) == 1
    state = await reads.inspect(store, REGISTRY, execution)
    assert (state.definition.version, state.machine.state) == ("2", "Expired")
    assert await status(documents, "doc-3") == "expired-v2"


async def test_an_old_worker_holding_the_lease_across_a_migration_hands_the_work_on(
    store: Store, clock: ManualClock, documents: psycopg.AsyncConnection
) -> None:
    execution = await submitted(store, documents, "doc-4", approval.flow)
    old = worker(store, V1_APP)
    await run_due(old)
    clock.advance(TIMER)
    (held,) = await claim(old)  # the timer's advance, claimed before the migration
    await migrate_to_v2(store, execution)
    await process(old, LeaseHolder(held, LEASE))
    state = await reads.inspect(store, REGISTRY, execution)
    assert (state.machine.state, state.machine.data) == ("InReview", '{"reminders":0}')
    assert await status(documents, "doc-4") == "in-review", "version 1's advance did not run"
    assert await run_due(worker(store, V2_APP)) == 1
    assert (await reads.inspect(store, REGISTRY, execution)).machine.state == "Expired"
    assert await status(documents, "doc-4") == "expired-v2"
