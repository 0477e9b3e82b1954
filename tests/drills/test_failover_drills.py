"""The failover drills through ``wayline drill run --drill F1``, as a person runs them:
each builds a primary and a standby of its own (so it runs with or without
``WAYLINE_TEST_DSN``, which then only records the run), kills the primary and promotes
the standby. Synchronous, every invariant holds on the promoted server and the scorecard
says how soon work resumed and how many COMMITs lost their answers; asynchronous, it reports the
acknowledged commits the standby never received, as a finding, without failing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.drills.drill_command import ci_drill
from verification.drills.failover import IN_FLIGHT, LOST_INSTANCES, RESUME_SECONDS


@pytest.mark.timeout(400)
def test_a_promoted_standby_loses_nothing_acknowledged_unless_it_is_asynchronous(
    tmp_path: Path,
) -> None:
    card, done = ci_drill("F1", tmp_path)
    drills = {d["id"]: d for d in card["drills"]}
    assert {i: d["verdict"] for i, d in drills.items()} == {
        "F1-sync": "passed",
        "F1-async": "passed",
    }, [d["failures"] for d in drills.values()]
    synchronous, asynchronous = drills["F1-sync"]["extra"], drills["F1-async"]["extra"]
    assert 0 < synchronous["time_to_resume_seconds"] < RESUME_SECONDS
    assert synchronous["commits_in_flight"] >= IN_FLIGHT
    assert "acknowledged_lost" not in synchronous
    assert asynchronous["acknowledged_lost"] == LOST_INSTANCES
    assert card["failover"]["acknowledged_lost"] == LOST_INSTANCES
    assert card["ambiguity"]["unknown"] == 0
    assert "synchronous_standby_names" in card["failover"]["findings"][0]
    assert "failover   drills 2" in done.stdout
