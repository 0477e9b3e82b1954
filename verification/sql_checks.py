"""The invariants that are plain SQL over a drill schema (see ``verification.invariants``).

Each function runs one or two statements and adds what it checked and found to the
findings. The schema holds the engine's tables plus the harness's: the effects ledger
(``verification.effects``), the work-change log and the fenced-write oracle
(``verification.lease_audit``).
"""

from __future__ import annotations

from typing import Any

import psycopg

from engine.model.events import EventKind
from engine.store.rows import WorkState
from verification.code_checks import CODE_RUNS
from verification.findings import Findings

K = EventKind
ONCE_PER_ATTEMPT = [
    int(k)
    for k in (
        K.ATTEMPT_STARTED,
        K.ATTEMPT_SUCCEEDED,
        K.ATTEMPT_FAILED,
        K.ATTEMPT_UNKNOWN,
        K.COMPENSATION_ATTEMPT_STARTED,
        K.COMPENSATION_SUCCEEDED,
        K.COMPENSATION_FAILED,
        K.COMPENSATION_UNKNOWN,
        K.TIMER_FIRED,
        K.TIMER_SCHEDULED,
    )
]

DUPLICATE_CHECKPOINTS = """
SELECT instance_id, step_name, attempt, kind, count(*) FROM history
WHERE kind = ANY(%(kinds)s)
GROUP BY instance_id, step_name, attempt, kind HAVING count(*) > 1
"""
CHECKPOINTS = "SELECT count(*) FROM history WHERE kind = ANY(%(kinds)s)"


async def _rows(conn: psycopg.AsyncConnection, sql: str, params: Any = None) -> list[tuple]:
    return await (await conn.execute(sql, params)).fetchall()


async def checkpoints(conn: psycopg.AsyncConnection, findings: Findings) -> None:
    """I2: at most one start, outcome and timer event per (instance, step, attempt)."""
    params = {"kinds": ONCE_PER_ATTEMPT}
    (total,) = (await _rows(conn, CHECKPOINTS, params))[0]
    duplicates = await _rows(conn, DUPLICATE_CHECKPOINTS, params)
    findings.stats["checkpoints"] += total
    findings.add(
        "I2",
        total,
        [
            f"{i}: {EventKind(k).label} of {s} attempt {a} recorded {n} times"
            for i, s, a, k, n in duplicates
        ],
    )


EFFECT_STATS = f"""
SELECT count(*), count(*) FILTER (WHERE applied AND seen), count(*) FILTER (WHERE NOT seen),
       count(DISTINCT idempotency_key),
       (SELECT count(*) FROM drill_handler_entries WHERE instance_id IN ({CODE_RUNS}))
FROM drill_effect_calls
"""
"""Calls, the effects applied among the calls the drill sees (its stubs'), the calls of
a team's own handlers, whose effects are in the team's system, and the code-first step
bodies of a team's code entered (``effects.BodyEntries``): no handler call, no effect
the drill sees."""
CALLED_BEFORE_START = """
SELECT instance_id, step, attempt, idempotency_key FROM drill_effect_calls
WHERE NOT start_durable
"""
CALLS_OVER_STARTS = """
WITH starts AS (
    SELECT idempotency_key, count(*) AS n FROM history
    WHERE kind IN (%(started)s, %(comp_started)s) GROUP BY idempotency_key
), calls AS (
    SELECT idempotency_key, count(*) AS n FROM drill_effect_calls GROUP BY idempotency_key
)
SELECT c.idempotency_key, c.n, COALESCE(s.n, 0) FROM calls c
LEFT JOIN starts s USING (idempotency_key)
WHERE c.n > COALESCE(s.n, 0)
"""
APPLIED_TWICE = """
SELECT instance_id, step, compensation, count(*) FROM drill_effects_applied
GROUP BY instance_id, step, compensation HAVING count(*) > 1
"""
SUCCESS_WITHOUT_EFFECT = f"""
SELECT o.instance_id, o.step_name, o.attempt FROM history o
JOIN history s ON s.instance_id = o.instance_id AND s.step_name = o.step_name
             AND s.attempt = o.attempt AND s.kind = CASE o.kind WHEN %(succeeded)s
                 THEN %(started)s ELSE %(comp_started)s END
WHERE o.kind IN (%(succeeded)s, %(comp_succeeded)s)
  AND NOT EXISTS (SELECT 1 FROM drill_effects_applied a
                  WHERE a.idempotency_key = s.idempotency_key)
  AND o.instance_id NOT IN ({CODE_RUNS})
"""
"""(Code-first steps record their effects by step_id: ``verification.code_checks``.)"""
EFFECT_KINDS = {
    "started": int(K.ATTEMPT_STARTED),
    "comp_started": int(K.COMPENSATION_ATTEMPT_STARTED),
    "succeeded": int(K.ATTEMPT_SUCCEEDED),
    "comp_succeeded": int(K.COMPENSATION_SUCCEEDED),
}


