"""What every mode's drill-plan tests check of a pin the definition cannot run: the
harness refuses it with one problem, named by the pin and saying why."""

from __future__ import annotations

import pytest

from engine.model.definitions import Definition
from verification import plan as plans


def assert_pin_refused(plan: plans.Plan, definition: Definition, pin: str, why: str) -> None:
    """``plan`` (whose only pin is ``pin``) is refused on ``definition`` with one problem,
    ``pins[0] PIN: ...``, that says ``why``."""
    with pytest.raises(plans.PlanInvalid) as caught:
        plans.check_against(plan, definition)
    (line,) = caught.value.problems
    assert line.startswith(f"pins[0] {pin}: ")
    assert why in line
