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
- **M4 parents**: at most one execution of a machine per parent is active (not yet
  archived) at a time, read from each execution's start data rather than from the
  ``parent_key`` column whose index is what keeps it.
"""

from __future__ import annotations

from collections import Counter

import psycopg

from engine.model.events import EventKind
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
ACTIVE_BY_PARENT = """
SELECT i.definition_name, convert_from(h.data, 'UTF8')::json ->> 'parent', count(*)
FROM instances i
JOIN history h ON h.instance_id = i.instance_id AND h.sequence = 1
JOIN definitions d ON d.name = i.definition_name AND d.version = i.definition_version
WHERE i.archived_at IS NULL AND d.spec ->> 'mode' = 'machine'
GROUP BY 1, 2
"""
"""Active machine executions by machine and the parent their start data names."""


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


async def parents(conn: psycopg.AsyncConnection, findings: Findings) -> None:
    """M4: at most one active execution per machine and parent."""
    rows = await (await conn.execute(ACTIVE_BY_PARENT)).fetchall()
    findings.add(
        "M4",
        sum(count for *_, count in rows),
        [
            f"{machine}: {count} active executions for parent {parent}"
            for machine, parent, count in rows
            if count > 1
        ],
    )
