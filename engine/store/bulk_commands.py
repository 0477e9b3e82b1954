"""Keeping bulk operator actions: what was asked, and what came of it per instance.

The instances' own changes are ordinary audited operator commands (their history);
these rows only tie them together and keep each instance's result, including the ones
that recorded nothing (unchanged, refused and why), which no history holds. The bulk id
is the caller's (a form carries it from its preview), so a bulk is recorded once: the
same bulk again is found by its fingerprint, another one under the same id is a
conflict. An instance's first result is kept; a repeat never overwrites it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from engine.model.canonical import canonical_json, digest
from engine.model.errors import WaylineError
from engine.model.instance import InstanceStatus
from engine.model.limits import MAX_PAGE_ITEMS
from engine.store.statements import bulk_commands as sql
from engine.store.store import Store
from engine.store.transactions import transact

OUTCOMES = ("done", "unchanged", "refused")


class BulkConflict(WaylineError):
    """The bulk id is already recorded for another bulk (another action, selection, actor
    or reason, or another team's)."""


@dataclass(frozen=True)
class BulkCommand:
    """One bulk operator action as asked: ``arguments`` are its effect's other fields."""

    bulk_id: str
    tenant_id: str
    action: str
    step: str
    arguments: dict[str, Any]
    actor: str
    reason: str
    instance_ids: tuple[str, ...]
    created_at: datetime | None = None

    @property
    def fingerprint(self) -> str:
        """Everything asked, so a repeat of this bulk is told from another under its id."""
        fields = [self.tenant_id, self.action, self.step, self.arguments, self.actor]
        return digest([*fields, self.reason, list(self.instance_ids)])


@dataclass(frozen=True)
class BulkResult:
    """What a bulk action did to one instance."""

    instance_id: str
    outcome: str
    """done, unchanged or refused (``OUTCOMES``)."""
    detail: str
    command_id: str
    status_before: InstanceStatus
    status_after: InstanceStatus
    recorded_at: datetime | None = None


async def record_bulk(store: Store, bulk: BulkCommand) -> BulkCommand:
    """Record ``bulk`` unless it is recorded already: the stored bulk (with its time).
    BulkConflict when its id holds another action, reason or selection."""
    params = {
        "bulk": bulk.bulk_id,
        "tenant": bulk.tenant_id,
        "action": bulk.action,
        "step": bulk.step,
        "arguments": canonical_json(bulk.arguments),
        "actor": bulk.actor,
        "reason": bulk.reason,
        "instances": list(bulk.instance_ids),
        "fingerprint": bulk.fingerprint,
        "now": store.clock.sql_now(),
    }

    async def body(conn: Any) -> tuple | None:
        found = await (await conn.execute(sql.BULK_BY_ID, params)).fetchone()
        if found is not None:  # taken again: nothing to write, so nothing to lose
            return found
        await conn.execute(sql.INSERT_BULK, params)
        return await (await conn.execute(sql.BULK_BY_ID, params)).fetchone()

    row = await transact(store, f"bulk {bulk.bulk_id}", body)
    stored = _bulk(row)
    if row[8] != bulk.fingerprint:
        raise BulkConflict(_taken(bulk, stored))
    return stored


def _taken(bulk: BulkCommand, stored: BulkCommand) -> str:
    """Why ``bulk`` cannot have its id: what it was confirmed as, by whom and why (the
    actor or reason may be all that differs, and a caller must tell its own earlier
    confirmation from someone else's); of another team's bulk, nothing but that."""
    again = "a new bulk action needs a new bulk id (a preview draws one)"
    if stored.tenant_id != bulk.tenant_id:
        return f"bulk id {bulk.bulk_id} is taken: {again}"
    count = len(stored.instance_ids)
    return (
        f"bulk command {bulk.bulk_id} was already confirmed as {stored.action} of {count} "
        f"instance{'' if count == 1 else 's'} by {stored.actor}: {stored.reason}; {again}"
    )


async def record_result(store: Store, bulk_id: str, result: BulkResult) -> None:
    """Keep ``result`` unless the instance has one in this bulk already."""
    params = {
        "bulk": bulk_id,
        "instance": result.instance_id,
        "outcome": result.outcome,
        "detail": result.detail,
        "command": result.command_id,
        "before": int(result.status_before),
        "after": int(result.status_after),
        "now": store.clock.sql_now(),
    }

    async def body(conn: Any) -> None:
        await conn.execute(sql.INSERT_RESULT, params)

    await transact(store, f"bulk result {bulk_id}", body, single_statement=True)


async def find_bulk(store: Store, bulk_id: str) -> tuple[BulkCommand, list[BulkResult]] | None:
    """The bulk recorded under ``bulk_id`` and its results so far, or None."""
    async with store.reading() as conn:
        row = await (await conn.execute(sql.BULK_BY_ID, {"bulk": bulk_id})).fetchone()
        if row is None:
            return None
        rows = await (await conn.execute(sql.RESULTS, {"bulk": bulk_id})).fetchall()
    return _bulk(row), [_result(r) for r in rows]


async def recent_bulks(store: Store, tenant: str, limit: int = MAX_PAGE_ITEMS) -> list[BulkCommand]:
    """The team's newest ``limit`` bulk actions, newest first."""
    if not 1 <= limit <= MAX_PAGE_ITEMS:
        raise ValueError(f"limit must be from 1 to {MAX_PAGE_ITEMS}")
    async with store.reading() as conn:
        cur = await conn.execute(sql.RECENT_BULKS, {"tenant": tenant, "limit": limit})
        rows = await cur.fetchall()
    return [_bulk(r) for r in rows]


def _bulk(row: tuple) -> BulkCommand:
    bulk_id, tenant, action, step, arguments, actor, reason, instances, _, created = row
    return BulkCommand(
        bulk_id,
        tenant,
        action,
        step,
        json.loads(arguments),
        actor,
        reason,
        tuple(instances),
        created,
    )


def _result(row: tuple) -> BulkResult:
    instance_id, outcome, detail, command_id, before, after, recorded = row
    return BulkResult(
        instance_id,
        outcome,
        detail,
        command_id,
        InstanceStatus(before),
        InstanceStatus(after),
        recorded,
    )