async def effects(conn: psycopg.AsyncConnection, findings: Findings) -> None:
    """I3: handler calls only after a durable start, at most once per started attempt;
    an effect applied at most once per step; no success without its effect."""
    calls, applied, unseen, keys, bodies = (await _rows(conn, EFFECT_STATS))[0]
    findings.stats["effect_calls"] += calls
    findings.stats["effects_applied"] += applied
    findings.stats["effect_calls_unseen"] += unseen
    findings.stats["code_bodies_entered"] += bodies
    problems = [
        f"{i}: handler of {s} attempt {a} ran before its start was durable (key {k})"
        for i, s, a, k in await _rows(conn, CALLED_BEFORE_START)
    ]
    problems += [
        f"key {k}: handler called {n} times for {m} durable starts"
        for k, n, m in await _rows(conn, CALLS_OVER_STARTS, EFFECT_KINDS)
    ]
    problems += [
        f"{i}: {'compensation of ' if c else ''}{s} applied its effect under {n} keys"
        for i, s, c, n in await _rows(conn, APPLIED_TWICE)
    ]
    problems += [
        f"{i}: {s} attempt {a} recorded success without any effect"
        for i, s, a in await _rows(conn, SUCCESS_WITHOUT_EFFECT, EFFECT_KINDS)
    ]
    findings.add("I3", keys, problems)


UNKNOWNS = """
SELECT count(*) FROM history WHERE kind IN (%(unknown)s, %(comp_unknown)s)
"""
UNKNOWN_NEVER_ENTERED = f"""
SELECT o.instance_id, o.step_name, o.attempt, o.kind = %(comp_unknown)s FROM history o
WHERE o.kind IN (%(unknown)s, %(comp_unknown)s)
  AND NOT EXISTS (SELECT 1 FROM drill_handler_entries e
                  WHERE e.instance_id = o.instance_id AND e.step = o.step_name
                    AND e.attempt = o.attempt AND e.compensation = (o.kind = %(comp_unknown)s))
  AND o.instance_id NOT IN ({CODE_RUNS})
ORDER BY o.instance_id, o.step_name, o.attempt
"""
UNKNOWN_KINDS = {"unknown": int(K.ATTEMPT_UNKNOWN), "comp_unknown": int(K.COMPENSATION_UNKNOWN)}


async def unknowns(conn: psycopg.AsyncConnection, findings: Findings, excused: bool) -> None:
    """U: an attempt recorded unknown had its handler entered (``drill_handler_entries``).

    Unknown tells an operator the effect may have happened; for a handler that never ran
    it is a false alarm they cannot tell from a real one. A worker crashed, stopped or
    cut off from its database between an attempt's durable start and its handler leaves
    such an attempt behind, and no one can know better: where the drill injects that
    (``excused``), false unknowns are counted (``false_unknowns_excused``), not failed."""
    (total,) = (await _rows(conn, UNKNOWNS, UNKNOWN_KINDS))[0]
    never = [
        f"{i}: {'compensation of ' if c else ''}{s} attempt {a} recorded unknown, "
        "but its handler never started"
        for i, s, a, c in await _rows(conn, UNKNOWN_NEVER_ENTERED, UNKNOWN_KINDS)
    ]
    findings.stats["unknown_outcomes"] += total
    if excused:
        findings.stats["false_unknowns_excused"] += len(never)
        never = []
    findings.add("U", total, never)


