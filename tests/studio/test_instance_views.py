"""What the instance page derives from a replayed instance, without a database.

Histories are driven through the engine's own builders (``tests.unit.histories``):
each step's state (the graph's classes), every attempt folded from history (unknown
outcomes shown as such), and the operator actions offered, with what each would do.
"""

from __future__ import annotations

from hypothesis import given, settings

from engine.decide.operator_actions import Action
from engine.model.instance import InstanceStatus
from studio.drills.service import finding
from studio.instance_urls import instance_id_of, instance_ref, instance_url
from studio.instances import attempts
from studio.instances.action_offers import describe, offer, offers
from studio.instances.step_states import STATES, step_states
from tests.unit.histories import RICH, Run, legal_runs


def states(run: Run) -> dict[str, str]:
    return {name: s.state for name, s in step_states(run.state).items()}


def folded(run: Run) -> attempts.AttemptLog:
    log = attempts.EMPTY
    for event in run.history:
        log = attempts.fold(log, event)
    return log


def keys(run: Run) -> set[str]:
    return {o.key for o in offers(run.state, run.registry, run.now)}


def test_steps_follow_progress_from_scheduled_to_the_race() -> None:
    run = Run()
    run.start()
    assert states(run)["a"] == "scheduled" and states(run)["sig"] == "pending"
    run.start_attempt("a")
    assert states(run)["a"] == "running"
    run.finish("a", "failed")
    assert states(run)["a"] == "retry-waiting"
    run.run_activity("a")
    run.run_activity("b")
    assert states(run)["p"] == "running"
    run.run_activity("x")
    run.run_activity("y")
    now = states(run)
    assert (now["p"], now["j"], now["x"]) == ("succeeded", "succeeded", "succeeded")
    assert (now["r"], now["sig"], now["tmo"]) == ("waiting", "waiting-signal", "waiting-timer")
    assert now["ap"] == "pending"  # not reached: it is after the race
    run.signal("sig")
    now = states(run)
    assert (now["r"], now["sig"], now["tmo"]) == ("succeeded", "succeeded", "cancelled")
    assert now["ap"] == "waiting-approval"
    assert set(now.values()) <= set(STATES)


def test_an_unknown_outcome_is_its_own_state_and_attempt_outcome() -> None:
    run = Run()
    run.start()
    run.run_activity("a", "failed")
    run.run_activity("a", "unknown")
    assert states(run)["a"] == "unknown"
    note = step_states(run.state)["a"].note
    assert "outcome unknown" in note
    records = folded(run).of(attempts.ACTIVITY, "a")
    assert [(r.attempt, r.outcome) for r in records] == [(1, "failed"), (2, "unknown")]
    assert records[0].code == "boom" and records[0].next_attempt_at is not None
    assert records[0].next_key.endswith("/a/2")
    assert records[1].in_doubt and records[1].next_attempt_at is None

    assert {"retry_activity:a", "resolve_activity:a"} <= keys(run)
    retry = offer(run.state, run.registry, run.now, Action.RETRY_ACTIVITY, "a")
    assert retry is not None and "reuses the idempotency key" in " ".join(retry.effect)
    run.command(Action.RESOLVE_ACTIVITY, step="a", resolution="failed")
    assert folded(run).last(attempts.ACTIVITY, "a").outcome == "resolved: failed"  # type: ignore[union-attr]


def test_cancel_states_the_compensations_latest_first_and_they_show_in_order() -> None:
    run = Run()
    run.start()
    run.run_activity("a")
    run.run_activity("b")
    cancel = offer(run.state, run.registry, run.now, Action.CANCEL)
    assert cancel is not None and cancel.danger
    effect = " ".join(cancel.effect)
    assert "b (by undo.b), then a (by undo.a)" in effect
    assert cancel.records[:2] == ("operator_command_recorded", "cancellation_requested")
    assert "compensation_scheduled b" in cancel.records
    terminate = " ".join(describe(run.state, Action.TERMINATE))
    assert "Nothing is compensated: b, a keep their effects" in terminate

    run.command(Action.CANCEL)
    assert states(run)["b"] == "compensating" and states(run)["a"] == "succeeded"
    run.run_activity("b", compensation=True)
    run.run_activity("a", compensation=True)
    assert states(run)["a"] == states(run)["b"] == "compensated"
    assert run.state.status is InstanceStatus.CANCELLED
    assert keys(run) == set()  # nothing is offered once it has ended


def test_lifecycle_offers_follow_the_status() -> None:
    run = Run()
    run.start()
    assert {"pause", "cancel", "terminate"} <= keys(run) and "resume" not in keys(run)
    run.command(Action.PAUSE)
    assert "resume" in keys(run) and "pause" not in keys(run)
    pause = describe(run.state, Action.PAUSE)
    assert pause[-1] == "Resume continues from here."


@settings(max_examples=40)
@given(legal_runs(40))
def test_every_legal_state_has_a_state_per_step_and_only_acceptable_offers(run: Run) -> None:
    before = run.state
    found = step_states(run.state)
    assert set(found) == {s.name for s in RICH.steps}
    assert {s.state for s in found.values()} <= set(STATES)
    for made in offers(run.state, run.registry, run.now):
        # the dry run is exactly the engine's command: it must be accepted for real
        run.command(made.action, **({"step": made.step} if made.step else {}), **_extra(made))
        run._state = before  # back to the state under test
        run.history = run.history[: before.sequence]
    assert run.state is before
    if run.state.status is InstanceStatus.RUNNING:
        assert "pause" in keys(run)


def _extra(made) -> dict[str, object]:
    if made.action is Action.RESOLVE_ACTIVITY:
        return {"resolution": "failed"}
    if made.action is Action.RESOLVE_COMPENSATION:
        return {"code": "by-hand"}
    return {}


def test_instance_ids_with_slashes_survive_urls() -> None:
    child = "order-7/ship"
    assert instance_ref(child) == "order-7~ship"
    assert instance_id_of(instance_ref(child)) == child
    assert instance_url(child, "/history") == "/instances/order-7~ship/history"


def test_violations_name_their_instance_and_event() -> None:
    replay = finding("I9 replay: i-3: after sequence 12 the engine decides timer_fired(t)")
    assert (replay.instance_id, replay.sequence) == ("i-3", 13)
    status = finding("I4 terminal once: i-4: row says completed@9, history running@8")
    assert (status.instance_id, status.sequence) == ("i-4", 9)
    plain = finding("drill timed out waiting for the quiet phase")
    assert plain.instance_id == "" and plain.link("r", "d") == ""
    assert replay.link("run-1", "D1-x") == "/drills/runs/run-1/drills/D1-x/instances/i-3#event-13"
