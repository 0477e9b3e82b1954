"""A state machine's advances against a real PostgreSQL, on a controlled clock: each
advance's database writes commit exactly with the state it returns, timers wait on the
store's clock, failures back off and end dead, a cancellation compensates."""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from engine.decide import lifecycle
from engine.decide.operator_actions import Action
from engine.decide.operator_commands import record_command
from engine.model.events import EventKind
from engine.model.instance import Instance, InstanceStatus
from engine.model.limits import MAX_PAYLOAD_BYTES
from engine.model.registry import Registry
from engine.model.transitions import Draft
from engine.modes import decide, follow
from engine.modes.machines.advances import backoff
from engine.modes.machines.calls import MachineCall
from engine.store import catalog, reads
from engine.store.clock import ManualClock
from engine.store.store import Store
from engine.worker.activities import ActivityRegistry
from engine.worker.instance_cache import RegistrySource
from engine.worker.leased_commits import Context
from examples import documents as approval
from tests.integration.factories import member, run_due
from tests.integration.test_catalog import parent_of

T0 = datetime(2031, 6, 7, 8, 0, tzinfo=UTC)
LEASE = timedelta(seconds=30)
MACHINE = approval.flow.definition
REGISTRY = Registry([MACHINE])
TIMER = timedelta(seconds=60)
K = EventKind
S = InstanceStatus


@pytest.fixture
async def documents(aconn: psycopg.AsyncConnection) -> psycopg.AsyncConnection:
    await approval.set_up(aconn)
    return aconn


@pytest.fixture
def ctx(store: Store) -> Context:
    return Context(store, approval.app, RegistrySource(store, REGISTRY))


async def submitted(
    store: Store, aconn: psycopg.AsyncConnection, parent: str, **submitter: str
) -> str:
    """An execution for document ``parent`` (a new draft), started now (by
    ``submitter``: owner, team and scope, when given)."""
    await aconn.execute("INSERT INTO documents (id) VALUES (%s)", [parent])
    execution = f"document_approval/{parent}"
    start = {"input": "v1", "parent": parent, **submitter}
    draft = lifecycle.start_draft(REGISTRY, MACHINE, execution, store.now(), start)
    decide(draft)
    await store.commit(draft.build("start"))
    return execution


async def state_of(store: Store, execution: str) -> Instance:
    return await reads.inspect(store, REGISTRY, execution)


async def history(store: Store, execution: str) -> list:
    return [event async for event in reads.export_history(store, execution)]


async def document(aconn: psycopg.AsyncConnection, parent: str) -> tuple[str, int]:
    """The document's status and how many reminders it was sent."""
    status = "SELECT status FROM documents WHERE id = %s"
    reminders = "SELECT count(*) FROM document_reminders WHERE id = %s"
    (found,) = await (await aconn.execute(status, [parent])).fetchone()
    (sent,) = await (await aconn.execute(reminders, [parent])).fetchone()
    return found, sent


async def decided(aconn: psycopg.AsyncConnection, parent: str, decision: str) -> None:
    update = "UPDATE documents SET decision = %s, decided_by = 'ann' WHERE id = %s"
    await aconn.execute(update, [decision, parent])


async def in_review_until(
    ctx: Context, clock: ManualClock, documents: psycopg.AsyncConnection, parent: str, decision: str
) -> str:
    """An execution for ``parent`` in review, its reviewer's ``decision`` made and its
    timer due now."""
    execution = await submitted(ctx.store, documents, parent)
    await run_due(ctx)
    await decided(documents, parent, decision)
    clock.advance(TIMER)
    return execution


async def test_an_approval_is_reviewed_reminded_on_its_timer_and_approved(
    ctx: Context, store: Store, clock: ManualClock, documents: psycopg.AsyncConnection
) -> None:
    execution = await submitted(store, documents, "doc-1")

    assert await run_due(ctx) == 1  # Submitted -> InReview(0), its timer due in 60 s
    state = await state_of(store, execution)
    assert (state.machine.state, state.machine.timer_due_at) == ("InReview", T0 + TIMER)
    assert await document(documents, "doc-1") == ("in-review", 0)
    assert await run_due(ctx) == 0, "the timer is not due yet"

    clock.advance(TIMER)
    assert await run_due(ctx) == 1  # no decision yet: a reminder, InReview(1)
    assert (await state_of(store, execution)).machine.data == '{"reminders":1}'
    assert await document(documents, "doc-1") == ("in-review", 1)

    await decided(documents, "doc-1", "approved")
    clock.advance(TIMER)
    assert await run_due(ctx) == 1
    state = await state_of(store, execution)
    assert (state.status, state.machine.state, state.machine.data) == (
        S.COMPLETED,
        "Approved",
        '{"by":"ann"}',
    )
    assert await document(documents, "doc-1") == ("approved", 1)
    assert state.machine.transitions == 3


