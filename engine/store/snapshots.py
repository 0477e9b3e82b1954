"""Snapshots of replayed state in the store: written with the transition that crosses an
interval, read back by whoever opens the instance (``engine.replay.snapshots`` says what
a snapshot is and when one is due).

The write is part of the crossing transition's own PostgreSQL transaction (a follow-up
of its statement, ``commits._after_write``), so a snapshot exists exactly when the
transition it describes committed: never a separate write that could land without it
or describe a position that was rolled back. Such a transition is therefore not sent as
one lone statement; it is one transition in ``SNAPSHOT_INTERVAL_EVENTS``.
"""

from __future__ import annotations

import psycopg

from engine.model.transitions import Transition
from engine.replay import snapshots
from engine.replay.snapshots import Snapshot
from engine.store.statements import snapshots as sql


def carried(transition: Transition) -> bool:
    """Whether writing ``transition`` also writes a snapshot of the state it ends in: it
    crosses an interval, and its builder gave that state (a ``Draft`` always does)."""
    return transition.state_after is not None and snapshots.due(
        transition.expected_sequence, transition.committed_sequence
    )


_TAKEN = "_snapshot"
"""Where a transition keeps the snapshot ``prepare`` encoded for it."""


def prepare(transition: Transition) -> None:
    """Encode the snapshot ``transition`` carries, if any, before its PostgreSQL
    transaction begins (the store does this where it checks a transition): encoding a
    large state takes a while, which is better not spent holding the instance's row
    lock and a lease's. A transition is frozen, so what is encoded cannot go stale."""
    if carried(transition) and _TAKEN not in transition.__dict__:
        assert transition.state_after is not None
        object.__setattr__(transition, _TAKEN, snapshots.take(transition.state_after))


async def write(conn: psycopg.AsyncConnection, transition: Transition) -> None:
    """Write the snapshot ``transition`` carries, in the caller's open transaction."""
    prepare(transition)
    taken: Snapshot = transition.__dict__[_TAKEN]
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


async def newest(conn: psycopg.AsyncConnection, instance_id: str) -> Snapshot | None:
    """The instance's newest snapshot, whatever fold wrote it (``restore`` judges it)."""
    row = await (await conn.execute(sql.NEWEST_SNAPSHOT, {"instance": instance_id})).fetchone()
    return None if row is None else Snapshot(instance_id, *row)
