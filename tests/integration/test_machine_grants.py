"""A machine's declared grants, enforced by PostgreSQL: each advance runs as its
resource's role (write with ``DbWrite``, read with ``DbRead`` alone, a role with no
privileges without grants), so a statement its grants do not allow ends the execution
dead with nothing written, while the engine still writes the transition as itself. A
role that is missing or that the login may not act as makes the work a dead letter."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from psycopg import sql

from engine import provision_roles, provisioning_sql
from engine.decide import lifecycle
from engine.model.instance import Instance, InstanceStatus
from engine.model.registry import Registry
from engine.model.validation import parse_definition
from engine.modes import decide
from engine.modes.machines.calls import MachineCall
from engine.modes.machines.declaration import Machine
from engine.modes.machines.fold import progress_of
from engine.modes.machines.grants import NO_GRANTS_ROLE, roles_of
from engine.store import reads, roles
from engine.store.dead_letters import list_dead_letters, make_resolution, resolve
from engine.store.store import Store
from engine.worker.activities import ActivityRegistry
from engine.worker.instance_cache import RegistrySource
from engine.worker.leased_commits import Context
from examples import documents as approval
from tests.integration.factories import run_due

T0 = datetime(2031, 6, 7, 8, 0, tzinfo=UTC)
S = InstanceStatus
Advance = approval.Approval
UNGRANTED = "CREATE TABLE ungranted (note text)"
"""A table of the schema that no machine role was granted anything on."""


@pytest.fixture
async def documents(aconn: psycopg.AsyncConnection) -> psycopg.AsyncConnection:
    await approval.set_up(aconn)
    await aconn.execute(UNGRANTED)
    await aconn.execute("INSERT INTO documents (id) VALUES ('doc-1')")
    return aconn


def granted(grants: list[str], resource: str = "Documents") -> Machine:
    """The document approval with other grants (and resource)."""
    document = {**approval.flow.document, "grants": grants, "resource": resource}
    return replace(approval.flow, definition=parse_definition(document))


async def advanced(store: Store, flow: Machine, advance) -> Instance:
    """An execution of ``flow`` for doc-1, after a worker ran its first advance
    (``advance``)."""
    ctx = worker_of(store, replace(flow, advance_function=advance))
    registry = await ctx.registries.get()
    start = {"input": "v1", "parent": "doc-1"}
    draft = lifecycle.start_draft(registry, flow.definition, "exec-1", store.now(), start)
    decide(draft)
    await store.commit(draft.build("start"))
    assert await run_due(ctx) == 1
    return await reads.inspect(store, registry, "exec-1")


def worker_of(store: Store, flow: Machine) -> Context:
    """A worker's context that runs ``flow``'s code."""
    app = ActivityRegistry()
    app.machine(flow)
    return Context(store, app, RegistrySource(store, Registry([flow.definition])))


async def status_of(conn: psycopg.AsyncConnection) -> str:
    (found,) = await (await conn.execute("SELECT status FROM documents")).fetchone()
    return found


async def test_an_advance_with_its_grants_acts_as_its_role_and_the_engine_as_itself(
    store: Store, documents: psycopg.AsyncConnection
) -> None:
    acting: list[str] = []

    async def advance(call: MachineCall) -> Advance:
        [(user,)] = await call.execute("SELECT current_user")
        acting.append(user)
        return await approval.advance(call)

    state = await advanced(store, approval.flow, advance)

    assert acting == [roles_of("Documents").write]
    assert (state.status, state.machine.state) == (S.RUNNING, "InReview")  # written as itself
    assert await status_of(documents) == "in-review"


ALLOWED_WRITE = "UPDATE documents SET decided_by = 'bot'"


@pytest.mark.parametrize(
    ("grants", "statements"),
    [
        (
            ["DbRead<Documents>", "DbWrite<Documents>"],
            [ALLOWED_WRITE, "INSERT INTO ungranted VALUES ('x')"],
        ),
        (["DbRead<Documents>"], ["UPDATE documents SET status = 'in-review'"]),
        ([], ["SELECT count(*) FROM {schema}.documents"]),
        (["DbWrite<Documents>"], [ALLOWED_WRITE, "SELECT count(*) FROM history"]),
    ],
    ids=["a table not granted", "a write with DbRead", "anything without grants", "the engine's"],
)
async def test_a_statement_the_grants_do_not_allow_ends_the_execution_dead(
    store: Store,
    documents: psycopg.AsyncConnection,
    schema: str,
    grants: list[str],
    statements: list[str],
) -> None:
    """Without grants the role has no USAGE on the schema either: its tables named
    plainly are not even found (undefined_table, a failure retried), so this one names
    the schema, and is refused."""

    async def advance(call: MachineCall) -> Advance:
        for statement in statements:
            await call.execute(statement.format(schema=schema))
        return approval.InReview(0)

    state = await advanced(store, granted(grants), advance)

    assert (state.status, state.failure_code, state.result) == (
        S.FAILED,
        "dead-grant-denied",
        None,
    )
    assert progress_of(state).transitions == 0
    rows = await (await documents.execute("SELECT status, decided_by FROM documents")).fetchall()
    assert rows == [("draft", None)], "the advance's writes rolled back"


async def test_a_machine_that_may_read_reads(
    store: Store, documents: psycopg.AsyncConnection
) -> None:
    read: list[tuple] = []

    async def advance(call: MachineCall) -> Advance:
        read.extend(await call.execute("SELECT id, status FROM documents"))
        return approval.InReview(0)

    state = await advanced(store, granted(["DbRead<Documents>"]), advance)

    assert (read, state.status, state.machine.state) == (
        [("doc-1", "draft")],
        S.RUNNING,
        "InReview",
    )


async def test_code_that_catches_the_refusal_still_ends_dead(
    store: Store, documents: psycopg.AsyncConnection
) -> None:
    """``GrantDenied`` is no ``Exception``: the usual catch-all lets it through."""
    caught: list[BaseException] = []

    async def advance(call: MachineCall) -> Advance:
        try:
            await call.execute("INSERT INTO ungranted VALUES ('x')")
        except Exception as exc:  # what careless code does
            caught.append(exc)
        return approval.InReview(0)

    state = await advanced(store, approval.flow, advance)

    assert (caught, state.failure_code) == ([], "dead-grant-denied")


async def test_code_that_swallows_a_failed_statement_fails_its_attempt(
    store: Store, documents: psycopg.AsyncConnection
) -> None:
    """Its transaction cannot commit: the attempt fails, and is tried again later."""

    async def advance(call: MachineCall) -> Advance:
        with contextlib.suppress(psycopg.errors.DivisionByZero):
            await call.execute("SELECT 1 / 0")
        return approval.InReview(0)

    state = await advanced(store, approval.flow, advance)

    assert (state.status, state.machine.code) == (S.RUNNING, "advance-statement-failed")


async def test_a_role_that_does_not_exist_makes_the_work_a_dead_letter_to_retry(
    store: Store, documents: psycopg.AsyncConnection, schema: str
) -> None:
    """Not the execution's fault: an operator provisions the roles and retries it."""
    resource = f"Unprovisioned{uuid.uuid4().hex[:12]}"
    flow = granted([f"DbWrite<{resource}>"], resource)

    state = await advanced(store, flow, approval.advance)

    assert (state.status, progress_of(state).transitions) == (S.RUNNING, 0)
    (dead,) = (await list_dead_letters(store)).items
    assert dead.failure_code == "grant-role-missing"
    assert await status_of(documents) == "draft"

    made = roles_of(resource)
    try:
        await provision_roles(documents, [resource])
        await documents.execute(PRIVILEGES.format(read=made.read, write=made.write, schema=schema))
        now = store.now()
        retry = ("retry", "olive", "roles made", now, now, now + timedelta(days=1))
        await resolve(
            store, make_resolution("cmd-retry", dead.instance_id, dead.work_id, dead.token, *retry)
        )
        assert await run_due(worker_of(store, replace(flow, advance_function=approval.advance)))
    finally:
        for role in (made.write, made.read):
            await documents.execute(
                sql.SQL("DROP OWNED BY {0}; DROP ROLE {0}").format(sql.Identifier(role))
            )
    assert (
        await reads.inspect(store, Registry([flow.definition]), "exec-1")
    ).machine.state == "InReview"
    assert await status_of(documents) == "in-review"


