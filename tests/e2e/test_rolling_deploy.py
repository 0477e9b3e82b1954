"""A rolling deploy as an operator lives it: the old version's workers are stopped while
instances pinned to it still have work, and ``wayline inspect`` must say that no running
worker will ever take that work, rather than read as waiting for the next step."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from engine.api.queries import Queries
from engine.model.instance import InstanceStatus
from examples import documents as approval
from tests.e2e.test_cli_e2e import ok, one_line

if TYPE_CHECKING:
    from tests.e2e.conftest import Harness

MACHINE_V1 = "machine:document_approval@1"
STOPPED_V1 = (
    f"  no worker: no running worker runs {MACHINE_V1}: its work waits until a worker whose"
    " app registers it starts (wayline worker --app MODULE:REGISTRY) or the instance is"
    " migrated to a version a running worker runs (wayline instance migrate)\n"
)


async def test_inspect_says_no_running_worker_runs_an_executions_version(e2e: Harness) -> None:
    """An execution of a machine whose code no worker loads stood at "waiting for the
    advance from Submitted, due now", as if a worker were about to take it."""
    start = {"input": "v1", "parent": "doc-1"}
    await e2e.start(approval.flow.definition, "exec-1", start)

    said = await ok(e2e, "inspect", "exec-1")
    assert "  now: waiting for the advance from Submitted, due now\n" in said
    assert said.endswith(STOPPED_V1)


async def test_a_stopped_worker_no_longer_counts_as_running_its_version(e2e: Harness) -> None:
    """Right after version 1's worker stopped, an execution of version 1 waiting for its
    review's timer read as waiting for that timer: the stopped worker's targets counted as
    running for 15 minutes after its last heartbeat, so nothing said the timer's advance
    would never run."""
    async with e2e.store.connection() as conn:
        await approval.set_up(conn)
        await conn.execute("INSERT INTO documents (id) VALUES ('doc-1')")
        await conn.commit()
    [old] = await e2e.spawn(app="examples.documents:app")
    await e2e.start(approval.flow.definition, "exec-1", {"input": "v1", "parent": "doc-1"})

    async def in_review() -> bool:
        state = await e2e.state("exec-1")
        machine = state.machine
        return (
            state.status is InstanceStatus.RUNNING and bool(machine) and machine.state == "InReview"
        )

    await e2e.until(in_review, what="InReview")
    assert "no worker" not in await ok(e2e, "inspect", "exec-1")
    await old.stop()

    said = await ok(e2e, "inspect", "exec-1")
    assert "  now: waiting for the timer of InReview until " in said
    assert said.endswith(STOPPED_V1)
    [stopped] = [w for w in await Queries(e2e.store).workers() if w.worker_id == old.worker_id]
    assert stopped.stopped_at is not None, "the Workers page says it stopped, not live"


async def test_a_version_published_from_the_command_line_can_be_deprecated_there(
    e2e: Harness,
) -> None:
    """Deprecating was the studio's and the API's alone, which act for a team: a version
    published by ``wayline definition publish`` (team '', which no account belongs to)
    could not be deprecated at all, so version 1 kept taking new starts after the deploy."""
    await e2e.publish(approval.flow.definition)
    said = await ok(e2e, "definition", "deprecate", "document_approval@1", "--actor", "ann")
    assert said == (
        "deprecated document_approval@1 (by ann): new instances of it are refused;"
        " instances already on it keep it until they end or are migrated\n"
    )
    assert "document_approval@1 " in (listed := await ok(e2e, "definition", "list"))
    assert listed.rstrip().endswith("deprecated")
    start = json.dumps({"input": "v1", "parent": "doc-1"})
    refused = await e2e.cli("start", "document_approval@1", "--id", "x", "--input", start)
    assert (refused.code, one_line(refused)) == (
        1,
        "wayline start: document_approval@1 is deprecated and refuses new instances",
    )

    theirs = await e2e.cli(
        "definition", "deprecate", "document_approval@1", "--actor", "ann", "--team", "other"
    )
    assert (theirs.code, one_line(theirs)) == (
        1,
        "wayline definition deprecate: document_approval@1 is not published",
    )
