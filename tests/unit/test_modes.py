"""The seam for definition modes (``engine.modes``): a mode is its parts, installed once.

A fake mode, made here and nowhere else, is installed beside the step lists and
reached through the seam alone: parsing validates its document with its reader,
replay folds its events with its rules, deciding runs its decision and a worker
runs its work with its processor. No step-list module is edited or consulted for it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

import pytest

from engine import modes
from engine.decide import decisions, lifecycle
from engine.model.definitions import Definition
from engine.model.errors import DecisionRejected, DefinitionInvalid
from engine.model.events import Event, EventKind
from engine.model.frozen import evolve
from engine.model.instance import AuditEntry, Instance, InstanceStatus, SignalProgress
from engine.model.registry import Registry
from engine.model.spec_reader import SpecReader
from engine.model.transitions import Draft
from engine.model.validation import parse_definition
from engine.modes import Decision, DefinitionMode, Outcome
from engine.replay.fold import replay
from engine.worker.leased_commits import LeaseHolder
from engine.worker.loop import process

NOW = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
FAKE_WORK = 99
"""A work kind no real mode makes."""


class FakeMode(StrEnum):
    COUNTER = "counter"


def read_counter(reader: SpecReader, top: dict[str, Any]) -> dict[str, Any] | None:
    """A counter's document has ``ticks``: how many signals complete it."""
    ticks = reader.integer(top, "ticks", "", 1, 3)
    return None if ticks is None else {"steps": ()}


def check_counter(reader: SpecReader, definition: Definition) -> None:
    if definition.name == "crooked":
        reader.error("name", "is crooked")


def count_signal(
    state: Instance, event: Event, registry: Registry, command: AuditEntry | None
) -> Instance:
    """Any signal counts, whatever it names: a counter has no steps to check it against."""
    tick = SignalProgress(event.step, event.idempotency_key, event.occurred_at, event.sequence)
    return evolve(state, signals={**state.signals, event.step: tick})


def decide_counter(draft: Draft) -> Decision:
    state = draft.state
    assert state is not None
    if len(state.signals) < 2:
        return Decision(Outcome.WAITING, f"{len(state.signals)} of 2 ticks")
    lifecycle.complete(draft, sorted(state.signals))
    return Decision(Outcome.COMPLETED)


@dataclass
class Ran:
    holders: list[LeaseHolder]

    async def __call__(self, ctx: Any, current: LeaseHolder) -> None:
        self.holders.append(current)


RAN = Ran([])
COUNTER = DefinitionMode(
    name=FakeMode.COUNTER,
    fields=frozenset({"ticks"}),
    read=read_counter,
    check=check_counter,
    fold={EventKind.SIGNAL_RECEIVED: count_signal},
    decide=decide_counter,
    work={FAKE_WORK: RAN},
)


@pytest.fixture
def counter() -> Iterator[DefinitionMode]:
    modes.install(COUNTER)
    yield COUNTER
    modes.uninstall(COUNTER)


def counter_document(**fields: Any) -> dict[str, Any]:
    return {"name": "count", "version": "1", "mode": "counter", "ticks": 2, **fields}


def test_a_mode_is_validated_by_its_own_reader_and_check(counter: DefinitionMode) -> None:
    definition = parse_definition(counter_document())
    assert definition.mode is FakeMode.COUNTER
    assert modes.of(definition) is counter

    with pytest.raises(DefinitionInvalid) as bad:
        parse_definition(counter_document(ticks=9, steps=[]))
    assert [(e.path, e.message) for e in bad.value.errors] == [
        ("steps", "unknown field; allowed: deprecated, mode, name, ticks, version"),
        ("ticks", "must be a whole number from 1 to 3"),
    ]
    with pytest.raises(DefinitionInvalid, match="is crooked"):
        parse_definition(counter_document(name="crooked"))


def test_a_mode_is_replayed_and_decided_through_the_seam(counter: DefinitionMode) -> None:
    definition = parse_definition(counter_document())
    registry = Registry([definition])
    draft = lifecycle.start_draft(registry, definition, "c-1", NOW)
    assert modes.decide(draft) == Decision(Outcome.WAITING, "0 of 2 ticks")

    for tick in ("a", "b"):
        decisions.accept_signal(draft, tick, f"s-{tick}")
        modes.follow(draft)

    assert draft.state is not None
    assert draft.state.status is InstanceStatus.COMPLETED
    assert draft.state.value("result") == ["a", "b"]
    assert replay(registry, draft.events) == draft.state


async def test_a_worker_runs_a_modes_work_with_its_processor(counter: DefinitionMode) -> None:
    holder = LeaseHolder(lease=_Lease(FAKE_WORK), lease_for=timedelta(seconds=30))  # type: ignore[arg-type]
    await process(ctx=None, current=holder)  # type: ignore[arg-type]
    assert RAN.holders[-1] is holder


@dataclass(frozen=True)
class _Lease:
    kind: int


def test_uninstalling_a_mode_removes_its_parts(counter: DefinitionMode) -> None:
    modes.uninstall(counter)
    try:
        assert "counter" not in modes.installed()
        assert modes.processor(FAKE_WORK) is None
        with pytest.raises(
            DefinitionInvalid, match="must be one of orchestration, choreography, machine"
        ):
            parse_definition(counter_document())
    finally:
        modes.install(counter)


def test_a_mode_no_engine_runs_is_refused_at_the_seam() -> None:
    steps = [{"name": "t", "kind": "timer", "timeout": "1s"}]
    timer = parse_definition({"name": "t", "version": "1", "mode": "orchestration", "steps": steps})
    unknown = Definition("m", "1", "dataflow", False, ())  # type: ignore[arg-type]
    with pytest.raises(modes.ModeNotSupported, match="'dataflow' is not supported"):
        modes.of(unknown)
    assert modes.of(timer).name == "orchestration"


def test_a_mode_without_a_decision_is_advanced_only_from_outside() -> None:
    steps = [{"name": "t", "kind": "timer", "timeout": "1s"}]
    document = {"name": "t", "version": "1", "mode": "choreography", "steps": steps}
    definition = parse_definition(document)
    draft = lifecycle.start_draft(Registry([definition]), definition, "c-1", NOW)
    modes.follow(draft)
    assert [e.kind for e in draft.events] == [EventKind.INSTANCE_STARTED]
    with pytest.raises(DecisionRejected, match="is a choreography definition"):
        modes.decide(draft)


def test_a_work_kind_has_one_processor() -> None:
    rival = DefinitionMode("rival", frozenset(), read_counter, check_counter, {}, None, {1: RAN})
    with pytest.raises(ValueError, match="already has another processor"):
        modes.install(rival)
    assert "rival" not in modes.installed()
