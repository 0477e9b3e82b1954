"""Campaign profiles: how much to run and how long to wait.

``ci`` is what the test suite runs on two cores in a few minutes: every boundary with
every fault action under two seeds, each named drill, each machine drill, each
code-first drill and each incident-hold drill once, a short hypothesis run.
``deep`` is for the studio or a nightly job: more seeds, more examples, longer waits.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Profile:
    name: str
    seeds: int
    """Seeds per cell of the boundary x action matrix."""
    parallel: int
    """Drills that run at the same time (each in its own schema)."""
    quiet_seconds: float
    """How long the quiet phase may take before an instance counts as lost."""
    drill_seconds: float
    """A drill's whole budget; past it the drill fails with a timeout."""
    examples: int
    """Hypothesis examples for D9."""
    steps: int
    """Rules per hypothesis example."""
    derandomize: bool
    machine_seeds: int
    """Seeds of each machine drill (M)."""
    code_seeds: int
    """Seeds of each code-first drill (C)."""
    hold_seeds: int
    """Seeds of each incident-hold drill (H)."""


PROFILES = {
    "ci": Profile("ci", 2, 4, 30.0, 120.0, 5, 8, True, 1, 1, 1),
    "deep": Profile("deep", 5, 3, 60.0, 300.0, 40, 20, False, 3, 3, 3),
}
