"""Coverage of a version's steps by drills: per step, each boundary x fault cell, drilled
or not, when, and with what verdict, across the team's saved plans and finished runs.

A cell is drilled by the newest run whose pin there fired, with that cell's own verdict
in that run (``verification.attribution``), never the run's as a whole: ``passed``
(nothing the run found is about its step), ``failed`` (a finding is), or
``unattributed`` (the run found something it cannot put on one fired cell, and says
why). It is ``never fired`` when runs pinned it but it never fired, ``planned`` when
only a saved plan pins it, empty when nothing does, and not applicable when the harness
cannot pin that fault there (``verification.plan.pin_problem``), so the untested
corners are the empty cells.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from engine.model.definitions import Definition, Mode
from studio.plans.documents import stubbed_steps
from studio.plans.saved import PlanRun, SavedPlan
from verification import attribution, plan_code
from verification import plan as plans

SYMBOLS = {
    "passed": "✓", "failed": "✗", "unattributed": "?", "never fired": "∅", "planned": "○",
    "": "·",
}  # fmt: skip
"""How a cell shows its status (the page's legend explains them)."""
DRILLED = frozenset({attribution.PASSED, attribution.FAILED, attribution.UNATTRIBUTED})
"""The statuses of a cell a run's fault fired at."""
HEAT_LEVELS = 4
"""A node's colour steps: the share of its applicable cells that a run drilled."""


@dataclass
class Cell:
    boundary: str
    fault: str
    applicable: bool
    status: str = ""
    """passed, failed, unattributed, never fired, planned, or '' (not drilled)."""
    why: str = ""
    """Why a drilled cell has its verdict (``attribution.CellVerdict.why``)."""
    when: datetime | None = None
    source: str = ""
    """The plan version, and the run when one drilled it."""
    run_id: str = ""

    @property
    def drilled(self) -> bool:
        return self.status in DRILLED

    @property
    def symbol(self) -> str:
        return SYMBOLS.get(self.status, "?") if self.applicable else ""


@dataclass
class StepCoverage:
    step: str
    kind: str
    boundaries: list[str]
    cells: dict[tuple[str, str], Cell] = field(default_factory=dict)

    @property
    def applicable(self) -> int:
        return sum(c.applicable for c in self.cells.values())

    @property
    def drilled(self) -> int:
        return sum(c.drilled for c in self.cells.values())

    @property
    def level(self) -> int:
        return heat_level(self.drilled, self.applicable)


def heat_level(drilled: int, applicable: int) -> int:
    """0 (nothing drilled) to HEAT_LEVELS (every applicable cell drilled)."""
    if not applicable:
        return 0
    return -(-drilled * HEAT_LEVELS // applicable)


def coverage(
    definition: Definition, saved: list[SavedPlan], runs: list[PlanRun]
) -> list[StepCoverage]:
    """Every step (a machine's every state that advances, a code-first workflow's first
    call of each step and each signal it waits for, and any later call a plan pinned)
    with work of its own, and its cells (newest evidence first wins)."""
    slow = {
        step: plans.Stub("slow", seconds=plans.RENEWAL_SLOW_SECONDS)
        for step in stubbed_steps(definition)
    }
    anything = plans.Plan(definition=f"{definition.name}@{definition.version}", stubs=slow)
    steps = []
    for step in _pinned_steps(definition, saved, runs):
        boundaries = [b.value for b in plans.boundaries_of(definition, step)]
        if not boundaries:
            continue
        found = StepCoverage(step, _kind(definition, step), boundaries)
        for boundary in boundaries:
            for fault in plans.FAULTS:
                pin = plans.Pin(step, boundary, fault)
                applicable = not plans.cell_problem(anything, definition, pin)
                found.cells[(boundary, fault)] = Cell(boundary, fault, applicable)
        steps.append(found)
    by_step = {s.step: s for s in steps}
    _from_runs(by_step, runs)
    _from_plans(by_step, saved)
    return steps


def _pinned_steps(definition: Definition, saved: list[SavedPlan], runs: list[PlanRun]) -> list[str]:
    """The steps a pin may name, then those the plans and runs pinned besides (a code
    step's later calls), each once."""
    pinned = [p["step"] for run in runs for p in run.pins if isinstance(p, dict)]
    for plan in saved:
        for pin in plan.document.get("pins", []):
            pinned.append(plans.parse_pin(pin).step if isinstance(pin, str) else pin["step"])
    return list(dict.fromkeys([*plans.steps_of(definition), *map(str, pinned)]))


def _kind(definition: Definition, step: str) -> str:
    if definition.mode is Mode.MACHINE:
        return "state"
    if definition.mode is Mode.CODE:
        return "signal" if step in plan_code.signals(definition) else "step call"
    return next(s.kind.value for s in definition.steps if s.name == step)


def _cell(by_step: dict[str, StepCoverage], step: str, boundary: str, fault: str) -> Cell | None:
    found = by_step.get(step)
    return found.cells.get((boundary, fault)) if found else None


def _from_runs(by_step: dict[str, StepCoverage], runs: list[PlanRun]) -> None:
    for run in runs:
        for pin in run.pins:
            cell = _cell(by_step, pin["step"], pin["boundary"], pin["fault"])
            if cell is None or cell.drilled:
                continue
            if pin.get("fired"):
                own = attribution.from_record(run.verdict, run.pins, pin)
                cell.status, cell.why = own.verdict, own.why
            elif not cell.status:
                cell.status = "never fired"
            else:
                continue
            cell.when, cell.run_id = run.finished_at, run.run_id
            cell.source = f"{run.plan_name} v{run.plan_version}, run {run.run_id}"


def _from_plans(by_step: dict[str, StepCoverage], saved: list[SavedPlan]) -> None:
    for plan in saved:
        for pin in plan.document.get("pins", []):
            if isinstance(pin, str):
                pin = plans.parse_pin(pin).as_json()
            cell = _cell(by_step, pin["step"], pin["boundary"], pin["fault"])
            if cell is not None and not cell.status:
                cell.status, cell.when, cell.source = "planned", plan.saved_at, plan.label