SIGNAL_DUPLICATES = f"""
SELECT instance_id, step_name, count(*), count(DISTINCT idempotency_key) FROM history
WHERE kind = %(kind)s AND instance_id NOT IN ({CODE_RUNS})
GROUP BY instance_id, step_name HAVING count(*) > 1
UNION ALL
SELECT instance_id, step_name, count(*), 1 FROM history
WHERE kind = %(kind)s AND instance_id IN ({CODE_RUNS})
GROUP BY instance_id, step_name, idempotency_key HAVING count(*) > 1
"""
"""A flow step takes one signal; a code-first run's inbox one per signal id (a wait
consumes one, extras are set aside)."""
SIGNAL_COUNT = "SELECT count(*) FROM history WHERE kind = %(kind)s"


async def signals(conn: psycopg.AsyncConnection, findings: Findings) -> None:
    """I7: one signal event per step (and so per signal id); one per signal id in a
    code-first run's inbox."""
    params = {"kind": int(K.SIGNAL_RECEIVED)}
    (total,) = (await _rows(conn, SIGNAL_COUNT, params))[0]
    findings.stats["signals_accepted"] += total
    findings.add(
        "I7",
        total,
        [
            f"{i}: step {s} received {n} signals ({d} ids)"
            for i, s, n, d in await _rows(conn, SIGNAL_DUPLICATES, params)
        ],
    )


WORK_CHANGES = """
SELECT work_id, old_state, new_state, old_token, new_token, old_owner, new_owner,
       old_expires, at FROM drill_work_changes ORDER BY change_id
"""


async def work_changes(conn: psycopg.AsyncConnection, findings: Findings, db_clock: bool) -> None:
    """I5 claims (token + 1, only claimable rows) and I4 (completed work never changes)."""
    claims = takeovers = 0
    fencing, resurrected = [], []
    for work, old, new, old_token, new_token, _, owner, expires, at in await _rows(
        conn, WORK_CHANGES
    ):
        if old == WorkState.COMPLETED:
            resurrected.append(f"completed work {work} changed again (state {old}->{new})")
        if new_token < old_token:
            fencing.append(f"work {work}: token went back from {old_token} to {new_token}")
        if new != WorkState.LEASED or new_token == old_token:
            continue
        claims += 1
        takeovers += old == WorkState.LEASED
        if new_token != old_token + 1:
            fencing.append(f"work {work}: claim moved the token {old_token}->{new_token}")
        if old not in (WorkState.AVAILABLE, WorkState.LEASED):
            fencing.append(f"work {work}: claimed from state {old}")
        elif old == WorkState.LEASED and db_clock and expires is not None and expires > at:
            fencing.append(f"work {work}: {owner} took a live lease (token {new_token})")
    findings.stats["claims"] += claims
    findings.stats["takeovers"] += takeovers
    findings.add("I5", claims, fencing)
    findings.add("I4", 0, resurrected)


FENCED = "SELECT work_id, owner, token, statement FROM drill_fenced_writes WHERE NOT held"
FENCED_COUNT = "SELECT count(*) FROM drill_fenced_writes"


async def fenced_writes(
    conn: psycopg.AsyncConnection, findings: Findings, observed: list[dict[str, Any]]
) -> None:
    """I5: no durable lease-holder write made without holding the lease."""
    (total,) = (await _rows(conn, FENCED_COUNT))[0]
    accepted = await _rows(conn, FENCED)
    attempts = [o for o in observed if o.get("kind") == "fenced" and not o.get("held")]
    findings.stats["stale_attempted"] += len(attempts)
    findings.stats["stale_rejected"] += sum(1 for o in attempts if not o.get("accepted"))
    findings.stats["stale_accepted"] += len(accepted)
    findings.add(
        "I5",
        total,
        [f"{o} wrote ({s}) work {w} with stale token {t}" for w, o, t, s in accepted],
    )


