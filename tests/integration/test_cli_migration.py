"""Declaring an edge and migrating instances with the `wayline` command line, against a
real PostgreSQL: one line per instance (migrated, or refused with the judge's reason),
a clear one-line error for bad input, and nothing changed for an incompatible one; code
runs judged by replaying their journals against the code ``--app`` loads."""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from engine.api.client import Client
from engine.model.instance import InstanceStatus
from engine.store.store import Store
from examples import order_saga
from tests.fixtures.journal import renamed
from tests.integration import code_runs
from tests.integration.code_runs import settle, worker_context
from tests.integration.test_compatibility_reports import NAME
from tests.integration.test_instance_migration import V1, WITHOUT_CHARGE, published

WAYLINE = Path(sys.executable).parent / "wayline"


@dataclass(frozen=True)
class Ran:
    status: int
    out: str
    err: str


@pytest.fixture
def cli(pg_dsn: str, schema: str):
    """Run ``wayline ARGS`` on the test's schema (a real process)."""

    async def run(*args: str) -> Ran:
        process = await asyncio.create_subprocess_exec(
            str(WAYLINE),
            *args,
            "--dsn",
            pg_dsn,
            "--schema",
            schema,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await process.communicate()
        assert process.returncode is not None
        return Ran(process.returncode, out.decode(), err.decode())

    return run


async def test_declare_an_edge_then_migrate_the_compatible_instances(
    default_store: Store, cli
) -> None:
    client: Client = await published(default_store)
    await client.start(NAME, "order-90", {"n": 90}, "1")
    await client.start(NAME, "order-91", {"n": 91}, "1")
    await client.signal("order-91", "paid", "pay-91", {"by": "card"})  # charge in flight
    migrate = ("instance", "migrate", "--to", "2", "--actor", "olga", "--reason", "ship v2")

    no_edge = await cli(*migrate, "order-90")
    assert no_edge.status == 1
    assert "refused order-90: no migration of order from 1 to 2: declare the edge first" in (
        no_edge.out
    )
    edge = ("definition", "declare-edge", "--actor", "olga", "--reason", "v2 ships")
    declared = await cli(*edge, "order@1", "2")
    assert (declared.status, declared.out) == (0, "declared order@1 -> order@2\n")
    again = await cli(*edge, "order@1", "2")
    assert "was declared before" in again.out

    judged = await cli(*migrate, "order-90", "order-91", "--dry-run")
    assert judged.status == 1, "a dry run exits as the migration would"
    assert judged.out.splitlines() == [
        "applies order-90: order@1 -> order@2",
        "refused order-91: incompatible: step charge is in flight and was removed",
    ]
    moved = await cli(*migrate, "order-90", "order-91", "--bulk-id", "cli-1")
    assert moved.status == 1, "a refused instance is a failure a script notices"
    assert moved.out.splitlines() == [
        "done order-90: migrated from order@1 to order@2",
        "refused order-91: step charge is in flight and was removed; "
        "it was not migrated to order@2",
        "bulk cli-1: 1 migrated, 0 unchanged, 1 refused",
    ]
    state = await client.inspect("order-90")
    assert state.definition == WITHOUT_CHARGE.ref
    assert [a.action for a in state.audit] == ["pause", "migrate", "resume"]
    assert all(a.command_id.startswith("cli-1.") and a.actor == "olga" for a in state.audit)
    refused = await client.inspect("order-91")
    assert refused.definition == V1.ref and refused.audit == ()
    repeated = await cli(*migrate, "order-90", "order-91", "--bulk-id", "cli-1")
    assert repeated.out == moved.out, "the same bulk id acts once and answers its results"
    assert len((await client.inspect("order-90")).audit) == 3


async def test_bad_input_is_one_line_and_changes_nothing(default_store: Store, cli) -> None:
    client: Client = await published(default_store)
    await client.start(NAME, "order-92", {"n": 92}, "1")
    edge = ("definition", "declare-edge", "--actor", "olga", "--reason", "why")
    shapeless = await cli(*edge, "order", "2")
    assert shapeless.status == 2
    assert shapeless.err == (
        "wayline definition declare-edge: give the edge's source as NAME@VERSION, not 'order'\n"
    )
    unknown = await cli(*edge, "order@1", "9")
    assert (unknown.status, unknown.err) == (
        1,
        "wayline definition declare-edge: order@9 is not published\n",
    )
    migrate = ("instance", "migrate", "--actor", "olga", "--reason", "why")
    stranger = await cli(*migrate, "--to", "2", "order-92", "nobody-1")
    assert stranger.status == 1 and stranger.err.startswith("wayline instance migrate: ")
    assert "nobody-1" in stranger.err and len(stranger.err.splitlines()) == 1
    for bad in ("x/y", "", " 2"):  # no version: wrong on the command line, exit 2
        typo = await cli(*migrate, "--to", bad, "order-92")
        assert (typo.status, typo.out) == (2, "")
        assert typo.err == (
            "wayline instance migrate: error: argument --to: the version must be 1 to 200 "
            "characters: ASCII letters, digits, '.', '_' or '-', starting with a letter or digit\n"
        )
    for source, to in (("order@x/y", "2"), ("order@1", "x/y"), ("order@1", "")):
        typo = await cli(*edge, source, to)
        assert typo.status == 2 and "the version must be 1 to 200 characters" in typo.err
    nowhere = await cli(*migrate, "--to", "9", "order-92")
    assert nowhere.status == 1 and "refused order-92: order@9 is not published" in nowhere.out
    assert (await client.inspect("order-92")).audit == ()


RENAMED_APP = "tests.fixtures.journal.renamed:app"
"""order-saga@2: the example saga with its ``charge`` step renamed ``capture``."""
DIVERGED = (
    "journal divergence: expected step 'charge' at position 2 (event 8), "
    "code reached step 'capture'"
)
NOT_LOADED = "the code of order-saga@2 is not loaded here, so its journal cannot be replayed"


async def open_targets(store: Store, instance_id: str) -> list[str]:
    """The targets of the instance's unfinished work."""
    query = "SELECT target FROM work WHERE instance_id = %s AND state <> 3"
    async with store.connection() as conn:
        return [row[0] for row in await (await conn.execute(query, [instance_id])).fetchall()]


async def test_code_runs_migrate_when_app_loads_the_new_code(default_store: Store, cli) -> None:
    client = await code_runs.published(default_store, order_saga.app)
    ctx = worker_context(default_store, order_saga.app)
    for run_id in ("o-1", "o-2"):
        await client.start_run("order-saga", {"sku": "mug", "amount": 1200}, id=run_id)
    await settle(ctx)  # both wait in the race for paid or cancelled
    await client.signal("order-saga/o-2", "paid", "pay-2", {"by": "ada"})
    await settle(ctx)  # o-2 charged: its journal names the step version 2 renamed
    (v2,) = renamed.app.workflows
    await client.publish(v2.definition, "tests")
    edge = ("definition", "declare-edge", "order-saga@1", "2", "--actor", "a", "--reason", "r")
    assert (await cli(*edge)).status == 0
    both = ("order-saga/o-1", "order-saga/o-2")
    migrate = ("instance", "migrate", "--to", "2", "--actor", "olga", "--reason", "ship v2")

    blind = await cli(*migrate, *both, "--dry-run")
    assert (blind.status, blind.out.splitlines()) == (
        1,
        [f"refused {run}: incompatible: {NOT_LOADED} (give --app MODULE:APP)" for run in both],
    )
    refused = await cli(*migrate, "order-saga/o-1")
    assert refused.status == 1
    assert refused.out.splitlines()[0] == (
        f"refused order-saga/o-1: {NOT_LOADED} (give --app MODULE:APP); "
        "it was not migrated to order-saga@2"
    )
    unmoved = await client.inspect("order-saga/o-1")
    assert unmoved.definition.version == "1" and unmoved.audit == ()

    judged = await cli(*migrate, *both, "--app", RENAMED_APP, "--dry-run")
    assert (judged.status, judged.out.splitlines()) == (
        1,
        [
            "applies order-saga/o-1: order-saga@1 -> order-saga@2",
            f"refused order-saga/o-2: incompatible: {DIVERGED}",
        ],
    )
    alone = await cli(*migrate, "order-saga/o-1", "--app", RENAMED_APP, "--dry-run")
    assert alone.status == 0, "a dry run where every instance applies succeeds"
    moved = await cli(*migrate, *both, "--app", RENAMED_APP, "--bulk-id", "code-1")
    assert (moved.status, moved.out.splitlines()) == (
        1,
        [
            "done order-saga/o-1: migrated from order-saga@1 to order-saga@2",
            f"refused order-saga/o-2: {DIVERGED}; it was not migrated to order-saga@2",
            "bulk code-1: 1 migrated, 0 unchanged, 1 refused",
        ],
    )
    state = await client.inspect("order-saga/o-1")
    assert state.definition == v2.ref and state.status is InstanceStatus.RUNNING
    assert [a.action for a in state.audit] == ["pause", "migrate", "resume"]
    assert await open_targets(default_store, "order-saga/o-1") == ["workflow:order-saga@2"], (
        "the race's timeout is decided by version 2's workers"
    )
    assert (await client.inspect("order-saga/o-2")).definition.version == "1"
    nowhere = await cli(*migrate, "order-saga/o-1", "--app", "no_such_module:app")
    assert nowhere.status == 2, "an app that does not load is a usage error"

    await client.signal("order-saga/o-1", "paid", "pay-1", {"by": "ada"})
    await settle(worker_context(default_store, renamed.app))  # version 2's code goes on
    done = await client.inspect("order-saga/o-1")
    assert done.status is InstanceStatus.COMPLETED
    assert done.value("result")["outcome"] == "captured"
