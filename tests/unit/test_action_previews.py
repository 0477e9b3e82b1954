"""The preview of an operator action (one instance or many) says what the engine does.

The property tests drive random legal histories (``tests.unit.histories``) and compare
every preview with what actually happens when the same command is committed: the
verdict, the attempts that run again and their keys, the compensation order, and the
fate of each attempt in doubt. The example tests pin the sentences an operator reads.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.decide.audit import LIFECYCLE
from engine.decide.bulk_actions import (
    BULK_ACTIONS,
    RESOLUTIONS,
    BulkRequestRefused,
    bulk_request,
    judge,
)
from engine.decide.operator_actions import Action
from engine.decide.operator_commands import record_command
from engine.decide.previews import (
    REFUSALS,
    ActionRequest,
    Fate,
    Preview,
    Verdict,
    blast_radius,
    preview,
)
from engine.model.instance import AttemptStatus, InstanceStatus
from engine.model.transitions import WorkKind
from engine.modes import decide
from engine.modes.steps.orchestration import compensable
from tests.unit.histories import Run, legal_runs

A = AttemptStatus
S = InstanceStatus


def requests(run: Run) -> list[ActionRequest]:
    """Every bulk request worth judging on the run's state: lifecycle ones, and a retry
    and each resolution of every activity."""
    found = [ActionRequest(a) for a in LIFECYCLE]
    for step in run.state.activities:
        found.append(ActionRequest(Action.RETRY_ACTIVITY, step))
        found += [
            ActionRequest(Action.RESOLVE_ACTIVITY, step, {"resolution": r}) for r in RESOLUTIONS
        ]
    return found


def committed(run: Run, request: ActionRequest):
    """The draft of the real command (as Client.command builds it), or None if refused."""
    draft = run.draft()
    effect = {**request.effect, **({"step": request.step} if request.step else {})}
    try:
        record_command(draft, "cmd-real", request.action, "alice", "because", **effect)
        decide(draft)
    except REFUSALS:
        return None
    return draft


@settings(max_examples=150, deadline=None)
@given(legal_runs())
def test_a_preview_applies_exactly_when_the_command_does_and_says_what_it_schedules(
    run: Run,
) -> None:
    before = run.state
    for request in requests(run):
        seen = preview(before, run.registry, run.now, request)
        draft = committed(run, request)
        assert seen.applies == (draft is not None), (request, seen)
        if draft is None:
            assert seen.reason
            continue
        scheduled = [
            json.loads(w.payload) for w in draft.work if w.kind is WorkKind.ACTIVITY and w.payload
        ]
        rerun_keys = {(r.step, r.key) for r in seen.reruns if not r.compensation}
        assert rerun_keys <= {(d["step"], d["key"]) for d in scheduled}
        for rerun in seen.reruns:
            previous = (before.compensations if rerun.compensation else before.activities)[
                rerun.step
            ]
            assert rerun.same_key == (rerun.key == previous.idempotency_key)
            if not rerun.compensation and previous.status is A.FAILED:
                assert not rerun.same_key, "a retry after a known failure has a new key"
        assert {d.step for d in seen.in_doubt} == {
            p.step for p in before.activities.values() if p.status is A.UNKNOWN
        }
        assert seen.becomes is draft.state.status


@settings(max_examples=100, deadline=None)
@given(legal_runs())
def test_cancel_previews_compensation_latest_first_and_terminate_keeps_effects(run: Run) -> None:
    state = run.state
    pending = [p.step for p in compensable(state) if p.step not in state.compensations]
    cancel = preview(state, run.registry, run.now, ActionRequest(Action.CANCEL))
    if cancel.applies and state.status not in (S.CANCELLING, S.FAILING):
        assert list(cancel.compensations) == pending
        unknown = any(p.status is A.UNKNOWN for p in state.activities.values())
        assert all(d.fate is Fate.HOLDS_UNWINDING for d in cancel.in_doubt) or not unknown
    terminate = preview(state, run.registry, run.now, ActionRequest(Action.TERMINATE))
    if terminate.applies:
        assert terminate.compensations == ()
        assert list(terminate.kept) == pending
        assert all(d.fate is Fate.ABANDONED for d in terminate.in_doubt)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(legal_runs(max_moves=30), min_size=1, max_size=4), st.sampled_from(tuple(LIFECYCLE))
)
def test_the_blast_radius_counts_every_instance_once(runs: list[Run], action: Action) -> None:
    previews = [
        preview(r.state, r.registry, r.now, ActionRequest(action)) for r in runs
    ]  # one version, several states
    radius = blast_radius(previews)
    assert radius.total == len(runs) == sum(radius.verdicts.values())
    refused_ids = [i for ids in radius.refusals.values() for i in ids]
    assert len(refused_ids) == radius.total - radius.applies
    assert sum(radius.versions.values()) == radius.total
    assert radius.same_key_reruns + radius.new_key_reruns == sum(len(p.reruns) for p in previews)


def unknown_run(step: str = "a") -> Run:
    """An instance whose activity ``step`` is in doubt."""
    run = Run()
    run.start({"order": 1})
    run.start_attempt(step)
    run.finish(step, "unknown")
    return run


def judged(run: Run, action: Action, **arguments: str) -> Preview:
    """``action`` as a bulk asks it (the step: the one in doubt), judged on ``run``."""
    return judge(run.state, run.registry, run.now, bulk_request(action, arguments=arguments))


def test_an_unknown_outcome_is_retried_with_its_key_and_resolved_absent_with_a_new_one() -> None:
    run = unknown_run()
    retry = judged(run, Action.RETRY_ACTIVITY)
    assert retry.applies and retry.request.step == "a"
    (rerun,) = retry.reruns
    assert (rerun.attempt, rerun.key, rerun.same_key) == (2, "i1/a/1", True)
    assert retry.in_doubt[0].fate is Fate.RUNS_AGAIN
    absent = judged(run, Action.RESOLVE_ACTIVITY, resolution="absent")
    assert [(r.key, r.same_key) for r in absent.reruns] == [("i1/a/2", False)]
    assert absent.in_doubt[0].fate is Fate.RUNS_AGAIN_NEW_KEY
    failed = judged(run, Action.RESOLVE_ACTIVITY, resolution="failed")
    assert (failed.in_doubt[0].fate, failed.in_doubt[0].settled_as) == (Fate.SETTLED, "failed")


def test_an_instance_with_nothing_in_doubt_is_refused_with_the_reason() -> None:
    run = Run()
    run.start({"order": 1})
    refused = judged(run, Action.RETRY_ACTIVITY)
    assert (refused.verdict, refused.reason) == (Verdict.REFUSED, "no activity is in doubt")


def test_an_instance_already_where_the_action_leads_is_unchanged_not_refused() -> None:
    run = Run()
    run.start({"order": 1})
    run.command(Action.PAUSE)
    paused = preview(run.state, run.registry, run.now, ActionRequest(Action.PAUSE))
    assert (paused.verdict, paused.reason) == (Verdict.UNCHANGED, "already paused")
    run.command(Action.TERMINATE)
    ended = preview(run.state, run.registry, run.now, ActionRequest(Action.CANCEL))
    assert ended.verdict is Verdict.REFUSED and ended.reason


def test_a_cancel_says_which_compensations_run_in_which_order() -> None:
    run = Run()
    run.start({"order": 1})
    run.run_activity("a")
    run.run_activity("b")
    cancel: Preview = preview(run.state, run.registry, run.now, ActionRequest(Action.CANCEL))
    assert cancel.compensations == ("b", "a")
    assert cancel.becomes is S.CANCELLING


@pytest.mark.parametrize(
    ("action", "step", "arguments", "field", "message"),
    [
        ("compensate", "", {}, "action", "is not one of: pause, resume, cancel, terminate"),
        ("migrate", "", {}, "version", "choose the version to migrate to"),
        ("migrate", "a", {"version": "2"}, "step", "migrate acts on instances, not on a step"),
        ("approve", "", {}, "action", "is not one of"),
        ("pause", "a", {}, "step", "pause acts on instances, not on a step"),
        ("cancel", "", {"resolution": "failed"}, "resolution", "cancel takes no resolution"),
        (
            "resolve_activity",
            "",
            {},
            "resolution",
            "choose a resolution: succeeded, failed, absent",
        ),
        (
            "resolve_activity",
            "",
            {"resolution": "failed", "result": 1},
            "result",
            "only an outcome settled as succeeded carries a result",
        ),
    ],
)
def test_a_bulk_request_says_what_is_wrong_what_is_allowed_and_where(
    action: str, step: str, arguments: dict, field: str, message: str
) -> None:
    """The field is named too, so a form says it beside the field it concerns."""
    with pytest.raises(BulkRequestRefused, match=message) as refused:
        bulk_request(action, step, arguments)
    assert refused.value.field == field


def test_every_bulk_action_is_an_operator_action_with_a_label() -> None:
    assert all(b.label and b.action is a for a, b in BULK_ACTIONS.items())
    assert BULK_ACTIONS[Action.MIGRATE].arguments == ("version",)
