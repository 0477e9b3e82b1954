"""The incident-hold drills through ``wayline drill run --drill H1``, as a person runs
them: work held across a worker's SIGKILL and across a stopped worker's lease expiry
resumes exactly once after a gradual release, and nothing is leased while it is held.
On the test's PostgreSQL when ``WAYLINE_TEST_DSN`` names one, else a private cluster."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.drills.drill_command import drill as _drill

TEST_DSN_ENV = "WAYLINE_TEST_DSN"


@pytest.mark.timeout(400)
def test_a_hold_loses_nothing_across_a_crash_and_a_lease_expiry(tmp_path: Path) -> None:
    card = tmp_path / "scorecard.json"
    server = ("--dsn", os.environ[TEST_DSN_ENV]) if os.environ.get(TEST_DSN_ENV) else ()
    done = _drill(
        "run", "--drill", "H1", "--profile", "ci", "--json", str(card),
        "--artifacts", str(tmp_path), *server, timeout=360,
    )  # fmt: skip
    assert card.exists(), done.stdout[-3000:] + done.stderr[-3000:]
    drills = json.loads(card.read_text())["drills"]
    assert {d["id"]: d["verdict"] for d in drills} == {
        "H1-crash-s0": "passed",
        "H1-expiry-s0": "passed",
    }, [d["failures"] for d in drills]
    assert all(d["extra"]["backlog"] > 0 for d in drills), "the hold parked the workload"
    stats = json.loads(card.read_text())["leases"]
    assert stats["stale_writes_accepted"] == 0
