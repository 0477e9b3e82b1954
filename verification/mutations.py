"""D7's negative controls: mutated definitions, histories and decision code.

Replaying a corpus proves little unless a changed definition or a doctored history is
*caught*. Each mutation here takes a captured history (and the current definitions) and
returns what replay should now reject, or None when the history does not exercise what
the mutation changes (a retry policy change says nothing about a history without
retries). Definition mutations re-pin the history to the mutated definition, as a
deploy that edited a version in place would; history mutations edit the events, as a
corrupted or hand-edited export would. Both are checked without the ledger, so the
detection is replay's, the decisions' and (for code-first runs) the journal's against
the code, not the fingerprints'.

A mutation applies only where the change is one replay must catch: a definition edit to
histories of the edited definition, and each history edit to the modes in which the
edited history is impossible (``Mutation`` names them). Elsewhere the edited history is
one the engine could have written (a second signal to a code-first run is buffered, its
result is whatever its code returns, and a state machine's states come from its own
handlers); there only the ledger tells, and I6 checks that.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from engine.model.definitions import Definition, Mode
from engine.model.events import Event, EventKind
from engine.model.registry import Registry
from engine.model.transitions import Draft, WorkItem
from engine.model.validation import parse_definition
from engine.modes import decide
from verification.replay_check import History, mode_of
from verification.workloads import FLOW_DOCUMENT

K = EventKind
Mutated = tuple[Registry, History] | None


@dataclass(frozen=True)
class Mutation:
    name: str
    apply: Callable[[History, random.Random], Mutated]


# Definition mutations -------------------------------------------------------------------


def _document(change: Callable[[dict[str, Any]], None]) -> Definition:
    import copy

    document = copy.deepcopy(FLOW_DOCUMENT)
    change(document)
    return parse_definition(document)


def _repin(history: History, definition: Definition) -> History:
    """The same history pinned to ``definition`` (as an in-place edit of the version)."""
    events = [
        replace(e, definition=definition.ref) if e.kind is K.INSTANCE_STARTED else e
        for e in history.events
    ]
    return History(history.instance_id, events, [], history.work)


def _definition_mutation(
    change: Callable[[dict[str, Any]], None], exercised: Callable[[History], bool]
) -> Callable[[History, random.Random], Mutated]:
    def apply(history: History, rng: random.Random) -> Mutated:
        if history.events[0].definition.name != FLOW_DOCUMENT["name"] or not exercised(history):
            return None
        definition = _document(change)
        return Registry([definition]), _repin(history, definition)

    return apply


def _has(kind: EventKind, step: str | None = None) -> Callable[[History], bool]:
    return lambda h: any(e.kind is kind and (step is None or e.step == step) for e in h.events)


def _retried_after_unknown(history: History) -> bool:
    """An attempt left unknown and then retried: what holding unknowns would forbid (an
    instance cancelled while in doubt never asked the policy)."""
    events = history.events
    return any(
        e.kind is K.ATTEMPT_UNKNOWN
        and any(r.kind is K.RETRY_SCHEDULED and r.step == e.step for r in events[n + 1 :])
        for n, e in enumerate(events)
    )


def _swap_first_steps(document: dict[str, Any]) -> None:
    steps = document["steps"]
    steps[0], steps[1] = steps[1], steps[0]


def _insert_step(document: dict[str, Any]) -> None:
    extra = dict(document["steps"][0], name="audit")
    extra.pop("compensation", None)
    document["steps"].insert(0, extra)


def _longer_timeout(document: dict[str, Any]) -> None:
    document["steps"][0]["timeout"] = "25s"


def _slower_retry(document: dict[str, Any]) -> None:
    document["steps"][0]["retry"] = dict(document["steps"][0]["retry"], initial_delay="150ms")


def _hold_unknowns(document: dict[str, Any]) -> None:
    for step in document["steps"]:
        if step.get("on_unknown"):
            step["on_unknown"] = "hold"


def _drop_signal(document: dict[str, Any]) -> None:
    document["steps"] = [s for s in document["steps"] if s["kind"] != "signal"]


# History mutations ----------------------------------------------------------------------


def _renumbered(history: History, events: list[Event]) -> History:
    events = [replace(e, sequence=n) for n, e in enumerate(events, start=1)]
    return History(history.instance_id, events, [], history.work)


def _history_mutation(
    edit: Callable[[list[Event], random.Random], list[Event] | None], modes: frozenset[Mode]
) -> Callable[[History, random.Random], Mutated]:
    def apply(history: History, rng: random.Random) -> Mutated:
        from verification.workloads import definitions

        registry = Registry(definitions())
        if mode_of(registry, history) not in modes:
            return None
        edited = edit(list(history.events), rng)
        if edited is None:
            return None
        return registry, _renumbered(history, edited)

    return apply


def _delete_event(events: list[Event], rng: random.Random) -> list[Event] | None:
    if len(events) < 3:
        return None
    del events[rng.randrange(1, len(events) - 1)]
    return events


def _delete_answered_event(events: list[Event], rng: random.Random) -> list[Event] | None:
    """Delete an event a later one of its step (or of the instance) follows from: a
    code-first run's last event of a step may be missing legitimately (a cancel came
    first, a buffered signal was never sent), one that a later event answers may not."""
    answered = [
        n
        for n in range(1, len(events) - 1)
        if not events[n].step or any(e.step == events[n].step for e in events[n + 1 :])
    ]
    if not answered:
        return None
    del events[rng.choice(answered)]
    return events


def _swap_events(events: list[Event], rng: random.Random) -> list[Event] | None:
    pairs = [n for n in range(1, len(events) - 1) if events[n].kind != events[n + 1].kind]
    if not pairs:
        return None
    n = rng.choice(pairs)
    events[n], events[n + 1] = events[n + 1], events[n]
    return events


def _change_key(events: list[Event], rng: random.Random) -> list[Event] | None:
    starts = [n for n, e in enumerate(events) if e.kind is K.ATTEMPT_STARTED]
    if not starts:
        return None
    n = rng.choice(starts)
    events[n] = replace(events[n], idempotency_key=f"{events[n].idempotency_key}-x")
    return events


def _duplicate_signal(events: list[Event], rng: random.Random) -> list[Event] | None:
    signals = [n for n, e in enumerate(events) if e.kind is K.SIGNAL_RECEIVED]
    if not signals:
        return None
    n = signals[0]
    events.insert(n + 1, replace(events[n], idempotency_key="another-signal"))
    return events


def _time_backwards(events: list[Event], rng: random.Random) -> list[Event] | None:
    if len(events) < 3:
        return None
    n = rng.randrange(2, len(events))
    events[n] = replace(events[n], occurred_at=events[n - 1].occurred_at - timedelta(seconds=1))
    return events


def _change_last_result(events: list[Event], rng: random.Random) -> list[Event] | None:
    last = [n for n, e in enumerate(events) if e.kind is K.ATTEMPT_SUCCEEDED]
    if not last or events[-1].kind is not K.COMPLETED:
        return None
    n = last[-1]
    events[n] = replace(events[n], data='{"doctored":true}')
    return events


# Decision code --------------------------------------------------------------------------


def random_keys(rng: random.Random) -> Callable[[Draft], None]:
    """Decision code that draws randomness before an id (sdk-python #1109's mistake):
    the engine's ``decide``, with every key it hands out (in its events and in its
    work's dispatch) drawn afresh each time it decides."""

    def drifting(draft: Draft) -> None:
        decide(draft)
        suffix = f"-{rng.randrange(10**6)}"
        draft.events[:] = [
            replace(e, idempotency_key=e.idempotency_key + suffix) if e.idempotency_key else e
            for e in draft.events
        ]
        draft.work[:] = [_drifted(item, suffix) for item in draft.work]

    return drifting


def _drifted(item: WorkItem, suffix: str) -> WorkItem:
    dispatch = json.loads(item.payload or "null")
    if not isinstance(dispatch, dict) or "key" not in dispatch:
        return item
    return replace(item, payload=json.dumps({**dispatch, "key": dispatch["key"] + suffix}))


_DEFINITION_CHANGES = (
    ("first two steps swapped", _swap_first_steps, _has(K.ACTIVITY_SCHEDULED)),
    ("a step inserted first", _insert_step, _has(K.ACTIVITY_SCHEDULED)),
    ("a timeout changed", _longer_timeout, _has(K.ATTEMPT_STARTED, "reserve")),
    ("a retry delay changed", _slower_retry, _has(K.RETRY_SCHEDULED, "reserve")),
    ("unknown outcomes held", _hold_unknowns, _retried_after_unknown),
    ("the signal step removed", _drop_signal, _has(K.SIGNAL_RECEIVED)),
)
"""Each definition change, and the history it needs (one that exercises the change)."""
STEP_LISTS = frozenset({Mode.ORCHESTRATION, Mode.CHOREOGRAPHY})
_HISTORY_EDITS = (
    ("an event deleted", _delete_event, STEP_LISTS),
    ("an answered event deleted", _delete_answered_event, frozenset({Mode.CODE})),
    ("two events swapped", _swap_events, frozenset(Mode)),
    ("an idempotency key changed", _change_key, frozenset(Mode)),
    ("a signal duplicated", _duplicate_signal, STEP_LISTS),
    ("time goes backwards", _time_backwards, frozenset(Mode)),
    ("the last result doctored", _change_last_result, STEP_LISTS),
)
"""Each history edit, and the modes in which the edited history is impossible (a
code-first run buffers a second signal and returns what its code computes; a state
machine's states are its handlers' results, so one deleted leaves a history its
handlers could have written)."""
MUTATIONS = (
    *(
        Mutation(f"definition: {what}", _definition_mutation(change, exercised))
        for what, change, exercised in _DEFINITION_CHANGES
    ),
    *(
        Mutation(f"history: {what}", _history_mutation(edit, modes))
        for what, edit, modes in _HISTORY_EDITS
    ),
)
