"""The compatibility judges (issue 21): could a running instance move to a new version
where it stands? Step lists and machines, by example and by property: an instance
judged compatible and migrated along an edge replays without error to the same
per-step progress (and the new version carries it to its end); an incompatible one
is refused by the migration builder, which re-judges it."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from histories import (
    ACTOR,
    RICH,
    RICH_STEPS,
    Run,
    activity_doc,
    definition,
    drive,
    settle,
    signal_doc,
    timer_doc,
)
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st
from machines import Walk, approval_document, machine_documents

from engine.decide.compatibility import MOVABLE, judge
from engine.decide.migrations import record_migration
from engine.decide.operator_actions import Action
from engine.decide.operator_commands import record_command
from engine.model.compatibility import (
    MAX_LISTED_REFUSALS,
    CompatibilityReport,
    IncompatibleInstances,
    Verdict,
    report_from_json,
)
from engine.model.definitions import Definition
from engine.model.errors import DefinitionInvalid
from engine.model.instance import Instance, InstanceStatus
from engine.model.registry import MigrationEdge, Registry
from engine.model.transitions import Draft
from engine.model.validation import parse_definition
from engine.replay.fold import replay

S = InstanceStatus


def v2(steps: list[dict[str, Any]] | tuple[dict[str, Any], ...]) -> Definition:
    return definition(steps, version="2")


def _keep(value: Any) -> Any:
    return value


def _migrated(run: Run, target: Definition) -> Instance:
    """Pause when running, migrate along a registered edge; the new state."""
    run.registry = Registry([run.spec, target], [MigrationEdge(target.name, "1", "2", _keep)])
    if run.state.status is S.RUNNING:
        run.command(Action.PAUSE)
    draft = run.draft()
    record_migration(draft, "move-1", target, ACTOR, "ship v2")
    run.commit(draft, "command", "move-1")
    return run.state


def _progress(state: Instance) -> tuple[Any, ...]:
    return (
        dict(state.activities),
        dict(state.compensations),
        dict(state.timers),
        dict(state.signals),
        dict(state.children),
        dict(state.race_winners),
    )


def _at_charge() -> Run:
    """An instance whose first activity ``a`` is in flight."""
    run = Run(RICH, instance_id="order-77")
    run.start({"order": 77})
    run.start_attempt("a")
    return run


def test_a_step_in_flight_that_was_removed_is_incompatible_with_its_name_and_step() -> None:
    target = v2([s for s in RICH_STEPS if s["name"] != "a"])
    verdict = judge(target, _at_charge().state)
    assert not verdict.compatible
    assert verdict.line == "order-77: step a is in flight and was removed"
    assert (verdict.from_version, verdict.from_fingerprint) == ("1", RICH.fingerprint)


def test_in_flight_work_must_map_one_to_one() -> None:
    retargeted = [dict(s, target="do.other") if s["name"] == "a" else s for s in RICH_STEPS]
    assert judge(v2(retargeted), _at_charge().state).reason == (
        "activity a is in flight on do.a and now runs do.other"
    )
    as_timer = [timer_doc("a", "5s") if s["name"] == "a" else s for s in RICH_STEPS]
    assert judge(v2(as_timer), _at_charge().state).reason == (
        "step a is in flight and changed kind from activity to timer"
    )


def test_completed_steps_keep_their_meaning_and_nothing_is_put_in_the_past() -> None:
    run = _at_charge()
    run.finish("a")
    run.run_activity("b")
    without_a = v2([s for s in RICH_STEPS if s["name"] != "a"])
    assert judge(without_a, run.state).reason == "step a completed and was removed"
    earlier = v2([activity_doc("audit"), *RICH_STEPS])
    assert judge(earlier, run.state).reason == (
        "step audit is before step j, where the instance stands, and has not run"
    )
    later = v2([*RICH_STEPS, activity_doc("receipt")])
    assert judge(later, run.state).compatible


def test_a_waiting_instance_needs_the_step_it_waits_at() -> None:
    run = Run(definition([activity_doc("a"), signal_doc("ok")]))
    run.start()
    run.run_activity("a")
    target = definition([activity_doc("a")], version="2")
    assert judge(target, run.state).reason == "the instance waits at step ok, which was removed"


def test_shared_rules_come_before_the_modes() -> None:
    run = _at_charge()
    assert judge(RICH, run.state).reason == "it already runs rich@1"
    run.command(Action.TERMINATE)
    assert judge(v2(RICH_STEPS), run.state).reason.startswith("it is terminated")
    other = definition(RICH_STEPS, name="other", version="2")
    assert judge(other, _at_charge().state).reason == "it runs rich, not other"


def _machine(changes: dict[str, Any]) -> Definition:
    document = {**approval_document(), "version": "2", **changes}
    return parse_definition(document)


def test_a_machine_needs_its_current_state_edges_and_timer() -> None:
    walk = Walk(parse_definition(approval_document()))
    walk.wait_for_timer()
    walk.enter("InReview", reminders=1)
    state = walk.state
    assert state is not None
    assert judge(_machine({}), state).compatible
    renamed = copy.deepcopy(approval_document())
    renamed["state"]["variants"][1]["name"] = "Reviewing"
    renamed["timers"] = {"Reviewing": 60}
    renamed["transitions"] = {
        "Submitted": ["Reviewing"],
        "Reviewing": ["Reviewing", "Approved", "Rejected", "Expired"],
    }
    assert judge(_machine(renamed), state).reason == "state InReview is current and was removed"
    ends = ["Approved", "Rejected", "Expired"]
    fewer = {"transitions": {"Submitted": ["InReview"], "InReview": ends}}
    assert judge(_machine(fewer), state).reason == (
        "edge InReview -> InReview was removed while the machine is in InReview"
    )
    walk.wait_for_timer()
    again = walk.enter("InReview", reminders=2)
    assert judge(_machine({"max_transitions": 1}), again).reason == (
        "the machine took 2 transitions and now allows 1"
    )


def test_a_report_round_trips_and_bounds_its_refusal() -> None:
    verdicts = [Verdict(f"i-{n}", "1", "f" * 64, "step a was removed") for n in range(12)]
    report = CompatibilityReport(RICH.ref, (Verdict("ok", "1", "f" * 64), *verdicts))
    assert report_from_json(report.to_json()) == report
    assert report.summary()[0] == "rich@1: 13 running checked: 1 compatible, 12 incompatible"
    refusal = report.refusal()
    assert refusal.count("step a was removed") == MAX_LISTED_REFUSALS
    assert refusal.endswith("and 2 more")
    assert not report.acceptable and CompatibilityReport(RICH.ref).acceptable


# Properties ------------------------------------------------------------------------------

_NAMES = [s["name"] for s in RICH_STEPS]
HOW = st.sampled_from(["same", "remove", "as_timer", "retarget", "one_attempt", "insert"])


def _touched(state: Instance) -> list[str]:
    """The steps the instance has progress in (where a change matters most)."""
    return [n for n in _NAMES if n in {*state.activities, *state.timers, *state.signals}]


def mutated(how: str, name: str) -> Definition | None:
    """RICH changed in one way as version 2 (None when that is not a valid definition)."""
    steps: list[dict[str, Any]] = []
    for step in RICH_STEPS:
        if step["name"] != name:
            steps.append(step)
        elif how == "as_timer":
            steps.append(timer_doc(name, "5s"))
        elif how == "retarget" and step["kind"] == "activity":
            steps.append(dict(step, target="do.other"))
        elif how == "one_attempt" and step["kind"] == "activity":
            steps.append(dict(step, retry=dict(step["retry"], max_attempts=1)))
        elif how == "insert":
            steps += [activity_doc(f"new-{name}"), step]
        elif how != "remove":
            steps.append(step)
    try:
        return v2(steps)
    except DefinitionInvalid:
        return None


CHOICES = st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 100)), max_size=40)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(CHOICES, HOW, st.data())
def test_compatible_instances_migrate_and_replay_to_the_same_progress(
    choices: list[tuple[int, int]], how: str, data: st.DataObject
) -> None:
    run = drive(choices)
    near = _touched(run.state) or _NAMES
    name = data.draw(st.sampled_from(near) | st.sampled_from(_NAMES), label="step changed")
    target = mutated(how, name)
    assume(target is not None and run.state.status in MOVABLE)
    assert target is not None
    verdict = judge(target, run.state)
    event("compatible" if verdict.compatible else "incompatible")
    if not verdict.compatible:
        run.registry = Registry([RICH, target], [MigrationEdge("rich", "1", "2", _keep)])
        if run.state.status is S.RUNNING:
            run.command(Action.PAUSE)
        with pytest.raises(IncompatibleInstances, match=verdict.reason):
            record_migration(run.draft(), "move-1", target, ACTOR, "ship v2")
        return
    before = _progress(run.state)
    moved = _migrated(run, target)
    again = replay(run.registry, run.history)
    assert again.definition == target.ref == moved.definition
    assert _progress(again) == before
    assert again.digest == moved.digest
    run.command(Action.RESUME)
    settle(run)  # the new version carries the instance on without a replay error
    assert replay(run.registry, run.history).digest == run.state.digest


def _walk_on(walk: Walk, data: st.DataObject, most: int) -> None:
    """Enter up to ``most`` states along the walk's manifest's edges."""
    manifest = walk.manifest
    for _ in range(most):
        progress = walk.state.machine if walk.state else None
        used = progress.transitions if progress else 0
        if manifest.is_terminal(walk.current) or used >= manifest.max_transitions:
            return
        walk.wait_for_timer()
        walk.enter(data.draw(st.sampled_from(manifest.targets(walk.current)), label="edge"))


def _command(walk: Walk, build: Any) -> None:
    """Append what ``build`` adds to a draft on the walk's state (an operator's)."""
    draft = Draft(walk.registry, walk.state, walk.now)
    build(draft)
    walk.events.extend(draft.events)
    walk.state = draft.state


@settings(max_examples=200, deadline=None)
@given(machine_documents(), machine_documents(), st.data())
def test_a_machine_judged_compatible_migrates_and_runs_on_under_the_new_manifest(
    first: dict[str, Any], second: dict[str, Any], data: st.DataObject
) -> None:
    walk = Walk(parse_definition(first))
    _walk_on(walk, data, data.draw(st.integers(0, 4), label="steps before"))
    target = parse_definition({**second, "name": first["name"], "version": "2"})
    state = walk.state
    assert state is not None
    verdict = judge(target, state)
    event("compatible" if verdict.compatible else "incompatible")
    walk.registry = Registry([walk.definition, target], [MigrationEdge("walk", "1", "2", _keep)])
    _command(walk, lambda d: record_command(d, "pause-1", Action.PAUSE, ACTOR, "moving"))
    if not verdict.compatible:
        with pytest.raises(IncompatibleInstances, match=verdict.reason):
            _command(walk, lambda d: record_migration(d, "move-1", target, ACTOR, "v2"))
        return
    _command(walk, lambda d: record_migration(d, "move-1", target, ACTOR, "v2"))
    assert walk.state is not None and walk.state.machine == state.machine
    assert replay(walk.registry, walk.events).digest == walk.state.digest
    _command(walk, lambda d: record_command(d, "resume-1", Action.RESUME, ACTOR, "moved"))
    walk.definition = target
    _walk_on(walk, data, 4)  # every event under the new manifest folds without refusal
    assert replay(walk.registry, walk.events).digest == walk.state.digest
