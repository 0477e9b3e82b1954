"""The client refuses values from outside it cannot take, before any query sends them.

A NUL character would otherwise reach PostgreSQL and come back as driver text, JSON
nested a thousand levels as a RecursionError, and an input larger than an activity
takes as an instance that fails at its first step. A command id names one command: a
repeat acts once, and the id reused for another command is refused once the instance
is read.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from engine.api.client import Client
from engine.decide.decisions import record_outcome
from engine.decide.operator_actions import Action
from engine.model.errors import CommandConflict, DecisionRejected, InputRefused, LimitExceeded
from engine.model.events import EventKind
from engine.model.instance import AttemptStatus, Instance, InstanceStatus
from engine.model.transitions import Draft, Transition
from engine.model.validation import parse_definition
from engine.store import reads
from engine.store.errors import InstanceNotFound
from tests.integration.transition_builders import SINGLE, catalog

CATALOG = catalog()


@pytest.fixture
def client(single_client: Client) -> Client:
    return single_client


def nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


CALLS: dict[str, Callable[[Client], Awaitable[Any]]] = {
    "definition name": lambda c: c.start("store\x00single", "x"),
    "version": lambda c: c.start(SINGLE, "x", version="1\x00"),
    "instance id": lambda c: c.start(SINGLE, "x\x00"),
    "input": lambda c: c.start(SINGLE, "x", {"note": "a\x00b"}),
    "signal instance": lambda c: c.signal("running\x00", "a", "s"),
    "signal id": lambda c: c.signal("running", "a", "s\x00"),
    "payload key": lambda c: c.signal("running", "a", "s", {"k\x00": 1}),
    "actor": lambda c: c.command("running", Action.PAUSE, "ops\x00", "why"),
    "reason": lambda c: c.command("running", Action.PAUSE, "ops", "why\x00"),
    "evidence": lambda c: c.command(
        "running", Action.RESOLVE_COMPENSATION, "ops", "why", step="a", code="c", evidence="\x00"
    ),
    "inspect": lambda c: c.inspect("running\x00"),
}


@pytest.mark.parametrize("call", CALLS.values(), ids=CALLS.keys())
async def test_a_nul_character_is_refused_in_words(
    client: Client, call: Callable[[Client], Awaitable[Any]]
) -> None:
    with pytest.raises(InputRefused, match=r"contains a NUL character \(\\u0000\)"):
        await call(client)
    assert len((await client.inspect("running")).audit) == 0, "nothing was recorded"


async def test_json_nested_too_deeply_is_refused_not_a_recursion_error(client: Client) -> None:
    await client.start(SINGLE, "deep-enough", nested(100))
    for call in (
        client.start(SINGLE, "too-deep", nested(1000)),
        client.signal("running", "a", "s", nested(101)),
        client.command("running", Action.APPROVE, "ops", "why", step="a", payload=nested(1000)),
    ):
        with pytest.raises(InputRefused, match="nested too deeply: at most 100 levels"):
            await call


async def test_a_start_input_larger_than_an_activity_takes_is_refused(client: Client) -> None:
    with pytest.raises(LimitExceeded, match="the input is 1003 bytes; step a accepts at most 1000"):
        await client.start(SINGLE, "too-big", "x" * 1001)
    with pytest.raises(InstanceNotFound):
        await reads.get_instance(client.store, "too-big")


@pytest.mark.parametrize(
    ("step", "message"),
    [("bad name!", "the step must be 1 to 200 characters"), ("nosuch", "'nosuch' is not a step")],
)
async def test_a_command_on_a_step_the_definition_lacks_is_refused(
    client: Client, step: str, message: str
) -> None:
    for action, effect in (
        (Action.APPROVE, {}),
        (Action.RESOLVE_COMPENSATION, {"code": "done"}),
    ):
        with pytest.raises(InputRefused, match=message):
            await client.command("running", action, "ops", "why", step=step, **effect)


@pytest.mark.parametrize("signal_id", ["", "s 1 ü", "x" * 1000])
async def test_a_signal_id_no_event_could_carry_is_refused_before_the_state_is_read(
    client: Client, signal_id: str
) -> None:
    with pytest.raises(InputRefused, match="the signal id must be 1 to"):
        await client.signal("running", "a", signal_id)
    with pytest.raises(InputRefused, match="the signal id must be 1 to"):
        await client.signal("nosuch", "a", signal_id)


async def test_a_repeated_command_is_recorded_once(client: Client) -> None:
    await client.command("running", Action.PAUSE, "ops", "hold on", "c1")
    again = await client.command("running", Action.PAUSE, "ops", "hold on", "c1")

    assert again.status is InstanceStatus.PAUSED
    assert [a.command_id for a in again.audit] == ["c1"]


@pytest.mark.parametrize(
    ("action", "actor", "reason"),
    [
        (Action.RESUME, "ops", "hold on"),
        (Action.PAUSE, "someone-else", "hold on"),
        (Action.PAUSE, "ops", "another reason"),
    ],
)
async def test_a_command_id_reused_for_another_command_is_refused(
    client: Client, action: Action, actor: str, reason: str
) -> None:
    """Reported as done, "resume recorded" on an instance that stays paused, a reused
    id would say that what it asked for happened."""
    await client.command("running", Action.PAUSE, "ops", "hold on", "c1")

    with pytest.raises(CommandConflict, match="command id c1 was already used for pause by ops"):
        await client.command("running", action, actor, reason, "c1")

    state = await client.inspect("running")
    assert state.status is InstanceStatus.PAUSED
    assert [(a.command_id, a.action) for a in state.audit] == [("c1", "pause")]


@pytest.mark.parametrize("name", ["", "bad name!", "s" * 201])
async def test_a_signal_name_no_event_could_carry_is_refused_before_the_state_is_read(
    client: Client, name: str
) -> None:
    """A code run's inbox takes any name, so such a name used to fail only as its event
    was made (EventInvalid: a 500 in the studio, 'signal_received event 6: needs step'
    on the command line)."""
    with pytest.raises(InputRefused, match="the signal name must be 1 to 200 characters"):
        await client.signal("running", name, "s1")
    with pytest.raises(InputRefused, match="the signal name must be 1 to 200 characters"):
        await client.signal("nosuch", name, "s1")


GATED = {
    "name": "store.gated",
    "version": "1",
    "mode": "orchestration",
    "steps": [
        {"name": "ok", "kind": "approval", "target": "t.ok", "timeout": "1h", "input_limit": 64},
        {"name": "go", "kind": "signal", "target": "t.go", "timeout": "1h", "input_limit": 64},
    ],
}


async def test_a_payload_larger_than_its_step_takes_is_refused_as_a_size(client: Client) -> None:
    """An approval's or a signal's payload over the step's ``input_limit`` is a size
    the caller can fix (LimitExceeded, 422 in the studio), not a state conflict."""
    await client.publish(parse_definition(GATED))
    await client.start("store.gated", "gated")
    with pytest.raises(LimitExceeded, match="the payload is 72 bytes; step ok accepts at most 64"):
        await client.command("gated", Action.APPROVE, "ops", "why", step="ok", payload="x" * 70)
    await client.command("gated", Action.APPROVE, "ops", "why", step="ok", payload="fits")
    with pytest.raises(LimitExceeded, match="the payload is 72 bytes; step go accepts at most 64"):
        await client.signal("gated", "go", "s-1", "x" * 70)
    state = await client.inspect("gated")
    assert [entry.action for entry in state.audit] == ["approve"]
    assert "go" not in state.signals


async def test_a_lifecycle_action_the_status_does_not_allow_says_so_in_words(
    client: Client,
) -> None:
    """Not in the replay rule's words (``paused is not allowed while paused``,
    ``resumed is not allowed while running``), and nothing is recorded."""
    await client.command("running", Action.PAUSE, "ops", "look first", command_id="p1")
    with pytest.raises(DecisionRejected) as again:
        await client.command("running", Action.PAUSE, "ops", "again", command_id="p2")
    assert str(again.value) == (
        "the instance is paused: pause applies to a running instance only; nothing was done"
    )
    await client.command("running", Action.RESUME, "ops", "looked", command_id="r1")
    with pytest.raises(DecisionRejected) as running:
        await client.command("running", Action.RESUME, "ops", "again", command_id="r2")
    assert str(running.value) == (
        "the instance is running: resume applies to a paused instance only; nothing was done"
    )
    audit = [a.command_id for a in (await client.inspect("running")).audit]
    assert audit == ["p1", "r1"]


async def test_a_step_command_id_reused_on_another_step_is_refused(client: Client) -> None:
    """A retry's id sent again for another step was answered as done, though that
    step's unknown attempt was never retried: the audit record holds no step, so the
    step is the one of the event it was recorded with."""
    await client.publish(CATALOG.pair)
    flow = CATALOG.flow(CATALOG.pair, "both-unknown")
    state = await commit(client, flow.start())
    for step in ("x", "y"):
        state = await commit(client, flow.attempt_started(state, step))
    for step in ("x", "y"):
        draft = Draft(CATALOG.registry, state, client.store.now())
        record_outcome(draft, step, 1, EventKind.ATTEMPT_UNKNOWN, code="lost")
        state = await commit(client, draft.build())

    retried = "retry x"
    await client.command("both-unknown", Action.RETRY_ACTIVITY, "ops", retried, "r1", step="x")
    again = await client.command(
        "both-unknown", Action.RETRY_ACTIVITY, "ops", retried, "r1", step="x"
    )
    assert [a.command_id for a in again.audit] == ["r1"]  # the same retry: recorded once
    with pytest.raises(CommandConflict, match="already used for retry_activity of step x"):
        await client.command("both-unknown", Action.RETRY_ACTIVITY, "ops", retried, "r1", step="y")
    state = await client.inspect("both-unknown")
    assert state.activities["y"].status is AttemptStatus.UNKNOWN


async def commit(client: Client, transition: Transition) -> Instance:
    await client.store.commit(transition)
    return await client.inspect(transition.instance_id)
