"""The invariants of state machine executions (see ``verification.invariants``).

A machine's advance writes the application's rows in the transaction that records the
state it returns (retry ``transactional``); the drill machine (``verification.
drill_machine``), and a drill plan's stubbed machine, write one row per advance and one
per compensation, each with the id of the transaction it ran in. Against history and
the transitions ledger:

- **M1 writes**: every committed ``state_entered`` has exactly one advance row, written
  by the very transaction that committed it, and no advance row lacks its transition
  (a write whose transition rolled back, or one committed twice); the same for every
  ``compensation_succeeded`` and its compensation row;
- **M2 cancellation**: no state was entered after the execution's cancellation was
  requested (a cancellation fences the advance in flight);
- **M3 ends**: each execution the drill started ended as the drill expects (completed
  in its final state after exactly its steps, cancelled, or dead);
- **M4 parents**: at no moment of the drill were two executions of a machine active
  for one parent, ended executions included: each execution's span is read from its
  history (``Lifespan``) and its parent from its start data, rather than from the
  ``parent_key`` column whose index is what keeps it. Executions alone with their
  parent are not counted: only those that shared it exercise the invariant.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import psycopg

from engine.model.events import TERMINAL_KINDS, EventKind
from engine.model.instance import Instance, InstanceStatus
from verification.findings import Findings
from verification.workloads import Execution

K = EventKind
RECORDED = """
SELECT h.instance_id, h.kind, count(*) OVER (PARTITION BY h.instance_id, h.kind
                                             ORDER BY h.sequence), t.xact_id::text
FROM history h
JOIN instances i ON i.instance_id = h.instance_id
JOIN definitions d ON d.name = i.definition_name AND d.version = i.definition_version
                  AND d.spec ->> 'mode' = 'machine'
LEFT JOIN transitions t ON t.instance_id = h.instance_id
     AND h.sequence > t.expected_sequence AND h.sequence <= t.committed_sequence
WHERE h.kind IN (%(entered)s, %(compensated)s)
"""
"""Each state entered (numbered in its execution: the transitions made) and each
compensation that succeeded, with the transaction that committed it: of every machine
a drill runs, ``drill.machine`` or a drill plan's stubbed machine (``verification.
plan_stubs``), whose advances write the same rows."""
WRITES = """
SELECT execution, compensation, transitions, xact_id::text FROM drill_machine_writes
"""
ENTERED_AFTER_CANCEL = """
SELECT h.instance_id, h.step_name, h.sequence, c.sequence FROM history h
JOIN history c ON c.instance_id = h.instance_id AND c.kind = %(cancel)s
              AND c.sequence < h.sequence
WHERE h.kind = %(entered)s
ORDER BY h.instance_id, h.sequence
"""
CANCELLATIONS = "SELECT count(*) FROM history WHERE kind = %(cancel)s"
LIFESPANS = """
SELECT i.instance_id, i.definition_name, convert_from(s.data, 'UTF8')::json ->> 'parent',
       (SELECT h.occurred_at FROM history h
        WHERE h.instance_id = i.instance_id AND h.sequence > t.committed_sequence
        ORDER BY h.sequence LIMIT 1),
       (SELECT h.occurred_at FROM history h
        WHERE h.instance_id = i.instance_id AND h.kind = ANY(%(ends)s)
        ORDER BY h.sequence LIMIT 1)
FROM instances i
JOIN definitions d ON d.name = i.definition_name AND d.version = i.definition_version
                  AND d.spec ->> 'mode' = 'machine'
