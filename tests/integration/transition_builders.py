"""Real transitions for store tests, built by the pure core exactly as the engine does.

The store checks a transition's structure (``check_transition``) and then what needs
the database (position, pin, identity, uniqueness), so its tests need transitions the
core would really produce, at chosen positions and times. ``Flow`` builds them with Draft and the
decision builders against a replayed state. The deliberately wrong ones (a reused work
id, a foreign definition pin, a borrowed transition id) are ``relabel``-ed copies made
with ``make_transition``: they still pass every structural check, so only the store can
object to them.

``ledger`` reads back what one instance has in every table, so a test can say "nothing
was written" or "one set of rows" in one comparison.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from engine.decide import decisions, lifecycle
from engine.decide.operator_actions import Action
from engine.decide.operator_commands import record_command
from engine.model.definitions import Definition, DefinitionRef
from engine.model.events import EventKind
from engine.model.instance import Instance
from engine.model.registry import MigrationEdge, Registry
from engine.model.transitions import Draft, Transition, WorkItem, make_transition
from engine.model.validation import parse_definition
from engine.modes import decide
from engine.replay.fold import replay
from engine.store import reads
from engine.store.store import Store

BASE_TIME = datetime(2026, 1, 1, tzinfo=UTC)
"""The time of every start unless a test picks another (the core takes time as a value)."""

STEP_GAP = timedelta(seconds=1)
"""Default spacing of decisions: one step per committed position keeps times ordered."""

PAIR = "store-pair"
"""Starts with a parallel of two activities (x, y): two independent decisions at once."""

SINGLE = "store-single"
"""One compensable activity ``a``: completion, cancellation and migration paths."""

RETRY = {"max_attempts": 3, "initial_delay": "1s", "max_delay": "4s"}


def _activity(name: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "kind": "activity",
        "target": f"test.{name}",
        "timeout": "10s",
        "input_limit": 1000,
        "result_limit": 1000,
        "retry": RETRY,
        **extra,
    }


def pair_definition() -> Definition:
    return parse_definition(
        {
            "name": PAIR,
            "version": "1",
            "mode": "orchestration",
            "steps": [
                {"name": "p", "kind": "parallel", "branches": ["x", "y"], "fan_out_limit": 2},
                _activity("x"),
                _activity("y"),
                {"name": "j", "kind": "join", "branches": ["x", "y"]},
            ],
        }
    )


def single_definition(version: str = "1") -> Definition:
    compensation = {"target": "test.undo", "timeout": "5s", "result_limit": 100, "retry": RETRY}
    return parse_definition(
        {
            "name": SINGLE,
            "version": version,
            "mode": "orchestration",
            "steps": [_activity("a", compensation=compensation)],
        }
    )


@dataclass(frozen=True)
class Catalog:
    """The definitions every store test can use, in one registry (with a v1→v2 edge)."""

    registry: Registry
    pair: Definition
    single: Definition
    single_v2: Definition

    def flow(self, definition: Definition, instance_id: str) -> Flow:
        return Flow(self.registry, definition, instance_id)


def catalog() -> Catalog:
    pair, single, single_v2 = pair_definition(), single_definition("1"), single_definition("2")
    registry = Registry(
        [pair, single, single_v2],
        [MigrationEdge(SINGLE, "1", "2", lambda value: value)],
    )
    return Catalog(registry, pair, single, single_v2)


@dataclass(frozen=True)
class Flow:
    """The decisions of one instance, each built against a replayed state.

    Every builder after the start takes the state it decides on, so a test can build
    two competing transitions at one position, or rebuild a loser after reloading.
    ``at`` defaults to one STEP_GAP per position after BASE_TIME.
    """

    registry: Registry
    definition: Definition
    instance_id: str

    def start(self, input: Any = None, *id_parts: object, at: datetime = BASE_TIME) -> Transition:
        """The start and its first decision, with the engine's idempotent start id."""
        draft = lifecycle.start_draft(self.registry, self.definition, self.instance_id, at, input)
        decide(draft)
        return draft.build(*(id_parts or ("start",)))

    def after(self, *transitions: Transition) -> Instance:
        """The state after ``transitions`` (in order), replayed from their events."""
        return replay(self.registry, [e for t in transitions for e in t.events])

    async def load(self, store: Store) -> Instance:
        """The state as committed, replayed from the store's history."""
        return await reads.inspect(store, self.registry, self.instance_id)

    def _draft(self, state: Instance, at: datetime | None) -> Draft:
        return Draft(self.registry, state, at or BASE_TIME + STEP_GAP * state.sequence)

    def command(
        self,
        state: Instance,
        command_id: str,
        action: Action,
        at: datetime | None = None,
        **effect: Any,
    ) -> Transition:
        """An audited operator command and the decision that follows it."""
        draft = self._draft(state, at)
        record_command(draft, command_id, action, "tester", f"test {action.value}", **effect)
        decide(draft)
        return draft.build("command", command_id)

    def attempt_started(self, state: Instance, step: str, at: datetime | None = None) -> Transition:
        """The first attempt of ``step`` starts (as a processor records it)."""
        draft = self._draft(state, at)
        key = decisions.attempt_key(self.instance_id, step, 1)
        decisions.start_activity_attempt(draft, step, 1, key)
        return draft.build()

    def attempt_succeeded(
        self, state: Instance, step: str, result: Any = None, at: datetime | None = None
    ) -> Transition:
        """The running attempt of ``step`` succeeds, and the next decision rides with it."""
        draft = self._draft(state, at)
        attempt = state.activities[step].attempt
        decisions.record_outcome(draft, step, attempt, EventKind.ATTEMPT_SUCCEEDED, result=result)
        decide(draft)
        return draft.build()

    def compensation_started(self, state: Instance, step: str) -> Transition:
        draft = self._draft(state, None)
        key = decisions.attempt_key(self.instance_id, step, 1, "compensate")
        decisions.start_compensation_attempt(draft, step, 1, key)
        return draft.build()

    def compensation_succeeded(self, state: Instance, step: str) -> Transition:
        """The compensation succeeds and the unwinding instance settles (cancelled)."""
        draft = self._draft(state, None)
        attempt = state.compensations[step].attempt
        decisions.record_outcome(draft, step, attempt, EventKind.COMPENSATION_SUCCEEDED)
        decide(draft)
        return draft.build()


