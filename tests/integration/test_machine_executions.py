"""The host operations of state machines against PostgreSQL: idempotent submit, each
conflict, one active execution per parent (under real concurrency), and access."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from engine import (
    AccessRefused,
    Action,
    ActiveExecutionExists,
    Client,
    DecisionRejected,
    ExecutionNotFound,
    Executions,
    InputRefused,
    StateValue,
    Store,
    SubmitConflict,
)
from engine.model.registry import Registry
from engine.model.validation import parse_definition
from engine.store.clock import ManualClock
from engine.worker.instance_cache import RegistrySource
from engine.worker.leased_commits import Context
from examples import documents as document_approval
from examples.documents import Submitted
from tests.integration.factories import member, open_store, run_due

T0 = datetime(2026, 3, 1, tzinfo=UTC)
NAME = "document_approval"
OWNER = {"actor": "ada", "team": "red"}
CONCURRENT = 10


@pytest.fixture
async def executions(store: Store) -> Executions:
    client = Client(store)
    await client.publish(document_approval.flow.definition, "ada", "red")
    return Executions(client)


async def submit(executions: Executions, key: str = "r1", **change: object):
    arguments = {"parent": "doc-7", "input": "v1", "scope": "operator", **OWNER, **change}
    return await executions.submit(NAME, key=key, **arguments)


async def test_an_identical_submit_returns_the_existing_execution(
    executions: Executions,
) -> None:
    first = await submit(executions)
    again = await submit(executions)
    assert first.created and not again.created
    assert again.execution_id == first.execution_id
    digest = hashlib.sha256(b"red\0ada\0r1").hexdigest()[:24]
    assert first.execution_id == f"{NAME}/{digest}"
    assert await executions.status(first.execution_id, **OWNER) == "running"
    assert await executions.state(first.execution_id, **OWNER) == StateValue("Submitted")
    typed = await executions.state(first.execution_id, **OWNER, family=document_approval.flow)
    assert typed == Submitted()


async def test_the_same_key_is_per_actor_and_team(executions: Executions) -> None:
    mine = await submit(executions)
    await executions.client.command(mine.execution_id, Action.TERMINATE, "ada", "done")
    theirs = await submit(executions, actor="bob")
    assert theirs.created and theirs.execution_id != mine.execution_id


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"input": "v2"}, "another input"),
        ({"parent": "doc-8"}, "another parent"),
        ({"scope": "admin"}, "another scope"),
        ({"input": "v2", "parent": "doc-8"}, "another input and parent"),
    ],
)
async def test_the_same_key_with_other_content_is_a_conflict_naming_what_differs(
    executions: Executions, change: dict[str, str], says: str
) -> None:
    first = await submit(executions)
    with pytest.raises(SubmitConflict) as conflict:
        await submit(executions, **change)
    assert str(conflict.value) == (
        f"key r1 was already used with {says} (execution {first.execution_id})"
    )


async def test_the_same_key_on_another_version_is_a_conflict(executions: Executions) -> None:
    await submit(executions)
    second = parse_definition({**document_approval.flow.document, "version": "2"})
    await executions.client.publish(second, "ada", "red")
    with pytest.raises(SubmitConflict, match="another version"):
        await submit(executions)
    assert not (await submit(executions, version="1")).created


async def test_a_second_active_execution_for_a_parent_is_refused_naming_the_first(
    executions: Executions,
) -> None:
    first = await submit(executions)
    with pytest.raises(ActiveExecutionExists) as refused:
        await submit(executions, key="r2", actor="bob")
    assert str(refused.value) == (
        f"{NAME} already has an active execution for parent doc-7: {first.execution_id}"
    )
    assert refused.value.active_id == first.execution_id
    assert (await submit(executions, key="r3", parent="doc-8")).created


async def test_a_parent_takes_a_new_execution_once_the_active_one_ended(
    executions: Executions,
) -> None:
    first = await submit(executions)
    await executions.client.command(first.execution_id, Action.TERMINATE, "ada", "stop")
    assert await executions.status(first.execution_id, **OWNER) == "cancelled"
    second = await submit(executions, key="r2")
    assert second.created
    assert not (await submit(executions)).created  # the ended one is still the key's


@pytest.fixture
async def wide_store(pg_dsn: str, schema: str) -> AsyncIterator[Store]:
    """Enough connections for every concurrent submit to run at once."""
    async with open_store(pg_dsn, schema, max_size=CONCURRENT) as opened:
        yield opened


async def test_concurrent_submits_for_one_parent_admit_exactly_one(
    executions: Executions, wide_store: Store
) -> None:
    racing = Executions(Client(wide_store))
    outcomes = await asyncio.gather(
        *(submit(racing, key=f"k{i}") for i in range(CONCURRENT)), return_exceptions=True
    )
    admitted = [o for o in outcomes if not isinstance(o, BaseException)]
    refused = [o for o in outcomes if isinstance(o, ActiveExecutionExists)]
    assert len(admitted) == 1 and len(refused) == CONCURRENT - 1
    assert {r.active_id for r in refused} == {admitted[0].execution_id}


async def test_the_database_refuses_a_second_active_row_for_a_parent(
    executions: Executions, aconn: psycopg.AsyncConnection
) -> None:
    """The rule is PostgreSQL's: no read-then-write in the engine keeps it."""
    first = await submit(executions)
    await aconn.execute(
        "CREATE TEMPORARY TABLE copied AS SELECT * FROM instances WHERE instance_id = %s",
        (first.execution_id,),
    )
    await aconn.execute("UPDATE copied SET instance_id = 'copy'")
    with pytest.raises(psycopg.errors.UniqueViolation) as refused:
        await aconn.execute("INSERT INTO instances SELECT * FROM copied")
    assert refused.value.diag.constraint_name == "instances_one_active_per_parent"


