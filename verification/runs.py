"""Drill runs and their scorecards in PostgreSQL (``migrations/0004_drills.sql``).

A campaign is recorded as it goes: a ``drill_runs`` row when it starts, one
``drill_results`` row per drill as each finishes (so the studio can watch a run), and
the scorecard (text and JSON) when it ends. ``list_runs`` and ``get_run`` are what the
studio reads; both are keyset/bounded like every other list in Wayline.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from engine.store.errors import StoreUnavailable
from engine.store.store import Store

INSERT_RUN = """
INSERT INTO drill_runs (run_id, team_id, profile, seed, requested, target, status,
                        drills_total)
VALUES (%(run)s, %(team)s, %(profile)s, %(seed)s, %(requested)s, %(target)s, 'running',
        %(total)s)
"""
INSERT_RESULT = """
INSERT INTO drill_results (run_id, drill_id, family, title, seed, verdict, seconds,
                           failures, known_bug, reproduce)
VALUES (%(run)s, %(id)s, %(family)s, %(title)s, %(seed)s, %(verdict)s, %(seconds)s,
        %(failures)s, %(known_bug)s, %(reproduce)s)
ON CONFLICT (run_id, drill_id) DO UPDATE
SET verdict = EXCLUDED.verdict, seconds = EXCLUDED.seconds, failures = EXCLUDED.failures,
    known_bug = EXCLUDED.known_bug, reproduce = EXCLUDED.reproduce
"""
FINISH_RUN = """
UPDATE drill_runs
SET status = %(status)s, finished_at = now(), passed = %(passed)s, failed = %(failed)s,
    not_run = %(not_run)s, scorecard_text = %(text)s, scorecard = %(card)s
WHERE run_id = %(run)s
"""
FAIL_RUN = """
UPDATE drill_runs SET status = %(status)s, finished_at = now(), error = %(error)s
WHERE run_id = %(run)s
"""
RUN_COLUMNS = """run_id, team_id, profile, seed, requested, target, status, started_at,
    finished_at, drills_total, passed, failed, not_run, error"""
LIST_RUNS = f"""
SELECT {RUN_COLUMNS} FROM drill_runs
WHERE (%(team)s::text IS NULL OR team_id = %(team)s)
  AND (%(before_at)s::timestamptz IS NULL
       OR (started_at, run_id) < (%(before_at)s, %(before_id)s))
ORDER BY started_at DESC, run_id DESC
LIMIT %(limit)s
"""
GET_RUN = f"SELECT {RUN_COLUMNS}, scorecard_text, scorecard FROM drill_runs WHERE run_id = %(run)s"
GET_RESULTS = """
SELECT drill_id, family, title, seed, verdict, seconds, failures, known_bug, reproduce
FROM drill_results WHERE run_id = %(run)s ORDER BY finished_at, drill_id
"""
MAX_LIST = 100
RETRIES = 5


@dataclass(frozen=True)
class RunSummary:
    """A ``drill_runs`` row: what a list of runs shows without reading any result, so a
    long history of campaigns pages cheaply."""

    run_id: str
    team_id: str
    profile: str
    seed: int
    requested: list[str]
    target: str
    status: str
    started_at: datetime
    finished_at: datetime | None
    drills_total: int
    passed: int
    failed: int
    not_run: int
    error: str


@dataclass(frozen=True)
class RunDetail:
    """One run with its per-drill results and, once it ended, its scorecard (text and
    JSON): what a run's page and the comparison of two runs read."""

    summary: RunSummary
    results: list[dict[str, Any]] = field(default_factory=list)
    scorecard_text: str | None = None
    scorecard: dict[str, Any] | None = None


async def start_run(
    store: Store,
    run_id: str,
    profile: str,
    seed: int,
    requested: list[str],
    target: str,
    total: int,
    team: str = "",
) -> None:
    params = {
        "run": run_id,
        "team": team,
        "profile": profile,
        "seed": seed,
        "requested": requested,
        "target": target,
        "total": total,
    }
    await _write(store, INSERT_RUN, params)


async def add_result(store: Store, run_id: str, drill: dict[str, Any]) -> None:
    """Record one finished drill (a scorecard drill entry)."""
    params = {**drill, "run": run_id, "seed": int(drill["seed"], 16)}
    await _write(store, INSERT_RESULT, params)


async def _write(store: Store, statement: str, params: dict[str, Any]) -> None:
    """One write, retried a few times: drills restart the very server runs may live on,
    and a pooled connection broken by that is replaced on the next try."""
    for attempt in range(RETRIES):
        try:
            async with store.connection() as conn:
                await conn.execute(statement, params)
            return
        except StoreUnavailable:
            if attempt == RETRIES - 1:
                raise
            await asyncio.sleep(0.2 * (attempt + 1))


async def finish_run(store: Store, run_id: str, card: dict[str, Any], text: str) -> None:
    summary = card["summary"]
    params = {
        "run": run_id,
        "status": "failed" if summary["failed"] else "passed",
        "passed": summary["passed"],
        "failed": summary["failed"],
        "not_run": summary["not_run"],
        "text": text,
        "card": Jsonb(card),
    }
    await _write(store, FINISH_RUN, params)


async def fail_run(store: Store, run_id: str, error: str, status: str) -> None:
    """The campaign itself broke (not a drill), or was stopped (``status`` stopped): say
    so instead of leaving it running."""
    await _write(store, FAIL_RUN, {"run": run_id, "error": error[:2000], "status": status})


async def list_runs(
    store: Store,
    limit: int = 50,
    before: tuple[datetime, str] | None = None,
    team: str | None = None,
) -> list[RunSummary]:
    """Newest first; ``before`` is the (started_at, run_id) of the last row seen."""
    if not 1 <= limit <= MAX_LIST:
        raise ValueError(f"limit must be from 1 to {MAX_LIST}")
    params = {
        "team": team,
        "before_at": before[0] if before else None,
        "before_id": before[1] if before else None,
        "limit": limit,
    }
    async with store.connection() as conn:
        rows = await (await conn.execute(LIST_RUNS, params)).fetchall()
    return [RunSummary(*row) for row in rows]


async def get_run(store: Store, run_id: str) -> RunDetail | None:
    """One run with its drills and scorecard, or None."""
    async with store.connection() as conn:
        row = await (await conn.execute(GET_RUN, {"run": run_id})).fetchone()
        if row is None:
            return None
        results = await (await conn.execute(GET_RESULTS, {"run": run_id})).fetchall()
    columns = ("id", "family", "title", "seed", "verdict", "seconds", "failures", "known_bug")
    drills = [dict(zip((*columns, "reproduce"), r, strict=True)) for r in results]
    return RunDetail(RunSummary(*row[:14]), drills, row[14], row[15])
