"""Work rows for integration tests, made the way the engine makes them.

Each instance is started by a real transition (``start_draft`` + ``decide`` + commit),
so its work row points at a real history event. Tests that need other due times,
deadlines or tenants adjust those columns in SQL afterwards: the lease code only reads
the row, and rebuilding transitions per test would obscure what is being tested.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from typing import Any

from engine.decide import lifecycle
from engine.model.definitions import Definition
from engine.model.registry import Registry
from engine.model.validation import parse_definition
from engine.modes import decide
from engine.store import leases
from engine.store.clock import Clock
from engine.store.store import Store
from engine.worker.leased_commits import Context, LeaseHolder
from engine.worker.loop import process

DEFINITION = parse_definition(
    {
        "name": "lease-test",
        "version": "1",
        "mode": "orchestration",
        "steps": [
            {
                "name": "charge",
                "kind": "activity",
                "target": "pay.charge",
                "timeout": "10s",
                "input_limit": 1000,
                "result_limit": 1000,
                "retry": {"max_attempts": 3, "initial_delay": "1s", "max_delay": "4s"},
            }
        ],
    }
)
REGISTRY = Registry([DEFINITION])


def activity_steps(name: str, steps: Sequence[str]) -> Definition:
    """Version 1 of ``name``: one activity per step in order, each targeting
    ``<prefix>.<step>`` where ``prefix`` is the name's part before its first dot."""
    prefix = name.split(".", 1)[0]
    step = {"kind": "activity", "timeout": "10s", "input_limit": 1000, "result_limit": 1000}
    return parse_definition(
        {
            "name": name,
            "version": "1",
            "mode": "orchestration",
            "steps": [{**step, "name": s, "target": f"{prefix}.{s}"} for s in steps],
        }
    )


ADJUST_WORK = """
UPDATE work
SET tenant_id = COALESCE(%(tenant)s, tenant_id),
    available_at = COALESCE(%(available_at)s, available_at),
    deadline = COALESCE(%(deadline)s, deadline)
WHERE work_id = ANY(%(ids)s)
"""
WORK_ROW = """
SELECT state, attempts, lease_token, lease_owner, lease_expires_at, failure_code,
       completed_at, available_at, deadline, tenant_id
FROM work WHERE work_id = %(id)s
"""
WORK_FIELDS = (
    "state",
    "attempts",
    "lease_token",
    "lease_owner",
    "lease_expires_at",
    "failure_code",
    "completed_at",
    "available_at",
    "deadline",
    "tenant_id",
)


@asynccontextmanager
async def open_store(
    dsn: str, schema: str, clock: Clock | None = None, max_size: int = 4
) -> AsyncIterator[Store]:
    """A store on the test's schema, closed afterwards."""
    store = await Store.open(dsn, schema, clock=clock, max_size=max_size)
    try:
        yield store
    finally:
        await store.close()


async def seed_work(
    store: Store,
    count: int,
    *,
    tenant: str | None = None,
    available_at: datetime | None = None,
    deadline: datetime | None = None,
    started_at: datetime | None = None,
) -> list[str]:
    """Start ``count`` instances, each with one due activity work row; return the work ids.

    ``tenant``, ``available_at`` and ``deadline`` override the columns the decision chose
    (due at the start time, deadline a day and the activity timeout later).
    """
    prefix = f"i-{uuid.uuid4().hex[:8]}"
    start = started_at or store.now()
    work_ids: list[str] = []
    for number in range(count):
        draft = lifecycle.start_draft(REGISTRY, DEFINITION, f"{prefix}-{number}", start, {})
        decide(draft)
        transition = draft.build("start")
        await store.commit(transition)
        work_ids.extend(item.work_id for item in transition.work)
    if (tenant, available_at, deadline) != (None, None, None):
        await adjust_work(
            store, work_ids, tenant=tenant, available_at=available_at, deadline=deadline
        )
    return work_ids


async def adjust_work(store: Store, work_ids: list[str], **columns: Any) -> None:
    """Set tenant, available_at and/or deadline of existing work rows."""
    params = {"tenant": None, "available_at": None, "deadline": None, **columns, "ids": work_ids}
    async with store.connection() as conn:
        await conn.execute(ADJUST_WORK, params)
        await conn.commit()


async def work_row(store: Store, work_id: str) -> dict[str, Any]:
    """The lease-relevant columns of one work row, by name."""
    async with store.connection() as conn:
        row = await (await conn.execute(WORK_ROW, {"id": work_id})).fetchone()
        await conn.rollback()
    assert row is not None, work_id
    return dict(zip(WORK_FIELDS, row, strict=True))


async def run_due(ctx: Context, lease_for: timedelta = timedelta(seconds=30)) -> int:
    """Claim and process (in this task) what is due now, until nothing is; returns how
    many items were processed. Work released for later is not due, so this ends."""
    processed = 0
    while claimed := await leases.claim(ctx.store, "worker", lease_for, 10):
        for lease in claimed:
            await process(ctx, LeaseHolder(lease, lease_for))
        processed += len(claimed)
    return processed


async def member(conn: Any, username: str, team: str, role: str) -> None:
    """A studio account ``username`` in ``team`` with ``role`` (the team made if new):
    a principal that stands (``engine.store.principals``)."""
    await conn.execute(
        "INSERT INTO studio_teams (team_id, name) VALUES (%s, %s) ON CONFLICT DO NOTHING",
        [team, team],
    )
    await conn.execute(
        "INSERT INTO studio_users (user_id, username, password_hash) VALUES (%s, %s, 'x')",
        [f"u-{username}", username],
    )
    await conn.execute(
        "INSERT INTO studio_memberships (user_id, team_id, role) VALUES (%s, %s, %s)",
        [f"u-{username}", team, role],
    )


async def inspect_lines(dsn: str, schema: str, instance: str) -> list[str]:
    """``wayline inspect INSTANCE`` as a person runs it: its lines."""
    command = ["-m", "engine.cli.main", "inspect", instance, "--dsn", dsn, "--schema", schema]
    shown = await asyncio.create_subprocess_exec(sys.executable, *command, stdout=-1, stderr=-1)
    out, err = await shown.communicate()
    assert shown.returncode == 0, err.decode()
    return out.decode().splitlines()