async def test_only_the_submitter_reads_or_cancels_an_execution(
    executions: Executions,
) -> None:
    first = await submit(executions)
    execution = first.execution_id
    with pytest.raises(AccessRefused, match="only the actor who submitted it may"):
        await executions.status(execution, "bob", "red")
    with pytest.raises(AccessRefused):
        await executions.state(execution, "bob", "red")
    with pytest.raises(AccessRefused):
        await executions.cancel(execution, "bob", "red", "not mine")
    with pytest.raises(ExecutionNotFound, match="no execution"):
        await executions.status(execution, "ada", "blue")  # as if it did not exist
    with pytest.raises(ExecutionNotFound):
        await executions.status(f"{NAME}/nope", **OWNER)
    with pytest.raises(ExecutionNotFound, match="not an execution of other"):
        await executions.status(execution, **OWNER, machine="other")
    assert await executions.status(execution, **OWNER) == "running"


async def test_cancel_is_the_audited_operator_cancel(executions: Executions) -> None:
    execution = (await submit(executions)).execution_id
    status = await executions.cancel(execution, "ada", "red", "no longer needed", "c1")
    assert status == "cancelling"
    assert await executions.cancel(execution, "ada", "red", "no longer needed", "c1")
    state = await executions.client.inspect(execution)
    [entry] = state.audit
    assert (entry.action, entry.actor, entry.reason) == ("cancel", "ada", "no longer needed")


async def test_a_second_cancel_says_the_execution_is_already_being_cancelled(
    executions: Executions,
) -> None:
    """Not in the lifecycle rule's words (cancellation_requested is not allowed while
    cancelling), and nothing is recorded."""
    execution = (await submit(executions)).execution_id
    await executions.cancel(execution, "ada", "red", "no longer needed", "c1")
    with pytest.raises(DecisionRejected) as refused:
        await executions.cancel(execution, "ada", "red", "still not needed", "c2")
    assert str(refused.value) == "the execution is already being cancelled; nothing was done"
    assert [a.command_id for a in (await executions.client.inspect(execution)).audit] == ["c1"]


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"input": 7}, "the input must be text (the machine's input is text)"),
        ({"parent": ""}, "the parent must be"),
        ({"key": ""}, "the key must be non-empty text"),
        ({"actor": " "}, "the actor must be non-empty text"),
        ({"scope": ""}, "the scope must be non-empty text"),
        ({"scope": "god"}, "the scope is a role: one of viewer, author, operator, admin"),
        ({"team": "Red Team"}, "a team id has 1 to 63 characters"),
    ],
)
async def test_bad_arguments_are_refused_before_anything_is_written(
    executions: Executions, change: dict[str, object], says: str
) -> None:
    with pytest.raises(InputRefused, match=says.replace("(", r"\(").replace(")", r"\)")):
        await submit(executions, **change)


