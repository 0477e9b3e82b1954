"""I8 in a real drill: an engine whose instances' ends leave their work open (the
self-test's ``end-leaves-work``) is caught by I8 on the ended instances, and the
same drill on the real engine examines its ended instances rather than reading 0/0.
C6 cancels code-first runs parked at a wait with a 1 h timeout, whose wake-up work the
end must retire. On the test's PostgreSQL when ``WAYLINE_TEST_DSN`` names one, else a
private cluster."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from verification.campaigns import target_for
from verification.drills.base import DrillResult
from verification.drills.catalogue import catalogue, select
from verification.profiles import PROFILES
from verification.runner import run_campaign

DRILL = "C6-cancels-s0"
MUTANT = "end-leaves-work"
SEED = 1


def c6(directory: Path, mutant: str = "") -> DrillResult:
    profile = PROFILES["ci"]

    async def run() -> DrillResult:
        async with target_for(os.environ.get("WAYLINE_TEST_DSN")) as target:
            specs = select(catalogue(profile, SEED), [DRILL])
            done = await run_campaign(target, specs, profile, SEED, directory, mutant=mutant)
        return done.results[0]

    return asyncio.run(run())


@pytest.mark.timeout(300)
def test_the_ended_runs_of_a_drill_are_examined(tmp_path: Path) -> None:
    result = c6(tmp_path)

    assert result.verdict == "passed", result.failures
    checked, violations = result.checks["I8"]
    assert checked >= 2, "each cancelled run was examined for work left for it"
    assert violations == []


@pytest.mark.timeout(300)
def test_work_an_end_left_open_is_an_orphan_i8_names(tmp_path: Path) -> None:
    result = c6(tmp_path, MUTANT)

    assert result.verdict == "failed"
    # named as orphans once nothing else can move, not found by a quiet phase run out
    assert not [f for f in result.failures if f.startswith("timeout")], result.failures
    orphans = [f for f in result.failures if f.startswith("I8 no orphan waits: ")]
    assert orphans, result.failures
    assert all(": cancelled, but its decision " in f for f in orphans), orphans
    assert all("is still available: nothing may wait" in f for f in orphans), orphans
