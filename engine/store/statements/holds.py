"""Statements of incident holds: see ``engine.store.holds``. Which instance a hold
covers is migration 0017's ``hold_covers`` and ``instance_held``, written once there."""

from __future__ import annotations

from engine.store.clock import NOW_SQL as NOW
from engine.store.rows import WorkState

INSERT_HOLD = f"""
INSERT INTO holds (hold_id, tenant_id, name, version, placed_by, reason, placed_at)
VALUES (%(hold)s, %(tenant)s, %(name)s, %(version)s, %(actor)s, %(reason)s, {NOW})
"""

PARK_DUE = f"""
UPDATE work w SET state = {WorkState.HELD}
WHERE w.state = {WorkState.AVAILABLE} AND w.tenant_id = %(tenant)s
  AND instance_held(w.instance_id)
"""
"""Park the team's unleased work that a hold placed in this transaction covers; work
written or leased later is parked as it goes (the trigger)."""

BACKLOG = f"""
(SELECT count(DISTINCT i.instance_id) FROM work w
 JOIN instances i ON i.instance_id = w.instance_id
 WHERE h.released_at IS NULL AND w.state = {WorkState.HELD} AND hold_covers(h, i))
"""
"""How many instances of hold ``h`` have parked work and wait for its release: none once
it is released, even while another hold over them keeps their work parked."""

HOLD_COLUMNS = f"""
SELECT h.hold_id, h.tenant_id, h.name, h.version, h.placed_by, h.reason, h.placed_at,
       h.released_at, h.drain_rate, {BACKLOG}
FROM holds h
"""

HOLD_BY_ID = HOLD_COLUMNS + "WHERE h.hold_id = %(hold)s AND h.tenant_id = %(tenant)s"

LOCK_HOLD = """
SELECT released_at IS NULL FROM holds
WHERE hold_id = %(hold)s AND tenant_id = %(tenant)s
FOR UPDATE
"""

RECENT_HOLDS = (
    HOLD_COLUMNS
    + """WHERE h.tenant_id = %(tenant)s
  AND (h.released_at IS NULL OR NOT %(active)s)
ORDER BY h.released_at IS NULL DESC, h.placed_at DESC, h.hold_id
LIMIT %(limit)s"""
)
"""A team's holds, the active ones first (``holds_recent_idx``)."""

COVERING = (
    HOLD_COLUMNS
    + """WHERE h.released_at IS NULL AND h.tenant_id = %(tenant)s
  AND (h.name = '' OR h.name = %(name)s)
  AND (h.version = '' OR %(version)s = '' OR h.version = %(version)s)
ORDER BY h.placed_at, h.hold_id"""
)
"""The active holds over a name (any of its versions when ``version`` is '') or one of
its versions: what a page about them shows. ``name`` '' asks for the team's holds."""

INSTANCE_HOLDS = (
    HOLD_COLUMNS
    + """JOIN instances held ON held.instance_id = %(instance)s AND held.tenant_id = h.tenant_id
WHERE h.released_at IS NULL AND h.tenant_id = %(tenant)s AND hold_covers(h, held)
ORDER BY h.placed_at, h.hold_id"""
)
"""The active holds that park one instance's work: over its name, version or team, less
those a gradual release let it go from (``hold_covers``)."""

RELEASE_COLUMNS = """
SELECT release_id, hold_id, mode, amount, released_by, reason, released_at
FROM hold_releases
"""

RELEASES = RELEASE_COLUMNS + "WHERE hold_id = %(hold)s ORDER BY released_at, release_id"

RELEASES_OF = RELEASE_COLUMNS + "WHERE hold_id = ANY(%(holds)s) ORDER BY released_at, release_id"

INSERT_RELEASE = f"""
INSERT INTO hold_releases (release_id, hold_id, mode, amount, released_by, reason,
                           released_at)
VALUES (%(release)s, %(hold)s, %(mode)s, %(amount)s, %(actor)s, %(reason)s, {NOW})
"""

END_HOLD = f"UPDATE holds SET released_at = {NOW} WHERE hold_id = %(hold)s"

START_DRAIN = f"""
UPDATE holds SET drain_rate = %(amount)s, drain_budget = 0, drain_spent_at = {NOW}
WHERE hold_id = %(hold)s
"""

EXEMPT_OLDEST = f"""
INSERT INTO hold_exemptions (hold_id, instance_id, release_id, resumed_at)
SELECT %(hold)s, b.instance_id, %(release)s, {NOW} FROM (
    SELECT i.instance_id, min(w.available_at) AS due FROM holds h
    JOIN instances i ON i.tenant_id = h.tenant_id
    JOIN work w ON w.instance_id = i.instance_id AND w.state = {WorkState.HELD}
    WHERE h.hold_id = %(hold)s AND hold_covers(h, i)
    GROUP BY i.instance_id
    ORDER BY due, i.instance_id
    LIMIT %(count)s
) b
ON CONFLICT DO NOTHING
"""
"""Let the hold's ``count`` longest-waiting instances go (the oldest parked work first)."""

_UNPARK = f"""
UPDATE work w
SET state = {WorkState.AVAILABLE},
    deadline = GREATEST(w.deadline, {NOW} + (w.deadline - w.available_at))
WHERE w.state = {WorkState.HELD} AND """

UNPARK_FREED = _UNPARK + "NOT instance_held(w.instance_id)"
"""Parked work that no hold covers any more becomes due again at its own time: a timer
due during the hold fires now, one due later at its time. Its deadline is moved so that
it has at least its whole window from now: the hold's time is not spent from it."""

UNPARK_RESUMED = _UNPARK + "w.instance_id = %(instance)s AND NOT instance_held(w.instance_id)"
"""``UNPARK_FREED`` of one instance, in the transaction that resumes it: migrated (while
paused, as every migration is) to a version no hold covers, its parked work is due again
(it waited for a release of the old version's hold, which no longer concerns it, and
said nothing). Not at the migration itself: a worker would claim the work of the still
paused instance and push it back past the resume."""

UNPARK_STRANDED = _UNPARK + "NOT EXISTS (SELECT 1 FROM holds WHERE released_at IS NULL)"
"""``UNPARK_FREED`` of every parked row while no hold is in force (``holds.drain``):
one test of the active holds, and an empty index when nothing is parked, so every
sweep can afford it."""

DRAINING = f"""
UPDATE holds
SET drain_budget = LEAST(GREATEST(drain_rate, 1),
                         drain_budget + drain_rate
                             * extract(epoch FROM {NOW} - drain_spent_at)::float8),
    drain_spent_at = {NOW}
WHERE hold_id = (SELECT hold_id FROM holds
                 WHERE released_at IS NULL AND drain_rate IS NOT NULL
                 ORDER BY drain_spent_at, hold_id LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING hold_id, tenant_id, floor(drain_budget)::bigint
"""
"""One draining hold no other sweep holds, its allowance grown by its rate for the time
since it was last spent (at most one second's worth, and at least one instance, so a
slow rate still lets one go): the sweep spends the whole part of it."""

SPEND_DRAIN = """
UPDATE holds SET drain_budget = drain_budget - %(spent)s WHERE hold_id = %(hold)s
"""

END_IF_DRAINED = f"""
UPDATE holds h SET released_at = {NOW}
WHERE h.hold_id = %(hold)s AND h.released_at IS NULL AND {BACKLOG} = 0
"""
"""A draining hold with nothing left parked ends: its release is complete."""

NOTIFY = "SELECT pg_notify(%(channel)s, '')"
