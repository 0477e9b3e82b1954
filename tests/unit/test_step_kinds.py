"""The one per-step-kind table that orchestration and the studio's step states read."""

from __future__ import annotations

from engine.model.definitions import StepKind
from engine.modes.steps import step_kinds

ROLES = ("activity", "timer", "wait", "child", "parallel", "join", "race")


def test_every_step_kind_gets_the_handler_of_its_role() -> None:
    table = step_kinds.table(**{role: role for role in ROLES})

    assert set(table) == set(StepKind)
    assert table[StepKind.SIGNAL] == table[StepKind.APPROVAL] == "wait"
    assert {kind.value: role for kind, role in table.items() if role != "wait"} == {
        role: role for role in ROLES if role != "wait"
    }