PRIVILEGES = """
GRANT USAGE ON SCHEMA {schema} TO {read};
GRANT SELECT ON documents TO {read};
GRANT UPDATE ON documents TO {write};
"""


@pytest.fixture
async def outsider(aconn: psycopg.AsyncConnection) -> str:
    """A role that is a member of no machine role (made once per cluster)."""
    name = "wayline_test_outsider"
    await roles.provision(aconn, [(name,)])
    return name


async def test_a_login_that_is_not_a_member_of_the_role_may_not_act_as_it(
    documents: psycopg.AsyncConnection, outsider: str
) -> None:
    async with documents.transaction(force_rollback=True):
        await documents.execute(
            sql.SQL("SET LOCAL SESSION AUTHORIZATION {}").format(sql.Identifier(outsider))
        )
        with pytest.raises(roles.RoleUnavailable) as refused:
            await roles.act_as(documents, roles_of("Documents").read)
    assert (refused.value.code, refused.value.role) == (
        "grant-role-refused",
        "wayline_documents_read",
    )


async def test_provisioning_is_idempotent_and_safe_at_once_from_many_sessions(
    pg_dsn: str,
) -> None:
    resource = f"Probe{uuid.uuid4().hex[:12]}"
    made = roles_of(resource)

    async def provision() -> None:
        async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
            await provision_roles(conn, [resource])

    try:
        await asyncio.gather(*(provision() for _ in range(6)))
        await provision()
        async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
            members = await (await conn.execute(MEMBERS, [[made.read, made.write]])).fetchall()
            [(login,)] = await (await conn.execute("SELECT current_user")).fetchall()
    finally:
        async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
            for role in (made.write, made.read):
                await conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
    assert set(members) == {(made.read, made.write), (made.read, login), (made.write, login)}


MEMBERS = """
SELECT r.rolname, m.rolname FROM pg_auth_members a
JOIN pg_roles r ON r.oid = a.roleid JOIN pg_roles m ON m.oid = a.member
WHERE r.rolname = ANY(%s)
"""


def test_the_printed_provisioning_names_every_role_once() -> None:
    printed = provisioning_sql(["Documents", "Documents"], login="worker")

    assert printed.count("CREATE ROLE") == 3
    for role in (NO_GRANTS_ROLE, "wayline_documents_read", "wayline_documents_write"):
        assert f'GRANT "{role}" TO "worker"' in printed
    assert 'GRANT "wayline_documents_read" TO "wayline_documents_write"' in printed
