"""``wayline drill self-test``: the drills must catch deliberately broken engines.

First the drills the mutants name run against the real engine (the control: they must
pass, or fail only with known engine bugs). Then, for each mutant of
``verification.mutants``, the same drills run with worker processes "built" that way
(``WAYLINE_DRILL_MUTANT``). A mutant is caught when one of its drills fails with a
failure no known engine bug explains; a mutant that no longer applies to the engine
(checked first, in a fresh interpreter) is missed, whatever its drills do. The
self-test succeeds only if the control holds and every mutant is caught.

Last, a team's own definition must catch a broken build too, not only the harness's
workloads: the example drill plan ``PLAN_DRILL`` (``order.fulfillment``'s ``charge``
worker killed after its handler) must pass on the real engine and fail under
``PLAN_MUTANT``, which records that unknown outcome as a failure and charges again
under a new key; and the state machine's plan ``MACHINE_PLAN_DRILL`` (the approval's
review advance cut off mid-transaction, among others) must fail under
``MACHINE_PLAN_MUTANT``, whose advances write outside the transaction of their state.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from verification import plan_drills, plan_sources
from verification.campaigns import master_seed, target_for
from verification.drills.base import DrillResult
from verification.drills.catalogue import catalogue, select
from verification.known_bugs import classify
from verification.mutants import MUTANTS, Mutant, does_not_apply
from verification.processes import ROOT
from verification.profiles import PROFILES
from verification.runner import run_campaign
from verification.target import Target

PLAN_DRILL = ROOT / "examples" / "drills" / "order_fulfillment.charge-in-doubt.json"
PLAN_MUTANT = "unknown-as-failure"
MACHINE_PLAN_DRILL = ROOT / "examples" / "drills" / "document_approval.review-recovers.json"
MACHINE_PLAN_MUTANT = "advance-writes-outside-transition"
PLAN_DRILLS = ((PLAN_DRILL, PLAN_MUTANT), (MACHINE_PLAN_DRILL, MACHINE_PLAN_MUTANT))
"""Each example plan the self-test runs, and the broken build it must catch."""


@dataclass
class MutantVerdict:
    name: str
    breaks: str
    caught: bool
    evidence: str
    drills: list[str] = field(default_factory=list)


@dataclass
class SelfTest:
    control_ok: bool
    control_failures: list[str]
    verdicts: list[MutantVerdict]

    @property
    def passed(self) -> bool:
        return self.control_ok and all(v.caught for v in self.verdicts)

    def text(self) -> str:
        lines = [f"control    {'ok' if self.control_ok else 'FAILED'}"]
        lines += [f"           {f}" for f in self.control_failures[:5]]
        for v in self.verdicts:
            mark = "caught  " if v.caught else "MISSED  "
            lines.append(f"{mark}   {v.name}: {v.breaks}")
            lines.append(f"           by {', '.join(v.drills)}: {v.evidence}")
        caught = sum(v.caught for v in self.verdicts)
        lines.append(f"self-test: {caught} of {len(self.verdicts)} mutants caught")
        return "\n".join(lines)


def _unexplained(results: list[DrillResult]) -> list[str]:
    """Failure lines of failed drills that no known engine bug explains."""
    return [
        f"{r.spec_id}: {r.failures[0]}"
        for r in results
        if r.verdict == "failed" and not classify(r.failures)
    ]


async def self_test(
    dsn: str | None,
    profile: str = "ci",
    seed: int | None = None,
    directory: Path = Path("/tmp/wayline-drills"),
    progress: Callable[[str], None] | None = None,
) -> SelfTest:
    chosen = PROFILES[profile]
    seed = master_seed(seed)
    wanted = sorted({d for m in MUTANTS.values() for d in m.drills})
    specs = select(catalogue(chosen, seed), wanted)
    say = progress or (lambda _: None)
    async with target_for(dsn) as target:
        say("control: the mutants' drills on the real engine")
        control = await run_campaign(target, specs, chosen, seed, directory)
        failures = _unexplained(control.results)
        verdicts = []
        for mutant in MUTANTS.values():
            say(f"mutant {mutant.name}")
            problem = await asyncio.to_thread(does_not_apply, mutant.name)
            if problem:
                verdicts.append(_not_applied(mutant, problem))
                continue
            mine = [s for s in specs if s.id in mutant.drills]
            run = await run_campaign(
                target, mine, chosen, seed, directory, mutant=mutant.name,
                calibration=control.calibration,
            )  # fmt: skip
            evidence = _unexplained(run.results)
            verdicts.append(_verdict(mutant, evidence, list(mutant.drills)))
        for plan, name in PLAN_DRILLS:
            say(f"mutant {name} on the drill plan {plan.name}")
            plan_control, plan_verdict = await plan_self_test(target, seed, directory, plan, name)
            failures += plan_control
            verdicts.append(plan_verdict)
    return SelfTest(not failures, failures, verdicts)


def _verdict(mutant: Mutant, evidence: list[str], drills: list[str]) -> MutantVerdict:
    return MutantVerdict(
        mutant.name,
        mutant.breaks,
        bool(evidence),
        evidence[0] if evidence else "every drill passed",
        drills,
    )


async def plan_self_test(
    target: Target, seed: int, directory: Path, plan: Path = PLAN_DRILL, name: str = PLAN_MUTANT
) -> tuple[list[str], MutantVerdict]:
    """``plan`` on the real engine (its unexplained failures: the control's) and under
    mutant ``name`` (caught when it fails)."""
    drilled = await plan_sources.drilled(plan_sources.read_shaped(plan), None, "")
    specs = plan_drills.specs(drilled, seed)
    chosen = PROFILES["ci"]
    control = await run_campaign(target, specs, chosen, seed, directory)
    mutant = MUTANTS[name]
    problem = await asyncio.to_thread(does_not_apply, mutant.name)
    if problem:
        return _unexplained(control.results), _not_applied(mutant, problem)
    run = await run_campaign(target, specs, chosen, seed, directory, mutant=mutant.name)
    return _unexplained(control.results), _verdict(
        mutant, _unexplained(run.results), [s.id for s in specs]
    )


def _not_applied(mutant: Mutant, problem: str) -> MutantVerdict:
    """A mutant that no longer fits the engine proves nothing: it counts as missed."""
    evidence = f"the mutant does not apply: {problem}"
    return MutantVerdict(mutant.name, mutant.breaks, False, evidence, list(mutant.drills))


def run(dsn: str | None, profile: str, seed: int | None) -> SelfTest:
    return asyncio.run(self_test(dsn, profile, seed))
