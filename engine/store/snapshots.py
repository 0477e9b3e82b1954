"""Snapshots of replayed state in the store: written with the transition that crosses an
interval, read back by whoever opens the instance, with the history after it in the same
statement (``opening``); ``engine.replay.snapshots`` says what a snapshot is and when
one is due.

The write is part of the crossing transition's own PostgreSQL transaction (a follow-up
of its statement, ``commits._after_write``), so a snapshot exists exactly when the
transition it describes committed: never a separate write that could land without it
or describe a position that was rolled back. Such a transition is therefore not sent as
one lone statement; it is one transition in ``SNAPSHOT_INTERVAL_EVENTS``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import psycopg

from engine.model.snapshots import Snapshot
from engine.model.transitions import Transition
from engine.replay import snapshots
from engine.store.statements import snapshots as sql


def carried(transition: Transition) -> bool:
    """Whether writing ``transition`` also writes a snapshot of the state it ends in: it
    crosses an interval, and its builder gave that state (a ``Draft`` always does)."""
    return transition.state_after is not None and snapshots.due(
        transition.expected_sequence, transition.committed_sequence
    )


def prepared(transition: Transition) -> Transition:
    """``transition`` ready to write: when it carries a snapshot, a copy of it with the
    snapshot encoded (``Transition.snapshot``); otherwise (the usual case), itself.

    The store calls this where it checks transitions (``store.ready_to_write``), before
    their PostgreSQL transaction begins: encoding a large state takes a while, which is
    better not spent holding the instance's row lock and a lease's."""
    if not carried(transition) or transition.snapshot is not None:
        return transition
    return dataclasses.replace(transition, snapshot=_taken(transition))


def _taken(transition: Transition) -> Snapshot:
    assert transition.state_after is not None  # ``carried``
    return snapshots.take(transition.state_after)


async def write(conn: psycopg.AsyncConnection, transition: Transition) -> None:
    """Write the snapshot ``transition`` carries, in the caller's open transaction (one
    staged without ``prepared``, by code of the caller's own, is encoded here)."""
    taken = transition.snapshot or _taken(transition)
    await conn.execute(
        sql.WRITE_SNAPSHOT,
        {
            "instance": taken.instance_id,
            "sequence": taken.sequence,
            "fold_version": taken.fold_version,
            "digest": taken.digest,
            "state": taken.state,
            "at": transition.events[-1].occurred_at,
        },
    )


async def opening(
    conn: psycopg.AsyncConnection, instance_id: str, limit: int
) -> tuple[Snapshot | None, list[tuple[Any, ...]]]:
    """The instance's newest snapshot, whatever fold wrote it (``restore`` judges it),
    and at most ``limit`` history rows after it (after its start, without one). One
    statement reads both (``OPENING``), so opening an instance is one round trip, and
    they are of one point in time: no snapshot written meanwhile leaves a gap."""
    params = {"instance": instance_id, "limit": limit}
    rows = await (await conn.execute(sql.OPENING, params)).fetchall()
    history = [row[sql.SNAPSHOT_COLUMNS :] for row in rows]
    if rows and rows[0][sql.SNAPSHOT_COLUMNS - 1] is not None:
        return Snapshot(instance_id, *rows[0][: sql.SNAPSHOT_COLUMNS]), history[1:]
    return None, history
