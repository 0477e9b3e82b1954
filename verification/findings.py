"""What an invariant check found: per invariant, how much was checked and what was violated.

The checker (``verification.invariants``) and its SQL checks (``verification.sql_checks``)
both add to one ``Findings``; the scorecard and the studio's drill pages name the
invariants by ``NAMES``.
"""

from __future__ import annotations

import re
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
    "J5": "continuation chained",
}
NOT_EXERCISED = {
    "I1": "no start was acknowledged before a quiet phase",
    "I2": "no attempt, compensation or timer event was recorded",
    "I3": "no handler of the drill's stubs was called (machine advances are M1's, "
    "code-first bodies J1's)",
    "I4": "no instance was written",
    "I5": "no lease was claimed or written under",
    "I6": "no history was written",
    "I7": "no signal was received",
    "I8": "no instance was read at its stored position (every one the drill touched is "
    "examined, ended ones too: a live one's pending waits for their work, an ended one "
    "for work left for it and, once completed, for a wait it never closed)",
    "I9": "no history was replayed",
    "I10": "no quiet phase: a lease held mid-run is not judged",
    "I11": "no work was enqueued",
    "U": "no attempt was recorded unknown",
    "B": "no fault was planned at a boundary",
    "A": "no COMMIT was cut or settled after its answer was lost",
    "M1": "no machine state was entered or written",
    "M2": "no machine execution was cancelled",
    "M3": "no machine execution ran to a quiet phase",
    "M4": "no two executions of a machine shared a parent",
    "J1": "no code-first step started",
    "J2": "no code-first attempt started",
    "J3": "no code-first journal was replayed",
    "J4": "no code-first step body was entered",
    "J5": "no code-first run continued as new",
}
"""Why an invariant that checked nothing, in every drill of a campaign, proved nothing:
what it takes to exercise it, which the drills run did not do. The scorecard says so
instead of a passing 0/0."""


SEQUENCE_PATTERNS = (
    (re.compile(r"after sequence (\d+)"), 1),
    (re.compile(r"\bevent (\d+)"), 0),
    (re.compile(r"@(\d+)\b"), 0),
    (re.compile(r"\bat (\d+)\b"), 0),
)
"""How violation texts name a position: (pattern, offset to the event that shows it)."""


@dataclass(frozen=True)
class Named:
    """The drill instance and the event a violation names ('' and 0: none)."""

    instance_id: str = ""
    sequence: int = 0


def named(text: str) -> Named:
    """Read the instance and position a violation names.

    Checker violations read ``<invariant> <name>: <instance>: <what>``; the position is
    ``after sequence N`` (the event after N shows it), ``event N``, ``status@N`` or
    ``at N``. Texts that name no instance name nothing.
    """
    _, _, rest = text.partition(": ")
    candidate, sep, what = rest.partition(": ")
    if not sep or " " in candidate or not candidate:
        return Named()
    for pattern, offset in SEQUENCE_PATTERNS:
        match = pattern.search(what)
        if match:
            return Named(candidate, int(match.group(1)) + offset)
    return Named(candidate)


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
