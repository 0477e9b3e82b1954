"""A fault that names a step fires at that step's n-th hit of its boundary, whatever
other steps did; the report names the step (``engine.worker.faults``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.worker.faults import Action, Boundary, Fault, Faults, InjectedFault


@given(st.lists(st.sampled_from(["reserve", "charge", ""]), max_size=30), st.integers(1, 4))
def test_a_stepped_fault_fires_at_that_steps_nth_hit_only(steps: list[str], hit: int) -> None:
    faults = Faults([Fault(Boundary.AFTER_HANDLER, hit, Action.RAISE, "charge")])
    seen = 0
    for step in steps:
        seen += step == "charge"
        if step == "charge" and seen == hit:
            with pytest.raises(InjectedFault):
                faults.reach(Boundary.AFTER_HANDLER, step)
        else:
            faults.reach(Boundary.AFTER_HANDLER, step)
    assert faults.counts[Boundary.AFTER_HANDLER.value] == len(steps)


def test_the_report_names_the_step_and_its_hit(tmp_path: Path) -> None:
    report = tmp_path / "report.jsonl"
    faults = Faults([Fault(Boundary.BEFORE_COMMIT, 2, Action.RAISE, "charge")], report=str(report))
    faults.reach(Boundary.BEFORE_COMMIT, "reserve")
    faults.reach(Boundary.BEFORE_COMMIT, "charge")
    with pytest.raises(InjectedFault):
        faults.reach(Boundary.BEFORE_COMMIT, "charge")
    lines = [json.loads(line) for line in report.read_text().splitlines()]
    assert [(r["step"], r["hit"], r["action"]) for r in lines] == [
        ("reserve", 1, None),
        ("charge", 1, None),
        ("charge", 2, "raise"),
    ]


def test_an_unstepped_fault_still_counts_every_hit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "WAYLINE_FAULT_PLAN", '[{"boundary": "after_claim", "hit": 2, "action": "raise"}]'
    )
    faults = Faults.from_env()
    faults.reach(Boundary.AFTER_CLAIM, "reserve")
    with pytest.raises(InjectedFault):
        faults.reach(Boundary.AFTER_CLAIM, "charge")
