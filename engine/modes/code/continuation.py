"""Continuing a code-first run as new: the run ends, its successor starts, together.

A run whose journal would grow without end (a loop that polls, a subscription renewed
each month) calls ``ctx.continue_as_new(input)``. Its decision records
``continued_as_new`` (the successor's id and pinned version) and the successor's start
commits in the same PostgreSQL transaction, fenced by the decision's lease
(``leased_commits.commit``'s ``companions``), so the run never ends without a successor
and no successor starts for a run that did not end.

The successor of run ``NAME/ID`` is ``NAME/ID+2``, then ``+3`` and on (``successor_of``):
derived, so a redelivered decision names the same one. It runs the workflow's latest
published version, so a long-lived run picks up new code at each continuation, and has
no parent. As at a return, the run's open waits end with it and its compensations are
not run; runs it spawned go on, no longer awaited.
"""

from __future__ import annotations

import re

from engine.decide import lifecycle
from engine.model.definitions import DefinitionRef
from engine.model.events import EventKind
from engine.model.transitions import Draft, Transition
from engine.modes import decide
from engine.modes.code.runs import run_id

GENERATION = re.compile(r"^(?P<id>.+)\+(?P<n>[1-9][0-9]*)$")
"""A successor's run id: its first run's id, ``+`` and its generation (2 and up)."""


def successor_of(instance_id: str) -> str:
    """The id of the run that continues run ``instance_id`` (``NAME/ID``): ``ID+2`` for
    a first run, the next generation for a successor. InputRefused when it would be
    longer than an id may be."""
    name, _, id = instance_id.partition("/")
    first, generation = _generation(id)
    return run_id(name, f"{first}+{generation + 1}")


def predecessor_of(instance_id: str) -> str:
    """The id of the run ``instance_id`` would continue if it is a successor (``ID`` for
    ``ID+2``, ``ID+2`` for ``ID+3``), '' when it cannot be one. Only a name: a run may be
    started as ``ID+2`` by hand, so whether it continued one is read
    (``engine.api.queries.Queries.predecessor``)."""
    name, _, id = instance_id.partition("/")
    first, generation = _generation(id)
    if not name or generation < 2:
        return ""
    return f"{name}/{first}" if generation == 2 else f"{name}/{first}+{generation - 1}"


def _generation(id: str) -> tuple[str, int]:
    """A run id as (its first run's id, its generation): ``("r", 3)`` for ``r+3``, and
    ``(id, 1)`` for an id that names no successor (``r``, ``r+1``, ``r+b``), so that
    ``successor_of`` and ``predecessor_of`` undo each other."""
    found = GENERATION.fullmatch(id)
    if found is None or int(found["n"]) < 2:
        return id, 1
    return found["id"], int(found["n"])


def record(draft: Draft, input: object, latest: DefinitionRef) -> None:
    """End the run continued as new by ``successor_of`` it, on ``latest``, with ``input``
    (JSON). InputRefused when the successor's id would be too long."""
    lifecycle.continue_as_new(draft, successor_of(draft.instance_id), latest, input)


def successor_start(draft: Draft) -> tuple[Transition, ...]:
    """The successor's start, to commit with ``draft`` (none unless ``draft`` continued
    the run as new); its first decision is due at once."""
    ending = next((e for e in draft.events if e.kind is EventKind.CONTINUED_AS_NEW), None)
    if ending is None:
        return ()
    assert ending.definition is not None
    registry = draft.registry
    definition = registry.resolve(ending.definition)
    start = lifecycle.start_draft(
        registry, definition, ending.successor_id, draft.now, ending.value()
    )
    decide(start)
    return (start.build("start"),)
