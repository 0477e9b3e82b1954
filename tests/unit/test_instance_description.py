"""What ``wayline inspect`` says of waits: an ended instance has no pending timer.

A race's losing timer is cancelled when the other branch wins, and an instance that
ended (or is unwinding) never fires the timers it had scheduled; the description says
so with the reason instead of calling them pending.
"""

from __future__ import annotations

import re

from engine.decide.operator_actions import Action
from engine.model.description import describe_instance, failure_line, never_happens
from engine.model.frozen import evolve
from engine.model.instance import AttemptStatus, InstanceStatus
from tests.unit.histories import Run


def at_the_race() -> Run:
    run = Run()
    run.start()
    for step in ("a", "b", "x", "y"):
        run.run_activity(step)
    return run


def timer_line(run: Run, timer: str) -> str:
    found = re.search(rf"^  timer {timer}: .*$", describe_instance(run.state), re.MULTILINE)
    assert found is not None
    return found.group(0)


def test_an_open_race_timer_is_pending() -> None:
    run = at_the_race()
    assert timer_line(run, "tmo").endswith(" pending")
    assert never_happens(run.state, "tmo") == ""


def test_a_lost_race_timer_is_cancelled_with_the_winner() -> None:
    run = at_the_race()
    run.signal("sig")
    assert timer_line(run, "tmo").endswith("cancelled (race r was won by sig)")
    assert "pending" not in describe_instance(run.state)


def test_a_cancelled_instance_timer_is_cancelled_with_the_reason() -> None:
    run = at_the_race()
    run.command(Action.CANCEL)
    line = timer_line(run, "tmo")
    assert "pending" not in line
    assert re.search(r"cancelled \(the instance (is being|was) cancelled\)$", line)
    assert never_happens(run.state, "sig").startswith("the instance")


def test_a_failure_says_the_message_it_recorded() -> None:
    """A code workflow's own exception ends it ``workflow-error`` with the exception's
    text as its result: inspect shows the text on the failure's line."""
    failed = evolve(
        at_the_race().state,
        status=InstanceStatus.FAILED,
        failure_step="workflow",
        failure_code="workflow-error",
        result='{"message":"TypeError: step() takes 3 positional arguments"}',
    )
    described = describe_instance(failed)
    assert (
        "\nfailure workflow: workflow-error: TypeError: step() takes 3 positional arguments\n"
        in described
    )
    assert "\nfailure workflow: workflow-error\n" in describe_instance(evolve(failed, result=None))


def test_a_step_lists_failure_says_its_failed_attempts_message() -> None:
    """A step list fails with its activity's code, the ``ActivityFailure``'s message
    recorded on the attempt only: the failure's line (and ``start --wait``'s refusal,
    which said only "it ended failed") read ``failure a: declined``, not why."""
    state = at_the_race().state
    declined = evolve(
        state.activities["a"],
        status=AttemptStatus.FAILED,
        code="declined",
        result='{"message":"card expired"}',
    )
    failed = evolve(
        state,
        status=InstanceStatus.FAILED,
        failure_step="a",
        failure_code="declined",
        activities={**state.activities, "a": declined},
    )
    assert failure_line(failed) == "failure a: declined: card expired"
    assert "\nfailure a: declined: card expired\n" in describe_instance(failed)