async def test_a_plain_start_of_a_machine_needs_its_start_data(executions: Executions) -> None:
    with pytest.raises(InputRefused, match="a machine starts with an object"):
        await executions.client.start(NAME, "plain-1", "v1")
    started = await executions.client.start(NAME, "plain-2", {"input": "v1", "parent": "doc-9"})
    with pytest.raises(ActiveExecutionExists, match="parent doc-9: plain-2"):
        await executions.client.start(NAME, "plain-3", {"input": "v1", "parent": "doc-9"})
    with pytest.raises(AccessRefused):  # no owner: nobody's to read through submit's API
        await executions.status(started.instance_id, "ada", "")


async def test_a_signal_to_an_execution_says_a_machine_takes_none(executions: Executions) -> None:
    """A machine waits for no signal: one sent anyway (``wayline signal``, the API) is
    refused saying so, in the machine's words rather than the fold's, and nothing is
    written."""
    execution = (await submit(executions)).execution_id
    client = executions.client
    for step in ("Submitted", "Nowhere"):
        with pytest.raises(InputRefused) as refused:
            await client.signal(execution, step, "s-1", {})
        assert str(refused.value) == (
            f"{NAME}@1 is a state machine, which takes no signals: its advance reads "
            "what it decides on from the database when it runs"
        )
    assert (await client.inspect(execution)).sequence == 1


async def test_a_command_naming_a_step_says_a_machine_takes_none(executions: Executions) -> None:
    """``wayline command EXECUTION ACTION --step NAME``: a machine's state is named as a
    state, and either way the refusal says a machine's commands take no step."""
    execution = (await submit(executions)).execution_id
    client = executions.client
    for step, named in (("Submitted", "a state"), ("Nowhere", "not a step")):
        with pytest.raises(InputRefused) as refused:
            await client.command(execution, Action.RETRY_ACTIVITY, "ada", "again", step=step)
        assert str(refused.value) == (
            f"{step!r} is {named} of {NAME}@1: a state machine has no steps, so its "
            "commands take none"
        )
    assert (await client.inspect(execution)).sequence == 1


async def test_the_worker_moves_a_submitted_execution_and_its_end_frees_the_parent(
    executions: Executions, store: Store, clock: ManualClock, aconn: psycopg.AsyncConnection
) -> None:
    await document_approval.set_up(aconn)
    await aconn.execute("INSERT INTO documents (id) VALUES ('doc-7')")
    await member(aconn, "ada", "red", "operator")  # each advance re-checks the submitter
    registries = RegistrySource(store, Registry([document_approval.flow.definition]))
    worker = Context(store, document_approval.app, registries)
    execution = (await submit(executions)).execution_id

    assert await run_due(worker) == 1  # Submitted -> InReview(0), its timer 60 s away
    assert await executions.status(execution, **OWNER) == "waiting"
    typed = await executions.state(execution, **OWNER, family=document_approval.flow)
    assert typed == document_approval.InReview(reminders=0)

    await aconn.execute("UPDATE documents SET decision = 'approved', decided_by = 'ann'")
    clock.advance(timedelta(seconds=60))
    assert await executions.status(execution, **OWNER) == "running"  # its advance is due
    assert await run_due(worker) == 1
    assert await executions.status(execution, **OWNER) == "completed"
    assert await executions.state(execution, **OWNER) == StateValue("Approved", {"by": "ann"})
    assert (await submit(executions, key="r2")).created  # doc-7 is free again
