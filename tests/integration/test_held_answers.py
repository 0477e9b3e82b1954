"""The drill proxy's hold for U1: a transition's COMMIT answer waits for a renewal's.

U1 catches a worker that takes the stale answer to its own lease's renewal for a lost
lease, but only if that renewal is answered while the commit's answer is still out.
These tests show the proxy makes that so on a real server, whatever the timing.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import psycopg
import pytest
from psycopg import sql

from verification.proxy import DrillProxy

TRANSITION = "INSERT INTO transitions (n) VALUES (1)"
RENEWAL = "UPDATE work w SET lease_expires_at = LEAST(now(), w.lease_expires_at)"
"""Statements of the shapes the proxy tells apart (``verification.wire``)."""
WAIT_SECONDS = 20.0


@pytest.fixture
async def proxy(pg_dsn: str, schema_name: str) -> AsyncIterator[DrillProxy]:
    """A proxy holding answers for renewals, before a schema with the two tables."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema_name)))
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema_name)))
        conn.execute("CREATE TABLE transitions (n int)")
        conn.execute("CREATE TABLE work (lease_expires_at timestamptz)")
    async with DrillProxy(pg_dsn) as running:
        running.hold_for_renewal = True
        yield running


async def connect(proxy: DrillProxy, schema: str) -> psycopg.AsyncConnection:
    conn = await psycopg.AsyncConnection.connect(proxy.conninfo(), autocommit=True)
    await conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
    return conn


async def commit_a_transition(conn: psycopg.AsyncConnection, answered: list[str]) -> None:
    async with conn.transaction():
        await conn.execute(TRANSITION)
    answered.append("transition")


async def renew(conn: psycopg.AsyncConnection, shape: str) -> None:
    """A renewal as a statement alone, or in a transaction that commits, or that rolls
    back (as the engine's does when it finds its lease stale)."""
    if shape == "alone":
        await conn.execute(RENEWAL)
        return
    with contextlib.suppress(psycopg.errors.RaiseException):
        async with conn.transaction():
            await conn.execute(RENEWAL)
            if shape == "rolled back":
                await conn.execute("DO $$ BEGIN RAISE 'stale lease'; END $$")


@pytest.mark.parametrize("shape", ["alone", "committed", "rolled back"])
async def test_a_transitions_answer_comes_after_a_renewal_sent_after_it(
    proxy: DrillProxy, schema_name: str, shape: str
) -> None:
    proxy.renewal_wait = WAIT_SECONDS * 2  # only the renewal can end the hold in time
    committer, renewer = await connect(proxy, schema_name), await connect(proxy, schema_name)
    answered: list[str] = []
    async with asyncio.timeout(WAIT_SECONDS):
        committing = asyncio.create_task(commit_a_transition(committer, answered))
        await proxy.first_hold()
        await renewer.execute("SELECT 1 FROM work")  # not a renewal: the hold goes on
        await renew(renewer, shape)
        answered.append("renewal")
        await committing
    await committer.close()
    await renewer.close()

    assert answered == ["renewal", "transition"]
    assert (proxy.held, proxy.renewed) == (1, 1), "a renewal released the answer"


async def test_a_held_answer_no_renewal_comes_for_is_let_go_and_counted(
    proxy: DrillProxy, schema_name: str
) -> None:
    """A drill then knows the race it wanted did not happen (U1 fails on it)."""
    proxy.renewal_wait = 0.1
    committer = await connect(proxy, schema_name)
    answered: list[str] = []
    async with asyncio.timeout(WAIT_SECONDS):
        await commit_a_transition(committer, answered)
    await committer.close()

    assert answered == ["transition"]
    assert (proxy.held, proxy.renewed) == (1, 0)