HELD_LEASES = f"SELECT work_id, lease_owner, lease_token FROM work WHERE state = {WorkState.LEASED}"
WORK_ROWS = "SELECT count(*) FROM work"


async def ownership(
    conn: psycopg.AsyncConnection, findings: Findings, quiet: bool, live: frozenset[str]
) -> None:
    """I10: after the quiet phase no lease is held, least of all by a dead owner.

    (Mid-run, a crashed owner's lease legitimately lingers until it expires or a sweep
    sees the owner's lock free, so this is a liveness check, judged after the quiet
    phase only.) What it checked is every work item found not leased, not the leases
    found held: those are its violations, and counting them read 0/0 for a pass.
    """
    if not quiet:
        return
    held = await _rows(conn, HELD_LEASES)
    (examined,) = (await _rows(conn, WORK_ROWS))[0]
    stranded = [
        f"work {w} still leased to {o} (token {t}){'' if o in live else ', a dead owner'}"
        for w, o, t in held
    ]
    findings.add("I10", examined, stranded)


ROWS_CHECKED = """
SELECT (SELECT count(*) FROM history) + (SELECT count(*) FROM transitions)
       + (SELECT count(*) FROM work)
"""
ORPHANS = """
SELECT 'history row', h.instance_id, h.sequence FROM history h
WHERE NOT EXISTS (SELECT 1 FROM instances i WHERE i.instance_id = h.instance_id)
UNION ALL
SELECT 'ledger row', t.instance_id, t.committed_sequence FROM transitions t
WHERE NOT EXISTS (SELECT 1 FROM instances i WHERE i.instance_id = t.instance_id)
UNION ALL
SELECT 'work row', w.instance_id, w.sequence FROM work w
WHERE NOT EXISTS (
    SELECT 1 FROM history h WHERE h.instance_id = w.instance_id AND h.sequence = w.sequence
)
LIMIT 20
"""
OPEN_WORK = (
    f"SELECT work_id, state FROM work WHERE state IN ({WorkState.AVAILABLE}, {WorkState.LEASED})"
)
WORK_TOTALS = f"""
SELECT count(*), count(*) FILTER (WHERE state = {WorkState.COMPLETED}),
       count(*) FILTER (WHERE state = {WorkState.DEAD_LETTERED})
FROM work
"""
DOUBLE_COMPLETIONS = f"""
SELECT work_id, count(*) FROM drill_work_changes
WHERE new_state = {WorkState.COMPLETED} AND old_state <> {WorkState.COMPLETED}
GROUP BY work_id HAVING count(*) > 1
"""


async def belonging(conn: psycopg.AsyncConnection, findings: Findings) -> None:
    """I6: every history and ledger row belongs to an instance, every work row to the
    event that made it (no foreign key enforces it: each transition statement writes
    them only under its instance's lock, and this says whether it held)."""
    checked = (await _rows(conn, ROWS_CHECKED))[0][0]
    orphans = await _rows(conn, ORPHANS)
    findings.add(
        "I6", checked, [f"{what} {i}/{n} has no instance or event" for what, i, n in orphans]
    )


async def conservation(conn: psycopg.AsyncConnection, findings: Findings, quiet: bool) -> None:
    """I11: enqueued = completed + dead-lettered, each completed once (after a full drain)."""
    total, completed, dead = (await _rows(conn, WORK_TOTALS))[0]
    findings.stats["work_items"] += total
    problems = [f"work {w} completed {n} times" for w, n in await _rows(conn, DOUBLE_COMPLETIONS)]
    if quiet:
        problems += [f"work {w} never drained (state {s})" for w, s in await _rows(conn, OPEN_WORK)]
        if completed + dead != total:
            problems.append(f"{total} enqueued but {completed} completed + {dead} dead-lettered")
    findings.add("I11", total, problems)
