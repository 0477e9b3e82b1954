"""The lifecycle table, checked exhaustively against a model written independently here.

Every sequence of up to four lifecycle commands is applied to a fresh instance, the
way the engine and operators would issue them (operator commands through
``record_command``, engine decisions through the lifecycle builders). A command the
instance's state does not allow must be rejected and leave the instance unchanged; one
it allows must lead to exactly the status (and pinned version) the model says. The
model is a plain table, so a change to LIFECYCLE_EDGES that was not meant shows up as
a disagreement here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta

import pytest

from engine.decide import lifecycle
from engine.decide.operator_actions import Action
from engine.decide.operator_commands import record_command
from engine.model.definitions import Definition, DefinitionRef
from engine.model.errors import DecisionRejected, ReplayRejected
from engine.model.instance import Instance
from engine.model.registry import MigrationEdge, Registry
from engine.model.transitions import Draft
from engine.replay.fold import replay
from tests.unit.histories import ACTOR, T0, definition, signal_doc

# The model: status -> {command: next status}. Anything absent is rejected.
MODEL: dict[str, dict[str, str]] = {
    "running": {
        "pause": "paused",
        "cancel": "cancelling",
        "terminate": "terminated",
        "complete": "completed",
        "fail": "failed",
        "continue_as_new": "continued_as_new",
        "failing": "failing",
    },
    "paused": {
        "resume": "running",
        "cancel": "cancelling",
        "terminate": "terminated",
        "migrate": "paused",
    },
    "cancelling": {"terminate": "terminated", "cancelled": "cancelled"},
    "failing": {"terminate": "terminated", "fail": "failed"},
    "completed": {},
    "failed": {},
    "cancelled": {},
    "terminated": {},
    "continued_as_new": {},
}
COMMANDS = (
    "pause",
    "resume",
    "cancel",
    "terminate",
    "complete",
    "fail",
    "continue_as_new",
    "migrate",
    "failing",
    "cancelled",
)
DEPTH = 4

V1 = definition([signal_doc("wait")], name="life", version="1")
V2 = definition([signal_doc("wait"), signal_doc("more")], name="life", version="2")
OTHER = {"1": V2, "2": V1}
REGISTRY = Registry(
    [V1, V2],
    [
        MigrationEdge("life", "1", "2", lambda value: value),
        MigrationEdge("life", "2", "1", lambda value: value),
    ],
)


@dataclass(frozen=True)
class Model:
    status: str = "running"
    version: str = "1"

    def after(self, command: str) -> Model | None:
        """The model's next state, or None when the command is not allowed."""
        target = MODEL[self.status].get(command)
        if target is None:
            return None
        version = ("2" if self.version == "1" else "1") if command == "migrate" else self.version
        return Model(target, version)


def _operator(action: Action, **effect: object) -> Callable[[Draft, str], None]:
    def issue(draft: Draft, command_id: str) -> None:
        record_command(draft, command_id, action, ACTOR, "model test", **effect)

    return issue


def _migrate(draft: Draft, command_id: str) -> None:
    assert draft.state is not None
    target: Definition = OTHER[draft.state.definition.version]
    _operator(Action.MIGRATE, target=target.ref, input={"migrated": True})(draft, command_id)


ENGINE: dict[str, Callable[[Draft, str], object]] = {
    "pause": _operator(Action.PAUSE),
    "resume": _operator(Action.RESUME),
    "cancel": _operator(Action.CANCEL),
    "terminate": _operator(Action.TERMINATE),
    "migrate": _migrate,
    "complete": lambda draft, _: lifecycle.complete(draft, {"done": True}),
    "fail": lambda draft, _: lifecycle.fail(draft, "wait", "boom"),
    "failing": lambda draft, _: lifecycle.begin_failing(draft, "wait", "boom"),
    "cancelled": lambda draft, _: lifecycle.cancelled(draft),
    "continue_as_new": lambda draft, _: lifecycle.continue_as_new(
        draft,
        "successor",
        draft.state.definition,
        {"carry": 1},  # type: ignore[union-attr]
    ),
}


def issue(state: Instance, command: str, step: int) -> Instance | None:
    """The engine's state after ``command``, or None when the engine rejects it (by a
    replay rule, or before one, as a second cancel is)."""
    draft = Draft(REGISTRY, state, T0 + timedelta(seconds=step))
    try:
        ENGINE[command](draft, f"c{step}")
    except (ReplayRejected, DecisionRejected):
        assert not draft.events or draft.events[-1].kind.label == "operator_command_recorded"
        return None
    if command != "continue_as_new":  # it builds its own transition
        draft.build()
    assert draft.state is not None
    return draft.state


