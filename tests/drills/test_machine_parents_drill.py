"""Invariant M4 through ``wayline drill run --drill M2``, as a person runs it: the
executions the drill submitted for one parent have all ended by the check, and the
check still examines them (one after the other: none active at once), rather than
counting the executions left active and reading 0/0. On the test's PostgreSQL when
``WAYLINE_TEST_DSN`` names one, else a private cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.drills.drill_command import ci_drill


@pytest.mark.timeout(400)
def test_m4_examines_the_ended_executions_of_one_parent(tmp_path: Path) -> None:
    card, done = ci_drill("M2", tmp_path)

    drills = {d["id"]: d for d in card["drills"]}
    assert drills["M2-submits-s0"]["verdict"] == "passed", drills["M2-submits-s0"]["failures"]
    m4 = card["invariants"]["M4"]
    assert m4["checked"] >= 2, "the admitted execution and the one submitted after it ended"
    assert m4["violations"] == 0
    assert "M4 one active execution per parent 0/0" not in done.stdout