JOIN history s ON s.instance_id = i.instance_id AND s.sequence = 1
JOIN transitions t ON t.instance_id = i.instance_id AND t.expected_sequence = 0
"""
"""Every machine execution, ended or not: its machine, the parent its start data names,
the time of its first event after the transaction that started it, and of its end."""
CHECKED_AT = "SELECT statement_timestamp()"


async def writes(conn: psycopg.AsyncConnection, findings: Findings) -> None:
    """M1: one application write per committed transition, in its transaction."""
    params = {
        "entered": int(K.STATE_ENTERED),
        "compensated": int(K.COMPENSATION_SUCCEEDED),
    }
    recorded = await (await conn.execute(RECORDED, params)).fetchall()
    written = [(_key(e, c, n), x) for e, c, n, x in await (await conn.execute(WRITES)).fetchall()]
    rows = Counter(key for key, _ in written)
    by_xact = dict(written)
    problems, expected = [], set()
    for execution, kind, n, xact in recorded:
        key = _key(execution, kind == K.COMPENSATION_SUCCEEDED, n)
        expected.add(key)
        if rows[key] != 1:
            problems.append(f"{execution}: {_what(key)} committed with {rows[key]} writes")
        elif by_xact[key] != xact:
            problems.append(
                f"{execution}: {_what(key)} committed in transaction {xact}, "
                f"its write in {by_xact[key]}"
            )
    problems += [
        f"{key[0]}: {_what(key)} written {count} times without its transition"
        for key, count in rows.items()
        if key not in expected
    ]
    findings.stats["machine_writes"] += sum(rows.values())
    findings.stats["machine_transitions"] += len(recorded)
    findings.add("M1", len(recorded) + sum(rows.values()), problems)


Key = tuple[str, bool, int]


def _key(execution: str, compensation: bool, n: int) -> Key:
    """What one write stands for: transition ``n`` of ``execution``, or its compensation
    (one per execution, whatever the transitions it followed)."""
    return (execution, compensation, 0 if compensation else n)


def _what(key: Key) -> str:
    _, compensation, n = key
    return "its compensation" if compensation else f"transition {n}"


async def cancellation(conn: psycopg.AsyncConnection, findings: Findings) -> None:
    """M2: no state entered after a cancellation was requested."""
    params = {"cancel": int(K.CANCELLATION_REQUESTED), "entered": int(K.STATE_ENTERED)}
    (total,) = await (await conn.execute(CANCELLATIONS, params)).fetchone()
    late = await (await conn.execute(ENTERED_AFTER_CANCEL, params)).fetchall()
    findings.add(
        "M2",
        total,
        [f"{i}: entered {s} at {n}, after the cancellation at {c}" for i, s, n, c in late],
    )


def ends(
    findings: Findings, states: dict[str, Instance], expected: dict[str, Execution], quiet: bool
) -> None:
    """M3: every execution ended as expected (after the quiet phase only)."""
    if not quiet:
        return
    problems = []
    for execution_id, execution in expected.items():
        state = states.get(execution_id)
        if state is None:
            continue  # I1 reports an execution that does not replay or is missing
        findings.stats[f"machines_{state.status.label}"] += 1
        if state.status.label not in execution.ends:
            wanted = " or ".join(sorted(execution.ends))
            problems.append(f"{execution_id}: {state.status.label}, expected {wanted}")
        elif state.status is InstanceStatus.COMPLETED:
            machine = state.machine
            if machine is None or machine.transitions != execution.steps:
                made = machine.transitions if machine else 0
                problems.append(
                    f"{execution_id}: completed after {made} transitions, not {execution.steps}"
                )
    findings.add("M3", len(expected), problems)


@dataclass(frozen=True)
class Lifespan:
    """When one execution was surely active, as its history bounds it.

    An event's time is taken by the process that decides it, on a clock that follows the
    server's and is never ahead of it (``engine.store.clock``), before its transaction
    commits. So the start's own time says nothing of when the execution became active:
    a start may be stamped, then wait for the execution it must follow to end. Every
    later transition is decided from the committed start, though (it expects the
    start's position): the first event after the start was stamped once the execution
    was active. And an end is stamped before it commits: the execution was active until
    then at least.
    """

    execution: str
    machine: str
    parent: str
    active_by: datetime | None
    """Its first event after its start transaction; None: none yet."""
    ended: datetime | None
    """Its terminal event; None: still active."""


NEVER = datetime.max.replace(tzinfo=UTC)
"""The end of an execution still active."""
CLOCK_SLACK = timedelta(milliseconds=250)
"""How much two executions' sure spans must overlap to be named. Event times come from
the deciding processes' store clocks, each behind the server's by up to the round trip
of its last reading (``engine.store.clock``): on a loaded machine one such reading can
take longer than the few milliseconds between an end and the next start's first move,
which would otherwise read as an overlap that never happened. Two executions admitted at
once are caught as it happens by M2's own check; this one catches any that stayed
active together for longer."""


def overlaps(lifespans: list[Lifespan], checked_at: datetime) -> tuple[int, list[str]]:
    """M4 over a drill: how many executions shared their machine and parent with another
    (the only ones that can break it), and each execution surely active at once with
    another.

    ``checked_at`` is when the check read the store, after every event it read: an
    execution still active that made no move since its start was surely active then.
    One that ended without a move after its start gives no moment it was surely active
    and is never named (a machine's end is always a later transition than its start).
    """
    shared: defaultdict[tuple[str, str], list[Lifespan]] = defaultdict(list)
    for lifespan in lifespans:
        shared[(lifespan.machine, lifespan.parent)].append(lifespan)
    now = max([checked_at, *(t for s in lifespans for t in (s.active_by, s.ended) if t)])
    checked, problems = 0, []
    for (machine, parent), spans in sorted(shared.items()):
        if len(spans) < 2:
            continue
        checked += len(spans)
        active = sorted((s.execution, _surely_active(s, now)) for s in spans)
        for n, (execution, (since, until)) in enumerate(active):
            along = [other for other, span in active[:n] if _at_once((since, until), span)]
            if along:
                problems.append(
                    f"{machine}: {execution} ({_span(since, until)}) was active for "
                    f"parent {parent} at once with {', '.join(along)}"
                )
    return checked, problems


def _surely_active(lifespan: Lifespan, now: datetime) -> tuple[datetime, datetime]:
    """[from, until): when ``lifespan``'s execution was surely active (empty if never)."""
    until = lifespan.ended or NEVER
    if lifespan.active_by is not None:
        return lifespan.active_by, until
    return (now, until) if lifespan.ended is None else (until, until)


def _at_once(one: tuple[datetime, datetime], other: tuple[datetime, datetime]) -> bool:
    return min(one[1], other[1]) - max(one[0], other[0]) > CLOCK_SLACK


def _span(since: datetime, until: datetime) -> str:
    return f"from {since.isoformat()} " + (
        "still active" if until == NEVER else f"until {until.isoformat()}"
    )


async def parents(conn: psycopg.AsyncConnection, findings: Findings) -> None:
    """M4: never two executions of a machine active at once for one parent, over the
    whole drill (``overlaps``)."""
    params = {"ends": [int(k) for k in TERMINAL_KINDS]}
    rows = await (await conn.execute(LIFESPANS, params)).fetchall()
    (checked_at,) = await (await conn.execute(CHECKED_AT)).fetchone()
    checked, problems = overlaps([Lifespan(*row) for row in rows], checked_at)
    findings.add("M4", checked, problems)