@dataclass
class Tally:
    sequences: int = 0
    accepted: int = 0
    rejected: int = 0


def explore(
    state: Instance, model: Model, history: list, depth: int, tally: Tally
) -> Iterator[str]:
    """Depth-first over every command sequence; yields each disagreement."""
    if depth == DEPTH:
        return
    for command in COMMANDS:
        tally.sequences += 1
        expected = model.after(command)
        after = issue(state, command, depth + 1)
        path = " > ".join([*history, command])
        if (after is None) != (expected is None):
            verdict = "rejected" if after is None else "accepted"
            yield f"{path}: engine {verdict} it, model disagrees"
            continue
        if after is None or expected is None:
            tally.rejected += 1
            yield from explore(state, model, [*history, f"({command})"], depth + 1, tally)
            continue
        tally.accepted += 1
        actual = Model(after.status.label, after.definition.version)
        if actual != expected:
            yield f"{path}: engine reached {actual}, model expected {expected}"
            continue
        yield from explore(after, expected, [*history, command], depth + 1, tally)


def fresh() -> Instance:
    draft = lifecycle.start_draft(REGISTRY, V1, "life-1", T0, {"n": 1})
    draft.build()
    assert draft.state is not None
    return draft.state


def test_every_command_sequence_agrees_with_the_model() -> None:
    tally = Tally()
    disagreements = list(explore(fresh(), Model(), [], 0, tally))
    assert disagreements == []
    assert tally.sequences == sum(len(COMMANDS) ** n for n in range(1, DEPTH + 1))
    assert tally.accepted and tally.rejected


@pytest.mark.parametrize(
    "commands",
    [
        ("pause", "migrate", "resume", "complete"),
        ("pause", "cancel", "cancelled"),
        ("failing", "fail"),
        ("pause", "migrate", "migrate", "terminate"),
        ("continue_as_new",),
    ],
)
def test_accepted_sequences_replay_to_the_same_state(commands: tuple[str, ...]) -> None:
    """What the Drafts accepted is also what a replay of the committed events gives."""
    state = fresh()
    events = list(lifecycle.start_draft(REGISTRY, V1, "life-1", T0, {"n": 1}).build().events)
    for step, command in enumerate(commands, start=1):
        draft = Draft(REGISTRY, state, T0 + timedelta(seconds=step))
        ENGINE[command](draft, f"c{step}")
        events += draft.events
        assert draft.state is not None
        state = draft.state
    assert replay(REGISTRY, events) == state


def test_migration_moves_the_pin_and_keeps_the_migrated_input() -> None:
    state = fresh()
    for step, command in enumerate(("pause", "migrate"), start=1):
        after = issue(state, command, step)
        assert after is not None
        state = after
    assert state.definition == V2.ref
    assert state.value("input") == {"migrated": True}


def test_migration_needs_a_registered_edge() -> None:
    lonely = Registry([V1, V2])
    draft = Draft(lonely, fresh(), T0 + timedelta(seconds=1))
    record_command(draft, "c1", Action.PAUSE, ACTOR, "r")
    with pytest.raises(ReplayRejected, match="no migration of life from 1 to 2"):
        record_command(draft, "c2", Action.MIGRATE, ACTOR, "r", target=V2.ref)


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (definition([signal_doc("wait")], name="life", version="3").ref, "no migration"),
        (
            definition([signal_doc("changed")], name="life", version="2").ref,
            "fingerprint",
        ),
        (definition([signal_doc("wait")], name="other", version="2").ref, "keep the definition"),
    ],
    ids=["no edge", "fingerprint mismatch", "other name"],
)
def test_migration_targets_are_checked(target: DefinitionRef, message: str) -> None:
    draft = Draft(REGISTRY, fresh(), T0 + timedelta(seconds=1))
    record_command(draft, "c1", Action.PAUSE, ACTOR, "r")
    with pytest.raises(ReplayRejected, match=message):
        record_command(draft, "c2", Action.MIGRATE, ACTOR, "r", target=target)


def test_continue_as_new_needs_a_registered_successor_definition() -> None:
    draft = Draft(REGISTRY, fresh(), T0 + timedelta(seconds=1))
    unknown = definition([signal_doc("wait")], name="life", version="9").ref
    with pytest.raises(ReplayRejected, match="not registered"):
        lifecycle.continue_as_new(draft, "successor", unknown)
    ending = Draft(REGISTRY, fresh(), T0 + timedelta(seconds=1))
    lifecycle.continue_as_new(ending, "successor", V2.ref)
    assert ending.build().terminal
