"""What an invariant check found: per invariant, how much was checked and what was violated.

The checker (``verification.invariants``) and its SQL checks (``verification.sql_checks``)
both add to one ``Findings``; the scorecard and the studio's drill pages name the
invariants by ``NAMES``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

NAMES = {
    "I1": "no lost work",
    "I2": "checkpoint once",
    "I3": "effects in bounds",
    "I4": "terminal once",
    "I5": "fencing",
    "I6": "history chain",
    "I7": "signal dedupe",
    "I8": "no orphan waits",
    "I9": "replay",
    "I10": "ownership",
    "I11": "conservation",
    "U": "unknown only if started",
    "B": "boundaries reached",
    "A": "ambiguity resolved",
    "M1": "machine write per transition",
    "M2": "no advance after cancel",
    "M3": "machine ends",
    "M4": "one active execution per parent",
    "J1": "one effect per step_id",
    "J2": "step_id stable",
    "J3": "journal replays",
    "J4": "recorded bodies never re-run",
}


@dataclass
class Check:
    checked: int = 0
    violations: list[str] = field(default_factory=list)


@dataclass
class Findings:
    """Per-invariant counts and violations, plus the counts the scorecard prints."""

    checks: dict[str, Check] = field(default_factory=lambda: {k: Check() for k in NAMES})
    stats: Counter[str] = field(default_factory=Counter)

    def add(self, invariant: str, checked: int, violations: list[str] = ()) -> None:
        check = self.checks[invariant]
        check.checked += checked
        check.violations.extend(violations)

    @property
    def violations(self) -> list[str]:
        return [f"{k} {NAMES[k]}: {v}" for k, c in self.checks.items() for v in c.violations]
