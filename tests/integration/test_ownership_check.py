"""I10 after a quiet phase counts the work it found not leased: a pass is N/0 with N the
work examined, never the 0/0 of counting only the leases still held."""

from __future__ import annotations

import psycopg

from tests.integration.test_belonging import start
from verification import sql_checks
from verification.findings import Findings

LEASE_ALL = "UPDATE work SET state = 2, lease_owner = %s, lease_token = 1, lease_expires_at = now()"


async def leased_to(
    pg_dsn: str, schema: str, aconn: psycopg.AsyncConnection, owner: str, quiet: bool
) -> Findings:
    """I10's findings on an instance whose work is all leased to ``owner``, a live worker
    unless after the quiet phase (when every worker has stopped)."""
    await start(pg_dsn, schema, owner)
    await aconn.execute(LEASE_ALL, [owner])
    findings = Findings()
    live = frozenset() if quiet else frozenset({owner})
    await sql_checks.ownership(aconn, findings, quiet=quiet, live=live)
    return findings


async def test_after_the_quiet_phase_every_work_item_is_examined(
    pg_dsn: str, schema: str, aconn: psycopg.AsyncConnection
) -> None:
    await start(pg_dsn, schema, "idle")
    findings = Findings()

    await sql_checks.ownership(aconn, findings, quiet=True, live=frozenset())

    assert findings.checks["I10"].checked >= 1
    assert findings.violations == []


async def test_a_lease_still_held_after_the_quiet_phase_is_named(
    pg_dsn: str, schema: str, aconn: psycopg.AsyncConnection
) -> None:
    findings = await leased_to(pg_dsn, schema, aconn, "gone", quiet=True)

    assert any("still leased to gone" in v and "dead owner" in v for v in findings.violations)


async def test_mid_run_leases_are_not_judged_nor_counted(
    pg_dsn: str, schema: str, aconn: psycopg.AsyncConnection
) -> None:
    findings = await leased_to(pg_dsn, schema, aconn, "w", quiet=False)

    assert (findings.checks["I10"].checked, findings.violations) == (0, [])
