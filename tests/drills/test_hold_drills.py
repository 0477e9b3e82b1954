"""The incident-hold drills through ``wayline drill run --drill H1``, as a person runs
them: work held across a worker's SIGKILL and across a stopped worker's lease expiry
resumes exactly once after a gradual release, and nothing is leased while it is held.
On the test's PostgreSQL when ``WAYLINE_TEST_DSN`` names one, else a private cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.drills.drill_command import ci_drill


@pytest.mark.timeout(400)
def test_a_hold_loses_nothing_across_a_crash_and_a_lease_expiry(tmp_path: Path) -> None:
    card, _ = ci_drill("H1", tmp_path)
    drills = card["drills"]
    assert {d["id"]: d["verdict"] for d in drills} == {
        "H1-crash-s0": "passed",
        "H1-expiry-s0": "passed",
    }, [d["failures"] for d in drills]
    assert all(d["extra"]["backlog"] > 0 for d in drills), "the hold parked the workload"
    stats = card["leases"]
    assert stats["stale_writes_accepted"] == 0
