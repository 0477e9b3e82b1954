"""I8 (no orphan waits) examines every instance, ended ones too: after a quiet phase
every instance has ended, and a check of the live ones alone read 0/0 or passed while
an ended instance still had work left for it, or had completed past a wait it never
closed."""

from __future__ import annotations

import psycopg

from engine.decide.operator_actions import Action
from engine.model.events import EventKind
from engine.model.instance import Instance, InstanceStatus
from engine.model.transitions import Draft
from engine.store.store import Store
from tests.integration.transition_builders import BASE_TIME, STEP_GAP, catalog
from verification import wait_checks
from verification.findings import Findings

CATALOG = catalog()
REOPEN = "UPDATE work SET state = 1, completed_at = NULL, failure_code = '' WHERE instance_id = %s"
"""Plants an orphan: the work the instance's end retired, available again."""
LEASE_AGAIN = """
UPDATE work SET state = 2, completed_at = NULL, failure_code = '', lease_owner = 'gone',
    lease_token = 1, lease_expires_at = now()
WHERE instance_id = %s
"""
"""The same work leased again, to a worker gone by the check."""


async def cancelled(pg_dsn: str, schema: str, instance_id: str) -> Instance:
    """An instance cancelled before its activity ran (its end retires the activity's work)."""
    flow = CATALOG.flow(CATALOG.single, instance_id)
    store = await Store.open(pg_dsn, schema)
    try:
        start = flow.start()
        await store.commit(start)
        await store.commit(flow.command(flow.after(start), "stop", Action.CANCEL))
        state = await flow.load(store)
    finally:
        await store.close()
    assert state.status is InstanceStatus.CANCELLED
    return state


async def i8(aconn: psycopg.AsyncConnection, *states: Instance, quiet: bool = True) -> Findings:
    findings = Findings()
    await wait_checks.check(aconn, findings, {s.instance_id: s for s in states}, quiet)
    return findings


async def test_an_ended_instance_is_examined_after_the_quiet_phase(
    pg_dsn: str, schema: str, aconn: psycopg.AsyncConnection
) -> None:
    state = await cancelled(pg_dsn, schema, "over")

    findings = await i8(aconn, state)

    assert findings.checks["I8"].checked >= 1, "the ended instance's work was examined"
    assert findings.violations == []


async def test_work_left_for_an_ended_instance_is_an_orphan(
    pg_dsn: str, schema: str, aconn: psycopg.AsyncConnection
) -> None:
    state = await cancelled(pg_dsn, schema, "left")
    await aconn.execute(REOPEN, ["left"])

    findings = await i8(aconn, state)

    assert len(findings.violations) == 1, findings.violations
    assert findings.violations[0].startswith("I8 no orphan waits: left: cancelled, but its ")
    assert "activity a work" in findings.violations[0]
    assert "still available" in findings.violations[0]


async def test_a_lease_on_an_ended_instance_is_judged_only_after_the_quiet_phase(
    pg_dsn: str, schema: str, aconn: psycopg.AsyncConnection
) -> None:
    """Mid-run its holder may still be finishing the attempt it started."""
    state = await cancelled(pg_dsn, schema, "held")
    await aconn.execute(LEASE_AGAIN, ["held"])

    assert (await i8(aconn, state, quiet=False)).violations == []
    assert "still leased" in (await i8(aconn, state, quiet=True)).violations[0]


async def test_a_completed_instance_that_never_closed_a_wait_is_caught(
    pg_dsn: str, schema: str, aconn: psycopg.AsyncConnection
) -> None:
    """A decision that completed the instance while its activity was still due (as a
    broken orchestration would): its work retired with the end, so only the state says
    that a step was dropped."""
    flow = CATALOG.flow(CATALOG.single, "early")
    store = await Store.open(pg_dsn, schema)
    try:
        start = flow.start()
        await store.commit(start)
        draft = Draft(CATALOG.registry, flow.after(start), BASE_TIME + STEP_GAP)
        draft.add(EventKind.COMPLETED)
        await store.commit(draft.build("done-early"))
        state = await flow.load(store)
    finally:
        await store.close()

    findings = await i8(aconn, state)

    assert findings.violations == [
        "I8 no orphan waits: early: completed with activity a still ready (attempt 0)"
    ]
