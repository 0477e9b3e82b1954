"""Saved drill plans and their finished runs, per team (migration 0025).

Saving never overwrites: it adds the next version of the plan's name, so an earlier
version stays what it was when a run or a comparison named it. A plan's finished run
keeps the drill's verdict and, per pin, whether it fired and, when it did, its cell's
own verdict and why (``verification.attribution``), so the coverage heatmap reads one
table instead of every run's scorecard.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from engine import Store

MAX_PLAN_VERSIONS_LISTED = 200
"""Plan versions a version's page lists (newest first)."""
MAX_RUNS_READ = 200
"""Finished plan runs the heatmap reads for one definition version (newest first)."""

SAVING_ONE_NAME = "SELECT pg_advisory_xact_lock(hashtext(%s))"
"""Two saves of one name at once take turns, so each gets its own next version."""
SAVE = """
INSERT INTO studio_drill_plans (team_id, name, version, definition, document, saved_by)
SELECT %(team)s, %(name)s, coalesce(max(version), 0) + 1, %(definition)s, %(document)s, %(by)s
FROM studio_drill_plans WHERE team_id = %(team)s AND name = %(name)s
RETURNING version, saved_at
"""
COLUMNS = "name, version, definition, document, saved_by, saved_at"
GET = f"SELECT {COLUMNS} FROM studio_drill_plans WHERE team_id = %s AND name = %s AND version = %s"
LATEST = f"""
SELECT {COLUMNS} FROM studio_drill_plans WHERE team_id = %s AND name = %s
ORDER BY version DESC LIMIT 1
"""
LIST = f"""
SELECT {COLUMNS} FROM studio_drill_plans
WHERE team_id = %s AND (%s::text IS NULL OR definition = %s)
ORDER BY saved_at DESC, name, version DESC LIMIT %s
"""
RECORD_RUN = """
INSERT INTO studio_drill_plan_runs
    (team_id, run_id, plan_name, plan_version, definition, verdict, pins, started_by)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING
"""
RUNS = """
SELECT run_id, plan_name, plan_version, verdict, pins, finished_at FROM studio_drill_plan_runs
WHERE team_id = %s AND definition = %s ORDER BY finished_at DESC LIMIT %s
"""


@dataclass(frozen=True)
class SavedPlan:
    """One version of a team's plan: its document is what ``--plan`` reads."""

    name: str
    version: int
    definition: str
    document: dict[str, Any]
    saved_by: str
    saved_at: datetime

    @property
    def label(self) -> str:
        return f"{self.name} v{self.version}"


@dataclass(frozen=True)
class PlanRun:
    """A finished run of a plan version: its verdict and, per pin, whether it fired (and
    a fired one's ``verdict`` and ``why``: its cell's own, in runs recorded since)."""

    run_id: str
    plan_name: str
    plan_version: int
    verdict: str
    pins: list[dict[str, Any]]
    finished_at: datetime


async def save(
    store: Store, team: str, name: str, definition: str, document: dict[str, Any], by: str
) -> SavedPlan:
    """The plan saved as the next version of ``name`` in the team."""
    params = {
        "team": team, "name": name, "definition": definition,
        "document": json.dumps(document), "by": by,
    }  # fmt: skip
    async with store.connection() as conn, conn.transaction():
        await conn.execute(SAVING_ONE_NAME, (f"drill-plan:{team}:{name}",))
        row = await (await conn.execute(SAVE, params)).fetchone()
    assert row is not None  # INSERT ... SELECT of an aggregate always yields one row
    return SavedPlan(name, row[0], definition, document, by, row[1])


async def get(store: Store, team: str, name: str, version: int | None = None) -> SavedPlan | None:
    """One version of a plan (its latest when ``version`` is None), or None."""
    query, params = (LATEST, (team, name)) if version is None else (GET, (team, name, version))
    async with store.connection() as conn:
        row = await (await conn.execute(query, params)).fetchone()
    return SavedPlan(*row) if row else None


async def listed(store: Store, team: str, definition: str | None = None) -> list[SavedPlan]:
    """The team's plan versions (of one definition version when given), newest first."""
    params = (team, definition, definition, MAX_PLAN_VERSIONS_LISTED)
    async with store.connection() as conn:
        rows = await (await conn.execute(LIST, params)).fetchall()
    return [SavedPlan(*row) for row in rows]


async def record_run(
    store: Store, team: str, plan: SavedPlan, run_id: str, verdict: str,
    pins: list[dict[str, Any]], by: str,
) -> None:  # fmt: skip
    """Remember a finished run of ``plan`` (once per run)."""
    params = (team, run_id, plan.name, plan.version, plan.definition, verdict,
              json.dumps(pins), by)  # fmt: skip
    async with store.connection() as conn:
        await conn.execute(RECORD_RUN, params)


async def runs_of(store: Store, team: str, definition: str) -> list[PlanRun]:
    """The finished plan runs of a definition version, newest first."""
    async with store.connection() as conn:
        rows = await (await conn.execute(RUNS, (team, definition, MAX_RUNS_READ))).fetchall()
    return [PlanRun(*row) for row in rows]
