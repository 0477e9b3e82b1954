"""Keeping incident holds: placing one, releasing it (whole or gradually), and the
sweep that spends a release's rate.

While a hold is in force no worker runs its instances' work. Placing it parks their
unleased work (``WorkState.HELD``); work written or leased later is parked as it goes
by migration 0017's trigger (a start's first step, the next step an attempt in flight
hands on, a retry or a dead worker's lease that a claim finds due), so a claim simply
never leases it. An attempt already leased runs on and records its outcome. A release
makes parked work that no hold covers any more due again (``UNPARK_FREED``): a timer
that fell due during the hold fires then. Releasing can be gradual: a count of
instances (``hold_exemptions`` lets them go, the hold stays), or a rate per second
that every worker's sweep spends (``drain``) until nothing is left parked, when the
hold ends. Each placement and release is kept with who, why and when.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from engine.model.description import HeldStarts, held_starts
from engine.model.holds import HoldNotFound, HoldReleased, HoldScope, ReleaseMode
from engine.model.instance import Instance
from engine.model.limits import MAX_PAGE_ITEMS
from engine.model.words import counted
from engine.store.statements import holds as sql
from engine.store.store import Store
from engine.store.transactions import transact
from engine.store.work_views import WorkRow

MAX_DRAINS_PER_SWEEP = 20
"""Draining holds one sweep spends the rate of; the rest wait for the next sweep."""


@dataclass(frozen=True)
class HoldRelease:
    """One release of a hold: all of it, a count of instances or a rate per second."""

    release_id: str
    hold_id: str
    mode: ReleaseMode
    amount: float
    actor: str
    reason: str
    released_at: datetime


@dataclass(frozen=True)
class Hold:
    """A hold as kept, with how many instances wait in its backlog now."""

    hold_id: str
    scope: HoldScope
    actor: str
    reason: str
    placed_at: datetime
    released_at: datetime | None
    drain_rate: float | None
    backlog: int
    releases: tuple[HoldRelease, ...] = ()

    @property
    def active(self) -> bool:
        return self.released_at is None

    @property
    def left(self) -> str:
        """Its backlog, and the rate it drains at while a release at a rate runs."""
        rate = f", draining at {self.drain_rate:g}/s" if self.drain_rate and self.active else ""
        return f"backlog {counted(self.backlog, 'instance')}{rate}"

    def released_answer(self, due: int) -> str:
        """What a release that made ``due`` work items due at once answers, on the
        command line and in the studio alike: a release at a rate makes none due at
        once, and only the backlog left and its rate say that it let work go."""
        return f"{counted(due, 'work item')} due again; {self.left}; " + (
            "in force" if self.active else "released"
        )


async def place(store: Store, scope: HoldScope, actor: str, reason: str) -> Hold:
    """Place a hold (checked by the caller) and park the work it covers."""
    params = _params(store, hold=uuid.uuid4().hex, tenant=scope.team, actor=actor)
    params.update(name=scope.name, version=scope.version, reason=reason)

    async def body(conn: psycopg.AsyncConnection) -> Hold:
        await conn.execute(sql.INSERT_HOLD, params)
        await conn.execute(sql.PARK_DUE, params)
        return await _read(conn, params)

    return await transact(store, "hold", body)


async def release(
    store: Store,
    team: str,
    hold_id: str,
    mode: ReleaseMode,
    amount: float,
    actor: str,
    reason: str,
) -> tuple[Hold, int]:
    """Release the team's hold ``hold_id`` as ``mode`` says (checked by the caller);
    the hold as it is now and how many work items became due. HoldNotFound,
    HoldReleased."""
    params = _params(store, hold=hold_id, tenant=team, actor=actor)
    params.update(release=uuid.uuid4().hex, mode=mode.value, amount=amount, reason=reason)
    params.update(count=int(amount))

    async def body(conn: psycopg.AsyncConnection) -> tuple[Hold, int]:
        row = await (await conn.execute(sql.LOCK_HOLD, params)).fetchone()
        if row is None:
            raise HoldNotFound(f"no hold {hold_id} in this team")
        if not row[0]:
            raise HoldReleased(f"hold {hold_id} was released already")
        await conn.execute(sql.INSERT_RELEASE, params)
        step = {ReleaseMode.ALL: sql.END_HOLD, ReleaseMode.COUNT: sql.EXEMPT_OLDEST}
        await conn.execute(step.get(mode, sql.START_DRAIN), params)
        resumed = await _unpark(conn, store)
        return await _read(conn, params), resumed

    return await transact(store, f"release of hold {hold_id}", body)


async def drain(store: Store) -> int:
    """Spend the rate of draining holds (each at most once per sweep, by one sweeper),
    then, while no hold is in force, make due any work still parked; how many work
    items became due. A hold with nothing left parked ends.

    The second part mends a race no single statement can see. A claim that parks work
    decides by its snapshot, so it can park work while a release that ends the hold
    commits: neither sees the other's write, and the work would stay parked with no
    hold over it, its instance stuck. The sweep makes such work due within one sweep
    once no hold is in force. (Work a claim parks while a release by count lets its
    instance go, the hold staying, waits until the next release or the hold's end,
    which unpark all they free: checking every parked row at every sweep would cost
    each worker the whole backlog twice a second during an incident.)"""
    total = 0
    seen: set[str] = set()
    for _ in range(MAX_DRAINS_PER_SWEEP):
        spent = await transact(store, "hold drain", lambda conn: _drain_one(conn, store, seen))
        if spent is None:
            break
        total += spent
    unparked = await transact(
        store, "unparking", lambda conn: _unpark(conn, store, sql.UNPARK_STRANDED)
    )
    return total + unparked


async def _drain_one(conn: psycopg.AsyncConnection, store: Store, seen: set[str]) -> int | None:
    params = _params(store)
    row = await (await conn.execute(sql.DRAINING, params)).fetchone()
    if row is None or row[0] in seen:
        return None
    seen.add(row[0])
    params.update(hold=row[0], count=row[2], release="", spent=row[2])
    params["release"] = await _drain_release(conn, params)
    if row[2]:
        await conn.execute(sql.EXEMPT_OLDEST, params)
        await conn.execute(sql.SPEND_DRAIN, params)
    await conn.execute(sql.END_IF_DRAINED, params)
    return await _unpark(conn, store)


async def _drain_release(conn: psycopg.AsyncConnection, params: dict[str, Any]) -> str:
    """The id of the rate release being spent, which the exemptions name."""
    rows = await (await conn.execute(sql.RELEASES, params)).fetchall()
    return next((r[0] for r in reversed(rows) if r[2] == ReleaseMode.RATE), "")


async def find(store: Store, team: str, hold_id: str) -> Hold | None:
    """The team's hold ``hold_id`` with its releases, or None."""
    async with store.reading() as conn:
        try:
            return await _read(conn, {"hold": hold_id, "tenant": team})
        except HoldNotFound:
            return None