async def test_a_review_nobody_decides_expires_after_its_reminders(
    ctx: Context, store: Store, clock: ManualClock, documents: psycopg.AsyncConnection
) -> None:
    execution = await submitted(store, documents, "doc-2")
    await run_due(ctx)
    for _ in range(approval.REMINDERS + 1):
        clock.advance(TIMER)
        assert await run_due(ctx) == 1

    state = await state_of(store, execution)
    assert (state.status, state.machine.state) == (S.COMPLETED, "Expired")
    assert await document(documents, "doc-2") == ("in-review", approval.REMINDERS)


async def test_a_failing_advance_backs_off_and_ends_dead_with_nothing_written(
    ctx: Context, store: Store, clock: ManualClock, documents: psycopg.AsyncConnection
) -> None:
    execution = await in_review_until(ctx, clock, documents, "doc-3", "explode")

    for attempt in range(1, MACHINE.manifest.max_attempts):
        assert await run_due(ctx) == 1
        state = await state_of(store, execution)
        assert (state.machine.attempts, state.machine.code) == (attempt, "advance-raised")
        assert await run_due(ctx) == 0, "the next attempt waits for its backoff"
        clock.advance(backoff(attempt))
    assert await run_due(ctx) == 1

    state = await state_of(store, execution)
    assert (state.status, state.failure_code, state.result) == (
        S.FAILED,
        "dead-attempts-exhausted",
        None,
    )
    assert await document(documents, "doc-3") == ("in-review", 0)


async def test_an_advance_along_an_edge_the_manifest_lacks_ends_dead_and_rolls_back(
    ctx: Context,
    store: Store,
    clock: ManualClock,
    documents: psycopg.AsyncConnection,
    caplog: pytest.LogCaptureFixture,
) -> None:
    execution = await in_review_until(ctx, clock, documents, "doc-4", "sideways")

    with caplog.at_level(logging.WARNING, logger="wayline.machines"):
        assert await run_due(ctx) == 1
    # The history keeps only the code: the worker's log says which edge the code took.
    assert (
        f"advance of {execution} from InReview returned Submitted, an edge the manifest "
        "does not allow (InReview goes to Approved, Expired, InReview, Rejected)"
    ) in caplog.text

    state = await state_of(store, execution)
    assert (state.status, state.failure_code, state.machine.state) == (
        S.FAILED,
        "dead-illegal-transition",
        "InReview",
    )
    kinds = [e.kind for e in await history(store, execution)]
    assert kinds[-2:] == [K.TIMER_FIRED, K.FAILED]


async def test_a_state_too_large_to_record_ends_dead_and_rolls_back(
    ctx: Context, store: Store, clock: ManualClock, documents: psycopg.AsyncConnection
) -> None:
    """Approved(by) with a name over the largest event is a corrupt state, like a field
    of the wrong type: the execution ends dead and the advance's writes roll back
    (before, the worker's processing failed with a traceback, recording nothing, and
    the execution stayed in InReview with its advance due)."""
    execution = await in_review_until(ctx, clock, documents, "doc-9", "approved")
    huge = "UPDATE documents SET decided_by = repeat('x', %s) WHERE id = %s"
    await documents.execute(huge, [MAX_PAYLOAD_BYTES + 1, "doc-9"])

    assert await run_due(ctx) == 1

    state = await state_of(store, execution)
    assert (state.status, state.failure_code, state.machine.state) == (
        S.FAILED,
        "dead-corrupt-state",
        "InReview",
    )
    assert await document(documents, "doc-9") == ("in-review", 0)


async def cancel(store: Store, execution: str, command_id: str) -> None:
    state = await state_of(store, execution)
    draft = Draft(REGISTRY, state, store.now())
    record_command(draft, command_id, Action.CANCEL, "ann", "withdrawn")
    follow(draft)
    await store.commit(draft.build("command", command_id))


