"""Who started an instance is kept on its ``instance_started`` (``Event.started_by``):
an observation of the start, like its trace context, that replay and the transition's
fingerprint leave out (a start retried by another caller is the same start) while the
exchange form, and so ``wayline history --json`` and a retention export, keep it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from engine.decide import lifecycle
from engine.model.description import describe_instance
from engine.model.errors import EventInvalid
from engine.model.events import EventKind, event_from_json, event_to_json
from engine.model.registry import Registry
from engine.model.transitions import Transition
from engine.modes import decide
from engine.replay.fold import replay
from engine.replay.snapshots import restore, take
from tests.unit.histories import RICH, T0


def start(started_by: str = "") -> tuple[Registry, Transition]:
    registry = Registry([RICH])
    draft = lifecycle.start_draft(
        registry, RICH, "order-1", T0, {"sku": "mug"}, started_by=started_by
    )
    decide(draft)
    return registry, draft.build("start")


def test_who_started_an_instance_is_kept_outside_its_fingerprint_and_replayed() -> None:
    registry, by_ann = start("ann")
    _, by_nobody = start()
    first = by_ann.events[0]
    assert first.kind is EventKind.INSTANCE_STARTED and first.started_by == "ann"
    assert by_ann.fingerprint == by_nobody.fingerprint  # so a retry by bob joins ann's
    assert event_to_json(first)["started_by"] == "ann"
    assert "started_by" not in event_to_json(by_nobody.events[0])
    assert event_from_json(event_to_json(first)) == first

    state = replay(registry, list(by_ann.events))
    assert state.started_by == "ann"
    assert state.digest == replay(registry, list(by_nobody.events)).digest
    assert restore(registry, take(state)).started_by == "ann"  # what inspect reads
    assert f"started {first.occurred_at:%Y-%m-%d}" in describe_instance(state)
    assert "by ann" in describe_instance(state)
    assert "started " not in describe_instance(replay(registry, list(by_nobody.events)))


def test_only_a_start_names_who_started_it_and_only_as_an_actor() -> None:
    _, transition = start("ann")
    first, *rest = transition.events
    with pytest.raises(EventInvalid, match="may not carry started_by"):
        event_from_json({**event_to_json(rest[0]), "started_by": "ann"})
    with pytest.raises(EventInvalid, match="started_by: actor"):
        event_from_json({**event_to_json(first), "started_by": "ann smith"})
    assert replace(first, started_by="token:ab12cd34").started_by == "token:ab12cd34"