async def recent(
    store: Store, team: str, active_only: bool = False, limit: int = MAX_PAGE_ITEMS
) -> list[Hold]:
    """The team's holds, the active ones first then the newest; with backlogs and
    releases."""
    if not 1 <= limit <= MAX_PAGE_ITEMS:
        raise ValueError(f"limit must be from 1 to {MAX_PAGE_ITEMS}")
    params = {"tenant": team, "active": active_only, "limit": limit}
    async with store.reading() as conn:
        rows = await (await conn.execute(sql.RECENT_HOLDS, params)).fetchall()
        holds = {"holds": [r[0] for r in rows]}
        releases = await (await conn.execute(sql.RELEASES_OF, holds)).fetchall()
    return [_hold(r, tuple(_release(x) for x in releases if x[1] == r[0])) for r in rows]


async def covering(store: Store, team: str, name: str = "", version: str = "") -> list[Hold]:
    """The active holds over the team's ``name`` (any version when ``version`` is ''),
    or over ``name@version``, or (``name`` '') the team's own team-wide ones."""
    return await _active(store, sql.COVERING, {"tenant": team, "name": name, "version": version})


async def instance_holds(store: Store, team: str, instance_id: str) -> list[Hold]:
    """The active holds that park the team's instance ``instance_id``: unlike ``covering``
    its definition, not those whose gradual release let this instance go, which runs."""
    return await _active(store, sql.INSTANCE_HOLDS, {"tenant": team, "instance": instance_id})


async def started_under_hold(store: Store, state: Instance, work: Sequence[WorkRow]) -> HeldStarts:
    """The attempts of ``state`` recorded started that a hold keeps from running, with
    what the holds that park the instance cover: of its ``work`` (its rows as read),
    those an incident hold parked before any worker leased them. The holds are read
    only when there is such an attempt."""
    parked = [(row.kind, row.step, row.attempt) for row in work if row.held_unleased]
    found = held_starts(state, parked)
    if not found:
        return found
    team = next(row.tenant_id for row in work if row.held_unleased)
    holds = await instance_holds(store, team, state.instance_id)
    return held_starts(state, parked, [hold.scope.label for hold in holds])


async def _active(store: Store, statement: str, params: dict[str, Any]) -> list[Hold]:
    async with store.reading() as conn:
        rows = await (await conn.execute(statement, params)).fetchall()
    return [_hold(r) for r in rows]


async def _unpark(
    conn: psycopg.AsyncConnection, store: Store, statement: str = sql.UNPARK_FREED
) -> int:
    freed = (await conn.execute(statement, _params(store))).rowcount
    if freed:
        await conn.execute(sql.NOTIFY, {"channel": store.channel})
    return freed


async def _read(conn: psycopg.AsyncConnection, params: dict[str, Any]) -> Hold:
    row = await (await conn.execute(sql.HOLD_BY_ID, params)).fetchone()
    if row is None:
        raise HoldNotFound(f"no hold {params['hold']} in this team")
    releases = await (await conn.execute(sql.RELEASES, params)).fetchall()
    return _hold(row, tuple(_release(r) for r in releases))


def _params(store: Store, **values: Any) -> dict[str, Any]:
    return {"now": store.clock.sql_now(), **values}


def _hold(row: tuple[Any, ...], releases: tuple[HoldRelease, ...] = ()) -> Hold:
    hold_id, team, name, version, actor, reason, placed, released, rate, backlog = row
    scope = HoldScope(team, name, version)
    return Hold(hold_id, scope, actor, reason, placed, released, rate, backlog, releases)


def _release(row: tuple[Any, ...]) -> HoldRelease:
    release_id, hold_id, mode, amount, actor, reason, at = row
    return HoldRelease(release_id, hold_id, ReleaseMode(mode), amount, actor, reason, at)
