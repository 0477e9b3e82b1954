"""A team's own code-first workflow that continues as new, drilled as a team drills it.

``renewal`` (``tests/fixtures/continuations/renewals.py``) renews one period per run and
continues as new for the next, so one start is three runs: ``renewal/plan-1``, then
``+2`` and ``+3``. Its plan kills the worker after the first run's step body, cuts the
COMMIT of the second run's step and makes a worker exit after the third's. Through
``wayline drill run --plan``, the drill must pass: the drilled run is done when its last
successor completed (not lost at its first run's end), each run's step_ids and effects
are its own, and J5 holds every continuation to its successor. Under a broken build that
starts the successor apart from the run's end (or not at all), the same plan must fail.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from tests.drills.drill_command import drill
from verification.campaigns import target_for
from verification.self_test import plan_self_test

ROOT = Path(__file__).resolve().parents[2]
PLAN = ROOT / "tests" / "fixtures" / "continuations" / "renewal.recovers.json"
CHAIN = ["renewal/plan-1", "renewal/plan-1+2", "renewal/plan-1+3"]


@pytest.mark.timeout(120)
def test_a_workflow_that_continues_as_new_is_drilled_without_false_findings(
    pg_dsn: str, tmp_path: Path
) -> None:
    card = tmp_path / "card.json"
    done = drill(
        "run", "--plan", str(PLAN), "--dsn", pg_dsn, "--schema", "no_runs_here",
        "--json", str(card), "--artifacts", str(tmp_path), timeout=100,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.strip().endswith("drills: 1 passed, 0 failed"), done.stdout[-3000:]
    (result,) = json.loads(card.read_text())["drills"]
    plan = result["extra"]["plan"]
    assert [pin["fired"] for pin in plan["pins"]] == [True, True, True]
    assert plan["state"][:2] == [
        "instance: COMPLETED",
        f"continued as new 2 times: {' -> '.join(CHAIN)}",
    ]
    assert [e["key"] for e in plan["effects"]] == [f"{run}/renew#1.1" for run in CHAIN]
    assert [e["run"] for e in plan["history"] if e["kind"] == "instance_started"] == CHAIN
    assert result["invariants"]["I1"] == [1, 0], "one start, ended by its last run"
    assert result["invariants"]["J5"] == [4, 0], "two continuations, two successors named"
    assert result["invariants"]["J3"] == [3, 0], "each run's journal against the team's code"
    assert f"  history  {CHAIN[0]}: 1 instance_started;" in done.stdout
    assert "completed 1 (+ 2 continued as new)  failed 0" in done.stdout


APART = r"J5 continuation chained: renewal/plan-1(\+\d)? continued as new as \S+, started by"
GAP = r"I1 no lost work: renewal/plan-1: continued as new as renewal/plan-1\+\d, still running"
LOST = r"I1 no lost work: renewal/plan-1: continued as new as renewal/plan-1\+2, which does not"


@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    ("mutant", "caught_by"),
    [("successor-started-apart", (APART, GAP)), ("successor-dropped", (LOST,))],
)
def test_the_plan_fails_on_an_engine_that_breaks_a_continuation(
    mutant: str, caught_by: tuple[str, ...], pg_dsn: str, tmp_path: Path
) -> None:
    """Started apart, a successor is either seen started by another transaction (J5),
    or the drill settles in the moment a run of the chain had ended with no successor,
    and the successor started after the workers stopped never runs (I1): either is the
    drill's first failure, and both are the broken build's fault."""

    async def run() -> tuple[list[str], object]:
        async with target_for(pg_dsn) as target:
            return await plan_self_test(target, 1, tmp_path, PLAN, mutant)

    control, verdict = asyncio.run(run())
    assert control == []
    assert verdict.caught, verdict.evidence
    assert any(re.search(found, verdict.evidence) for found in caught_by), verdict.evidence
