"""The fault-plan controller: plans for drill processes, and what their reports prove.

A plan is the engine's own ``Fault`` list (boundary, hit number, action), handed to a
subprocess as JSON in ``WAYLINE_FAULT_PLAN``. The process appends every boundary hit to
its report file (``WAYLINE_FAULT_REPORT``), armed or not, before acting, so even a
SIGKILLed worker leaves the proof. ``BoundaryReport`` reads that file back: how often
each boundary was reached, by which processes, and which planned faults fired. A
planned fault that never fired is a failed drill (Antithesis' "sometimes" assertion),
never a silent pass.

Hit numbers are chosen from a calibration run of the same workload without faults, so
a plan asks for a hit the workload reliably reaches.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from engine.worker.faults import Action, Boundary, Fault
from verification import observations

WORKER_BOUNDARIES = tuple(b for b in Boundary if b is not Boundary.BEFORE_SIGNAL_ACK)


def plan_json(plan: list[Fault]) -> str:
    """The WAYLINE_FAULT_PLAN value for ``plan``."""
    return json.dumps([_fault_json(f) for f in plan])


def _fault_json(fault: Fault) -> dict[str, object]:
    item = {"boundary": fault.boundary.value, "hit": fault.hit, "action": fault.action.value}
    return {**item, "step": fault.step} if fault.step else item


def choose_hit(rng: random.Random, calibrated: int) -> int:
    """A hit number in the first half of what a fault-free run reached (at least 1)."""
    return rng.randint(1, max(1, calibrated // 2))


@dataclass
class BoundaryReport:
    """What the report file of one drill says."""

    reached: Counter[str] = field(default_factory=Counter)
    fired: list[Fault] = field(default_factory=list)
    processes: dict[str, set[int]] = field(default_factory=dict)

    @classmethod
    def read(cls, path: Path) -> BoundaryReport:
        report = cls()
        for record in observations.read(path):
            boundary = record["boundary"]
            report.reached[boundary] += 1
            report.processes.setdefault(boundary, set()).add(record["pid"])
            if record.get("action"):
                report.fired.append(
                    Fault(
                        Boundary(boundary),
                        int(record["hit"]),
                        Action(record["action"]),
                        record.get("step", ""),
                    )
                )
        return report

    def has_fired(self, fault: Fault) -> bool:
        return fault in self.fired

    def unfired(self, plan: list[Fault]) -> list[Fault]:
        """Planned faults whose boundary hit never happened."""
        return [f for f in plan if f not in self.fired]
