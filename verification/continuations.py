"""Runs that continued as new, as the harness must see them: a chain, and J5.

A code-first run that calls ``ctx.continue_as_new`` ends ``continued as new`` and its
successor (``NAME/ID+2``, then ``+3``, ...) starts in the same PostgreSQL transaction
(``engine.modes.code.continuation``). So what a drill started is done only when the
last run of its chain ended, each generation's steps and effects are its own (its
step_ids name its own run id), and a run that continued is neither lost nor finished
by itself: its successor carries it on. ``chain`` follows the successors in replayed
states, ``live_chain`` in the store while a drill runs.

**J5 continuation chained**, per run that continued as new and per run named as one's
successor:

- its successor exists, was started exactly once (one ``instance_started``, by one
  transition of the ledger), with the input and on the version the continuation named,
  by the very PostgreSQL transaction that committed the continuation (never apart from
  it: the run would be over with nothing carrying it on, if only for a moment, and for
  good after a crash in between);
- no run is named as the successor of a run (``NAME/ID+N`` beside ``NAME/ID`` or
  ``NAME/ID+(N-1)``) unless that run continued as new to it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

import psycopg

from engine.model.events import EventKind
from engine.model.instance import Instance, InstanceStatus
from engine.modes.code.continuation import predecessor_of
from engine.store import catalog, reads
from engine.store.errors import InstanceNotFound
from engine.store.store import Store
from verification.code_checks import CODE_RUNS
from verification.findings import Findings

K = EventKind
CONTINUED = InstanceStatus.CONTINUED_AS_NEW
CONTINUATIONS = f"""
SELECT h.instance_id, h.successor_id, h.definition_version, h.data,
       (SELECT t.xact_id::text FROM transitions t
        WHERE t.instance_id = h.instance_id AND t.expected_sequence < h.sequence
          AND h.sequence <= t.committed_sequence) AS ended_by,
       i.instance_id IS NOT NULL AS exists,
       s.definition_version, s.data,
       (SELECT count(*) FROM history a
        WHERE a.instance_id = h.successor_id AND a.kind = {int(K.INSTANCE_STARTED)}) AS starts,
       (SELECT array_agg(t.xact_id::text) FROM transitions t
        WHERE t.instance_id = h.successor_id AND t.expected_sequence = 0) AS started_by
FROM history h
LEFT JOIN instances i ON i.instance_id = h.successor_id
LEFT JOIN history s ON s.instance_id = h.successor_id AND s.sequence = 1
WHERE h.kind = {int(K.CONTINUED_AS_NEW)}
ORDER BY h.instance_id
"""
"""Each continuation: its run, the successor it named (its version and input), the
transaction that committed it, and what the successor's start is in history and in the
ledger."""


@dataclass(frozen=True)
class Continuation:
    """One row of ``CONTINUATIONS``."""

    run: str
    successor: str
    version: str
    input: bytes | None
    ended_by: str | None
    exists: bool
    started_version: str | None
    started_input: bytes | None
    starts: int
    started_by: list[str] | None

    def problems(self) -> list[str]:
        """What is wrong with this continuation's successor (none when nothing)."""
        said = f"{self.run} continued as new as {self.successor}"
        if not self.exists:
            return [f"{said}, which does not exist: nothing carries the run on"]
        problems = []
        transactions = self.started_by or []
        if self.starts != 1 or len(transactions) != 1:
            problems.append(
                f"{said}, started {self.starts} times by {len(transactions)} transitions, not once"
            )
        if self.ended_by is None or transactions != [self.ended_by]:
            problems.append(
                f"{said}, started by transaction {', '.join(transactions) or 'none'}, not by "
                f"{self.ended_by or 'an unknown one'} that ended the run: apart from it"
            )
        if self.started_version != self.version or not _same(self.input, self.started_input):
            problems.append(
                f"{said} on version {self.version}, but it started on "
                f"{self.started_version} with another input"
            )
        return problems


def _same(one: bytes | None, other: bytes | None) -> bool:
    """Two recorded JSON values are the same value (however each was spelled)."""
    if one is None or other is None:
        return one is other
    return json.loads(bytes(one)) == json.loads(bytes(other))


async def check(conn: psycopg.AsyncConnection, findings: Findings) -> None:
    """J5 (see the module), over every run of the schema. The runs are read first: a
    successor is committed with its continuation, so one read then has its continuation
    read after it, even while workers still run (a mid-drill check)."""
    runs = {run for (run,) in await (await conn.execute(CODE_RUNS)).fetchall()}
    rows = await (await conn.execute(CONTINUATIONS)).fetchall()
    continuations = [Continuation(*row) for row in rows]
    problems = [p for c in continuations for p in c.problems()]
    continued = {c.run: c.successor for c in continuations}
    named = {run: before for run in runs if (before := predecessor_of(run)) in runs}
    problems += [
        f"{run} exists as the successor of {before}, which "
        + (f"continued as {continued[before]}" if before in continued else "did not continue")
        for run, before in sorted(named.items())
        if continued.get(before) != run
    ]
    findings.stats["continuations"] += len(continuations)
    findings.add("J5", len(continuations) + len(named), problems)


def chain(states: Mapping[str, Instance], instance_id: str) -> list[str]:
    """``instance_id`` and the successors it continued as, in order, as far as
    ``states`` holds them (the last one named is included even when it is missing)."""
    ids = [instance_id]
    while (state := states.get(ids[-1])) is not None and state.status is CONTINUED:
        ids.append(state.successor_id)
    return ids


async def live_chain(store: Store, instance_id: str) -> list[Instance]:
    """The states of ``instance_id`` and of each successor it continued as, read now
    (one that does not exist ends the list early: its predecessor is then the last)."""
    registry = await catalog.load_registry(store)
    states = [await reads.inspect(store, registry, instance_id)]
    while states[-1].status is CONTINUED:
        try:
            states.append(await reads.inspect(store, registry, states[-1].successor_id))
        except InstanceNotFound:
            break
    return states
