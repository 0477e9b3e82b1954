"""Snapshots of replayed state (issue 23): folding from any snapshot plus the events after
it gives exactly the full fold, in every mode; a snapshot this build may not trust is
refused; and a reader never folds a whole interval after the newest snapshot."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.decide import lifecycle
from engine.model.canonical import canonical_json
from engine.model.definitions import Definition
from engine.model.events import Event
from engine.model.instance import Instance
from engine.model.limits import MAX_TRANSITION_EVENTS
from engine.model.registry import Registry
from engine.model.snapshots import Snapshot
from engine.model.transitions import Draft
from engine.modes.code import waits
from engine.replay import snapshots
from engine.replay.fold import apply, replay
from engine.replay.snapshots import FOLD_VERSION, SNAPSHOT_INTERVAL_EVENTS, restore, take
from tests.unit.histories import Run, legal_runs
from tests.unit.machines import Document, machine_documents
from tests.unit.test_code_fold import REGISTRY, RUN, SAGA, T0, K, attempt, race, signal, step
from tests.unit.test_machine_fold import walk_to_the_end


def from_each_position(registry: Registry, events: list[Event]) -> None:
    """At every position a transition could end (no operator command awaiting its
    effect), a snapshot restores that state exactly, and folding the rest onto it ends
    where the full fold ends, digest and all. Each snapshot follows the previous one of
    the same instance, so the entry texts it copies from that one are checked too."""
    full = replay(registry, events)
    state: Instance | None = None
    for position, event in enumerate(events, start=1):
        state = apply(registry, state, event)
        if state.pending_command is not None:
            continue
        taken = take(state)
        restored = restore(registry, taken)
        assert restored == state and restored.digest == state.digest
        assert restored.trace_context == state.trace_context
        assert restored.spec is registry.resolve(state.definition)
        assert restore(registry, _unsectioned(taken)) == state, "a snapshot of before sections"
        for rest in events[position:]:
            restored = apply(registry, restored, rest)
        assert restored == full and restored.digest == full.digest
        assert take(restored) == take(full), "entries copied as restored are encoded alike"


def _unsectioned(taken: Snapshot) -> Snapshot:
    """``taken`` as a snapshot was written before its mappings had sections of their own:
    one line, each mapping inline as a list of [key, entry] pairs."""
    head, *lines = taken.state.split("\n")
    doc = json.loads(head)
    while lines:
        name, keys = json.loads(lines[0])
        doc[name] = [[key, json.loads(entry)] for key, entry in zip(keys, lines[1:], strict=False)]
        lines = lines[1 + len(keys) :]
    return _rewritten(taken, canonical_json(doc))


def _rewritten(taken: Snapshot, text: str) -> Snapshot:
    """``taken`` holding ``text``, with its digest: damage the digest cannot tell."""
    return replace(taken, state=text, digest=hashlib.sha256(text.encode()).hexdigest())


@settings(max_examples=60, deadline=None)
@given(legal_runs())
def test_folding_a_step_list_from_any_snapshot_equals_the_full_fold(run: Run) -> None:
    from_each_position(run.registry, run.history)


@settings(max_examples=40, deadline=None)
@given(machine_documents(), st.data())
def test_folding_a_machine_from_any_snapshot_equals_the_full_fold(
    document: Document, data: st.DataObject
) -> None:
    walk, _ = walk_to_the_end(document, data)
    from_each_position(walk.registry, walk.events)


def test_folding_a_code_run_from_any_snapshot_equals_the_full_fold() -> None:
    """A code-first run's journal, declared steps (with their options), inbox and waits."""
    first = lifecycle.start_draft(REGISTRY, SAGA, RUN, T0, {"sku": "mug"})
    draft = Draft(REGISTRY, first.state, T0)
    key = step(draft, "charge", retries=2)
    attempt(draft, key, 1, 1, K.ATTEMPT_SUCCEEDED, {"ok": 1})
    signal(draft, "cancelled", "c-1", "no")
    signal(draft, "paid", "p-1", {"by": "ada"})
    race(draft, "paid", "cancelled")
    waits.resolve(draft)
    assert draft.state.journal and draft.state.dynamic_steps and draft.state.inbox
    from_each_position(REGISTRY, [*first.events, *draft.events])


@settings(max_examples=20, deadline=None)
@given(legal_runs())
def test_a_snapshot_this_build_may_not_trust_is_refused(run: Run) -> None:
    taken = take(run.state)
    assert restore(run.registry, replace(taken, fold_version=FOLD_VERSION + 1)) is None
    assert restore(run.registry, replace(taken, digest="0" * 64)) is None
    assert restore(run.registry, replace(taken, sequence=taken.sequence + 1)) is None
    assert restore(run.registry, replace(taken, state=taken.state[:-1])) is None
    head, *sections = taken.state.split("\n")
    for damage in ({"sequence": "1"}, {"status": "lost"}, {"unknown_field": 1}):
        text = "\n".join([canonical_json({**json.loads(head), **damage}), *sections])
        assert restore(run.registry, _rewritten(taken, text)) is None
    assert sections, "a run that scheduled a step has its activities in a section"
    for cut in (sections[:-1], [*sections, sections[-1]], [*sections, *sections]):
        assert restore(run.registry, _rewritten(taken, "\n".join([head, *cut]))) is None
    unknown = ["unknown_field", *json.loads(sections[0])[1:]]
    text = "\n".join([head, canonical_json(unknown), *sections[1:]])
    assert restore(run.registry, _rewritten(taken, text)) is None
    other: Definition = replace(run.spec, steps=run.spec.steps[:-1])
    assert restore(Registry([other]), taken) is None, "another definition under its name"
    assert restore(Registry([]), taken) is None, "a definition the registry lacks"


@given(st.lists(st.integers(1, MAX_TRANSITION_EVENTS), min_size=1, max_size=400))
def test_fewer_than_an_interval_of_events_follow_the_newest_snapshot(sizes: list[int]) -> None:
    newest, position = 0, 0
    for size in sizes:
        if snapshots.due(position, position + size):
            newest = position + size
        position += size
        assert position - newest < SNAPSHOT_INTERVAL_EVENTS
