"""J3: every code-first run's journal replays cleanly against the code it is pinned to.

The checker replays each run's history into its state (``verification.replay_check``),
takes the journal entries the engine's fold gives the code (``engine.modes.code.fold``)
and drives the code the run is pinned to (its definition's name and version, as the
drill app declares it) against them, with the engine's driver, in the harness's own
process. Whatever a worker did, the code must walk the journal without a divergence;
a completed run's code must return, with nothing new, exactly the result history
recorded; a failed run's code must raise; a run that continued as new must continue,
with nothing new (its successor's input is J5's, ``verification.continuations``). A
journal that only some other code explains (a divergent deploy's decisions accepted)
fails here.
"""

from __future__ import annotations

from engine.model.canonical import canonical_json
from engine.model.instance import Instance, InstanceStatus
from engine.modes.code.driver import drive
from engine.modes.code.fold import entries
from engine.modes.code.journal import Advance, ContinuedAsNew, Diverged, Raised, Returned
from engine.worker.activities import ActivityRegistry
from verification.findings import Findings


def check(findings: Findings, states: dict[str, Instance], app: ActivityRegistry) -> None:
    """J3 over every code-first run among ``states`` whose code ``app`` declares."""
    problems, checked = [], 0
    for run_id, state in sorted(states.items()):
        problem = problem_of(run_id, state, app)
        if problem is None:
            continue
        checked += 1
        if problem:
            problems.append(f"{run_id}: {problem}")
    findings.stats["journals_replayed"] += checked
    findings.add("J3", checked, problems)


def problem_of(run_id: str, state: Instance, app: ActivityRegistry) -> str | None:
    """What is wrong with ``state``'s journal against its code ('' if nothing; None
    when ``app`` does not declare the code ``state`` is pinned to)."""
    flow = app.workflow_for(state.definition.name, state.definition.version)
    if flow is None:
        return None
    advance = drive(flow.function, state.value("input"), entries(state), run_id=run_id)
    return _problem(state, advance)


def _problem(state: Instance, advance: Advance) -> str:
    """What is wrong with replaying ``state``'s journal to ``advance`` ('' if nothing)."""
    if isinstance(advance, Diverged):
        return advance.message
    if state.status is InstanceStatus.COMPLETED:
        if not isinstance(advance, Returned) or advance.new:
            return f"completed, but its code replays to {type(advance).__name__}"
        if canonical_json(advance.value) != state.result:
            return f"completed with {state.result}, but its code returns {advance.value!r}"
    if state.status is InstanceStatus.FAILED and not isinstance(advance, Raised):
        return f"failed, but its code replays to {type(advance).__name__}"
    if state.status is InstanceStatus.CONTINUED_AS_NEW and (
        not isinstance(advance, ContinuedAsNew) or advance.new
    ):
        return f"continued as new, but its code replays to {type(advance).__name__}"
    return ""
