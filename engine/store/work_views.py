"""Read-only views of work rows for operators: an instance's work, and held leases.

An operator looking at an attempt wants the row that carries it: due, leased (by whom,
under which fencing token, until when) or dead-lettered. A worker page wants the
leases each live worker holds. Both reads are bounded and ride existing indexes
(``work_instance_idx``, and ``work_lease_expiry_idx`` for the few leased rows);
nothing here writes or locks, and a row read here may already have moved on (it is a
view, never a fence).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from engine.model.canonical import utc
from engine.model.transitions import WorkKind
from engine.store.rows import WorkState, payload_fields, work_kind
from engine.store.statements import work_views as sql
from engine.store.store import Store
from engine.store.workers import running_targets

MAX_VIEW_ROWS = 500


@dataclass(frozen=True)
class WorkRow:
    """One work row as an operator sees it."""

    work_id: str
    kind: WorkKind | int
    instance_id: str
    sequence: int
    target: str
    state: WorkState
    deliveries: int
    """How many times the row was claimed (each claim bumps the fencing token)."""
    lease_owner: str
    token: int
    lease_expires_at: datetime | None
    available_at: datetime
    deadline: datetime
    failure_code: str
    completed_at: datetime | None
    payload: dict[str, Any]
    tenant_id: str = ""
    failure_detail: str = ""
    """What a dead letter's code cannot say (a code workflow's journal divergence)."""
    discarded: bool = False
    """A dead letter an operator discarded: resolved, and never run again."""

    @property
    def unresolved(self) -> bool:
        """A dead letter that waits for an operator to retry or discard it."""
        return self.state is WorkState.DEAD_LETTERED and not self.discarded

    @property
    def step(self) -> str:
        return str(self.payload.get("step", ""))

    @property
    def attempt(self) -> int:
        value = self.payload.get("attempt", 0)
        return value if isinstance(value, int) else 0

    @property
    def held_unleased(self) -> bool:
        """Parked by an incident hold before any worker ever leased it (token 0): no
        handler has run under it, whatever history says of its attempt's start."""
        return self.state is WorkState.HELD and self.token == 0

    def lease_live(self, now: datetime) -> bool:
        """Leased and not yet expired at ``now`` (the store's clock)."""
        return (
            self.state is WorkState.LEASED
            and self.lease_expires_at is not None
            and self.lease_expires_at > now
        )


async def instance_work(
    store: Store, instance_id: str, limit: int = MAX_VIEW_ROWS
) -> list[WorkRow]:
    """The newest ``limit`` work rows of ``instance_id``, newest first."""
    _check_limit(limit)
    async with store.connection() as conn:
        cur = await conn.execute(sql.INSTANCE_WORK, {"instance": instance_id, "limit": limit})
        rows = await cur.fetchall()
    return [_work_row(r) for r in rows]


async def held_leases(
    store: Store, owners: Collection[str], tenant: str | None = None, limit: int = MAX_VIEW_ROWS
) -> list[WorkRow]:
    """Leases held by ``owners`` (only ``tenant``'s work when given), by owner and expiry."""
    _check_limit(limit)
    if not owners:
        return []
    params = {"owners": sorted(set(owners)), "tenant": tenant, "limit": limit}
    async with store.connection() as conn:
        rows = await (await conn.execute(sql.HELD_LEASES, params)).fetchall()
    return [_work_row(r) for r in rows]


async def work_rows(
    store: Store, keys: Collection[tuple[str, str]]
) -> dict[tuple[str, str], WorkRow]:
    """The given work rows that exist, by their key (instance id, work id), at most
    MAX_VIEW_ROWS keys. No keys, no round trip."""
    pairs = sorted(set(keys))
    _check_limit(max(len(pairs), 1))
    if not pairs:
        return {}
    params = {"instances": [i for i, _ in pairs], "ids": [w for _, w in pairs]}
    async with store.reading() as conn:
        found = map(_work_row, await (await conn.execute(sql.WORK_ROWS, params)).fetchall())
    return {(r.instance_id, r.work_id): r for r in found}


def _check_limit(limit: int) -> None:
    if not 1 <= limit <= MAX_VIEW_ROWS:
        raise ValueError(f"limit must be from 1 to {MAX_VIEW_ROWS}")


def _work_row(row: tuple[Any, ...]) -> WorkRow:
    (work_id, kind, instance, sequence, target, state, attempts, owner, token) = row[:9]
    expires, available, deadline, code, completed, payload, tenant, detail, discarded = row[9:]
    return WorkRow(
        work_id=work_id,
        kind=work_kind(kind),
        instance_id=instance,
        sequence=sequence,
        target=target,
        state=WorkState(state),
        deliveries=attempts,
        lease_owner=owner,
        token=token,
        lease_expires_at=None if expires is None else utc(expires),
        available_at=utc(available),
        deadline=utc(deadline),
        failure_code=code,
        completed_at=None if completed is None else utc(completed),
        payload=payload_fields(payload),
        tenant_id=tenant,
        failure_detail=detail,
        discarded=bool(discarded),
    )


def unserved(rows: Iterable[WorkRow], running: Iterable[str]) -> tuple[str, ...]:
    """The targets of an instance's open work (``rows``) that no running worker runs
    (``running``, ``engine.store.workers.running_targets``): that work waits, due now or
    later, until a worker whose app registers its target starts, or (a machine's or a
    code workflow's version) until the instance is migrated to a version one runs. A
    rolling deploy that stops the old version's workers leaves exactly this behind, and
    nothing else says it: the instance only reads as waiting for its next step. Work
    without a target (a step list's timer) is run by any worker."""
    served = set(running)
    return tuple(
        sorted(
            {
                row.target
                for row in rows
                if row.state is WorkState.AVAILABLE and row.target and row.target not in served
            }
        )
    )


async def unserved_targets(store: Store, rows: Iterable[WorkRow]) -> tuple[str, ...]:
    """``unserved`` of the instance's work ``rows`` against the workers running now,
    which are read only when some of that work is open (most instance reads have none)."""
    rows = list(rows)
    if not any(row.state is WorkState.AVAILABLE for row in rows):
        return ()
    return unserved(rows, await running_targets(store))
