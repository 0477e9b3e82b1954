"""The drills' integrity check that stands in for foreign keys (migration 0008): every
history and ledger row belongs to an instance, every work row to its event."""

from __future__ import annotations

import psycopg

from engine.store.store import Store
from tests.integration.transition_builders import catalog
from verification import sql_checks
from verification.findings import Findings

CATALOG = catalog()


async def start(pg_dsn: str, schema: str, instance_id: str) -> None:
    """One instance started as a client would: its history, ledger and work rows."""
    store = await Store.open(pg_dsn, schema)
    try:
        await store.commit(CATALOG.flow(CATALOG.single, instance_id).start())
    finally:
        await store.close()


async def test_rows_written_by_transitions_all_belong(
    pg_dsn: str, schema: str, aconn: psycopg.AsyncConnection
) -> None:
    await start(pg_dsn, schema, "kept")
    findings = Findings()

    await sql_checks.belonging(aconn, findings)

    assert findings.checks["I6"].checked >= 3  # history, ledger and work rows were read
    assert findings.violations == []


async def test_an_orphaned_row_is_named(
    pg_dsn: str, schema: str, aconn: psycopg.AsyncConnection
) -> None:
    await start(pg_dsn, schema, "moved")
    await aconn.execute("UPDATE history SET instance_id = 'ghost'")
    await aconn.execute("UPDATE work SET sequence = 99")
    findings = Findings()

    await sql_checks.belonging(aconn, findings)

    assert any("history row ghost/1" in v for v in findings.violations), findings.violations
    assert any("work row moved/99" in v for v in findings.violations), findings.violations