async def test_a_cancellation_runs_the_compensation_and_then_cancels(
    ctx: Context, store: Store, documents: psycopg.AsyncConnection
) -> None:
    execution = await submitted(store, documents, "doc-5")
    await run_due(ctx)
    await cancel(store, execution, "c-1")
    assert (await state_of(store, execution)).status is S.CANCELLING

    assert await run_due(ctx) == 1  # the compensation; the waiting timer is retired

    state = await state_of(store, execution)
    assert state.status is S.CANCELLED
    assert await document(documents, "doc-5") == ("draft", 0)
    events = await history(store, execution)
    assert [e.kind for e in events][-2:] == [K.COMPENSATION_SUCCEEDED, K.CANCELLED]
    assert events[-2].data == '"doc-5 is a draft again"'
    assert await run_due(ctx) == 0


async def test_a_cancellation_during_an_advance_rolls_the_advance_back(
    store: Store, clock: ManualClock, documents: psycopg.AsyncConnection
) -> None:
    """The cancellation commits while the advance runs: the advance's transition no
    longer fits, so its writes roll back with it and the compensation runs instead."""
    execution = await submitted(store, documents, "doc-6")

    async def cancelled_meanwhile(call: MachineCall) -> approval.Approval:
        state = await approval.advance(call)  # a reminder, written in its transaction
        if isinstance(call.state, approval.InReview):
            await cancel(store, execution, "c-mid")
        return state

    flow = replace(approval.flow, advance_function=cancelled_meanwhile)
    app = ActivityRegistry()
    app.machine(flow)
    ctx = Context(store, app, RegistrySource(store, REGISTRY))
    await run_due(ctx)
    clock.advance(TIMER)

    await run_due(ctx)

    state = await state_of(store, execution)
    assert (state.status, state.machine.state, state.machine.transitions) == (
        S.CANCELLED,
        "InReview",
        1,
    )
    assert await document(documents, "doc-6") == ("draft", 0), "the reminder rolled back"


@pytest.mark.parametrize("change", ["removed", "made a viewer", "kept"])
async def test_each_advance_rechecks_whoever_submitted_the_execution(
    ctx: Context, store: Store, clock: ManualClock, documents: psycopg.AsyncConnection, change: str
) -> None:
    """A submitter removed from the team, or whose role no longer covers the scope of
    the submit, ends the execution dead at its next advance, with nothing written."""
    await member(documents, "ann", "docs", "operator")
    parent = f"doc-{change.replace(' ', '-')}"
    submitter = {"owner": "ann", "team": "docs", "scope": "operator"}
    execution = await submitted(store, documents, parent, **submitter)
    await run_due(ctx)  # the first advance: ann stands
    if change == "removed":
        await documents.execute("DELETE FROM studio_memberships WHERE user_id = 'u-ann'")
    elif change == "made a viewer":
        await documents.execute("UPDATE studio_memberships SET role = 'viewer'")
    clock.advance(TIMER)

    await run_due(ctx)

    state = await state_of(store, execution)
    if change == "kept":
        assert (state.status, state.machine.state) == (S.RUNNING, "InReview")
        assert await document(documents, parent) == ("in-review", 1)
    else:
        assert (state.status, state.failure_code) == (S.FAILED, "dead-authorization")
        assert await document(documents, parent) == ("in-review", 0)


async def test_a_machine_that_cannot_start_as_a_child_fails_the_child_step(
    store: Store, documents: psycopg.AsyncConnection
) -> None:
    """A step list's child that is a machine is started like any child; a start the
    machine refuses (no parent in its input here) is a known, final start failure,
    not a start tried again at every redelivery."""
    parent_definition = parent_of(MACHINE, "documents-batch")
    for definition in (MACHINE, parent_definition):
        await catalog.publish(store, definition, "ann")
    registry = Registry([MACHINE, parent_definition])
    ctx = Context(store, approval.app, RegistrySource(store, registry))
    draft = lifecycle.start_draft(registry, parent_definition, "batch-1", store.now(), {"n": 1})
    decide(draft)
    await store.commit(draft.build("start"))

    await run_due(ctx)

    events = await history(store, "batch-1")
    [failed] = [e for e in events if e.kind is K.CHILD_START_FAILED]
    assert (failed.step, failed.code, failed.retryable) == ("kid", "child-input-refused", False)