def relabel(
    transition: Transition,
    *,
    transition_id: str | None = None,
    definition: DefinitionRef | None = None,
    work: Iterable[WorkItem] | None = None,
) -> Transition:
    """The same events under another id, pin or work list: what a buggy caller could send."""
    return make_transition(
        transition_id or transition.transition_id,
        definition or transition.definition,
        transition.expected_sequence,
        list(transition.events),
        list(transition.work if work is None else work),
    )


@dataclass(frozen=True)
class Ledger:
    """Everything the store holds for one instance, as comparable values."""

    instance: tuple[Any, ...] | None
    transitions: tuple[tuple[Any, ...], ...]
    history: tuple[int, ...]
    work: tuple[str, ...]

    @property
    def rows(self) -> tuple[tuple[int, ...], tuple[str, ...]]:
        """History sequences and work ids, comparable with ``rows_of``."""
        return self.history, self.work


INSTANCE_STATE = """
SELECT sequence, status, definition_version, archived_at IS NOT NULL
FROM instances WHERE instance_id = %(id)s
"""
TRANSITION_ROWS = """
SELECT transition_id, fingerprint, expected_sequence, committed_sequence
FROM transitions WHERE instance_id = %(id)s ORDER BY committed_sequence
"""
HISTORY_SEQUENCES = "SELECT sequence FROM history WHERE instance_id = %(id)s ORDER BY sequence"
WORK_IDS = "SELECT work_id FROM work WHERE instance_id = %(id)s ORDER BY work_id"


async def ledger(conn: psycopg.AsyncConnection, instance_id: str) -> Ledger:
    """Read one instance's rows in every table (on an autocommit connection)."""
    params = {"id": instance_id}
    instance = await (await conn.execute(INSTANCE_STATE, params)).fetchone()
    transitions = await (await conn.execute(TRANSITION_ROWS, params)).fetchall()
    history = await (await conn.execute(HISTORY_SEQUENCES, params)).fetchall()
    work = await (await conn.execute(WORK_IDS, params)).fetchall()
    return Ledger(
        instance,
        tuple(transitions),
        tuple(r[0] for r in history),
        tuple(r[0] for r in work),
    )


def rows_of(*transitions: Transition) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """The history sequences and work ids ``transitions`` write, as ``ledger`` reads them."""
    history = tuple(e.sequence for t in transitions for e in t.events)
    work = tuple(sorted(w.work_id for t in transitions for w in t.work))
    return history, work
