"""The invariant checker: I1-I11 by SQL and replay, plus the harness's own promises.

Run after a drill's quiet phase (``quiet=True``: liveness is demanded too) or in the
middle of one (D9 checks safety after every rule). Every check counts what it checked
and lists each violation in words a reader can act on. The invariants follow the
reference (reliability.md section 2):

I1 no lost work, I2 exactly-once checkpoint, I3 side effects within the activity's
promise (ledger vs history), I4 terminal exactly once and archived with it, I5 fencing
(zero stale-token writes accepted; claims bump the token by one and never steal a live
lease), I6 history integrity (contiguous, ledger hash chain, every row belongs to its
instance), I7 signal dedupe, I8 no orphan waits (of every instance, ended ones too:
``verification.wait_checks``), I9 replay determinism, I10 no stranded ownership (no
lease held by a dead owner), I11 queue conservation. Besides:
every planned boundary was reached, every ambiguous commit was resolved, truthfully,
and (U) every attempt recorded unknown had its handler started: unknown means "may have
happened", never "this worker dropped it". State machine executions have their own
(M1-M3, ``verification.machine_checks``): one application write per committed
transition, in its transaction; no state entered after a cancellation; ends as expected.
Code-first runs have J1-J5 (``verification.code_checks``, ``verification.journal_replay``,
``verification.continuations``); a run that continued as new is carried on by its
successor, so I1 follows the chain to its last run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import psycopg

from engine.model.events import EventKind
from engine.model.instance import Instance, InstanceStatus
from engine.model.registry import Registry
from engine.store.rows import WorkState
from engine.store.store import Store
from engine.worker.activities import ActivityRegistry
from engine.worker.faults import Fault
from verification import (
    code_checks,
    continuations,
    journal_replay,
    machine_checks,
    replay_check,
    sql_checks,
    wait_checks,
)
from verification.drill_app import app
from verification.fault_plan import BoundaryReport
from verification.findings import Findings
from verification.proxy import AmbiguousCommit, Truth
from verification.replay_check import History
from verification.workloads import Execution

K = EventKind


@dataclass
class CheckContext:
    """What the checker needs besides the schema."""

    store: Store
    registry: Registry
    acked: list[str]
    quiet: bool = True
    db_clock: bool = True
    live_owners: frozenset[str] = frozenset()
    plan: list[Fault] = field(default_factory=list)
    report: BoundaryReport = field(default_factory=BoundaryReport)
    ambiguous: list[AmbiguousCommit] = field(default_factory=list)
    observations: list[dict[str, Any]] = field(default_factory=list)
    histories: list[History] = field(default_factory=list)
    strands: bool = False
    """The drill crashes, stops or cuts off a worker, which can leave an attempt durably
    started whose handler never ran: a false unknown is then excused (see ``U``)."""
    machines: dict[str, Execution] = field(default_factory=dict)
    """The machine executions the drill started, and how each may end (M3)."""
    xid_horizon: int = 0
    """After a failover, the first transaction id the promoted standby had not seen:
    a transaction of the lost primary at or past it never reached the standby, so it
    did not commit here (the promoted server gives such ids out again, to others)."""
    code: ActivityRegistry = app
    """The app whose code-first workflows J3 replays runs of: the drill app's, or a drill
    plan's team app (its own code, ``verification.plan_drills``)."""


async def check(ctx: CheckContext) -> Findings:
    """Every invariant, on the store's schema."""
    findings = Findings()
    async with ctx.store.connection() as conn:
        states = _replay_all(ctx, findings)
        await _instances(conn, ctx, findings, states)
        await sql_checks.checkpoints(conn, findings)
        await sql_checks.effects(conn, findings)
        await sql_checks.unknowns(conn, findings, ctx.strands)
        await sql_checks.signals(conn, findings)
        await sql_checks.work_changes(conn, findings, ctx.db_clock)
        await sql_checks.fenced_writes(conn, findings, ctx.observations)
        await wait_checks.check(conn, findings, states, ctx.quiet)
        await sql_checks.ownership(conn, findings, ctx.quiet, ctx.live_owners)
        await sql_checks.conservation(conn, findings, ctx.quiet)
        await sql_checks.belonging(conn, findings)
        await _settlements(conn, ctx, findings)
        await machine_checks.writes(conn, findings)
        await machine_checks.cancellation(conn, findings)
        await machine_checks.parents(conn, findings)
        await code_checks.check(conn, findings, ctx.histories, ctx.strands)
        await continuations.check(conn, findings)
    machine_checks.ends(findings, states, ctx.machines, ctx.quiet)
    journal_replay.check(findings, states, ctx.code)
    _boundaries(ctx, findings)
    return findings


def _replay_all(ctx: CheckContext, findings: Findings) -> dict[str, Instance]:
    """I6 + I9 per captured history; returns the replayed states."""
    states = {}
    for history in ctx.histories:
        verdict = replay_check.verify(ctx.registry, history)
        findings.stats["events"] += len(history.events)
        findings.stats["events_replayed"] += verdict.events
        chain = [p for p in verdict.problems if "ledger" in p or "fingerprint" in p]
        other = [p for p in verdict.problems if p not in chain]
        findings.add("I6", len(history.events), [f"{history.instance_id}: {p}" for p in chain])
        findings.add("I9", 1, [f"{history.instance_id}: {p}" for p in other])
        if verdict.state is not None:
            states[history.instance_id] = verdict.state
    findings.stats["histories"] = len(ctx.histories)
    return states


INSTANCE_ROWS = "SELECT instance_id, status, sequence, archived_at IS NOT NULL FROM instances"
DEAD_WORK = f"SELECT DISTINCT instance_id FROM work WHERE state = {WorkState.DEAD_LETTERED}"


async def _instances(
    conn: psycopg.AsyncConnection,
    ctx: CheckContext,
    findings: Findings,
    states: dict[str, Instance],
) -> None:
    """I1 (acknowledged starts end: a run that continued as new, when the last run of its
    chain ended, ``verification.continuations``), I4 (row agrees with history, archived
    iff terminal)."""
    rows = {r[0]: r[1:] for r in await (await conn.execute(INSTANCE_ROWS)).fetchall()}
    dead = {r[0] for r in await (await conn.execute(DEAD_WORK)).fetchall()}
    problems = []
    for instance, (status, sequence, archived) in rows.items():
        state = states.get(instance)
        if state is None or (not ctx.quiet and sequence > state.sequence):
            # a row read after its history was captured, while workers still run, may
            # have moved on; the row and its history commit together, so it is never
            # behind, and once everything has stopped (quiet) they must agree exactly
            continue
        if InstanceStatus(status) is not state.status or sequence != state.sequence:
            problems.append(
                f"{instance}: row says {InstanceStatus(status).label}@{sequence}, "
                f"history {state.status.label}@{state.sequence}"
            )
        if archived != state.status.terminal:
            problems.append(f"{instance}: {state.status.label} but archived={archived}")
    findings.add("I4", len(rows), problems)
    _count_outcomes(findings, states, dead)
    if ctx.quiet:
        lost = []
        for acked in ctx.acked:
            runs = continuations.chain(states, acked)
            last = states.get(runs[-1])
            if dead.isdisjoint(runs) and not (last and last.status.terminal):
                lost.append(f"{acked}: {_where(runs, last, rows.get(runs[-1]))}")
        findings.add("I1", len(ctx.acked), lost)


def _where(runs: list[str], state: Instance | None, row: Any) -> str:
    """Where the acknowledged start of ``runs[0]`` is stuck: its last run (``runs``: it
    and the successors it continued as new as) and that run's ``state`` and ``row``."""
    said = f"continued as new as {runs[-1]}, " if len(runs) > 1 else ""
    if row is None:
        return f"{said}which does not exist" if said else "acknowledged but absent"
    if state is None:
        return f"{said}history does not replay"
    return f"{said}still {state.status.label} at sequence {state.sequence}"


def _count_outcomes(findings: Findings, states: dict[str, Instance], dead: set[str]) -> None:
    for state in states.values():
        findings.stats["instances"] += 1
        findings.stats[state.status.label] += 1
        findings.stats["dead_lettered"] += state.instance_id in dead


XACT_STATUS = "SELECT pg_xact_status(%(xid)s::xid8)"
LEDGER_ROWS = """
SELECT t.transition_id, t.xact_id::text, t.fingerprint
FROM unnest(%(instances)s::text[], %(ids)s::text[]) AS k (instance_id, transition_id)
JOIN transitions t ON t.instance_id = k.instance_id AND t.transition_id = k.transition_id
"""
"""The ledger rows of a settlement's transitions, by the ledger's key: the id, the
transaction that wrote it and the content's fingerprint."""
VERDICT_TRUTH = {"committed": "committed", "aborted": "aborted", "conflicting": "aborted"}
"""What PostgreSQL must say about a settled COMMIT ("conflicting": not committed, and
another transaction's content holds the id)."""


async def _settlements(
    conn: psycopg.AsyncConnection, ctx: CheckContext, findings: Findings
) -> None:
    """Every ambiguous commit resolved, and the engine's settlements told the truth.

    The proxy knows how the server answered each COMMIT it cut. The engine's own
    settlements are compared with ``pg_xact_status`` and with the ledger (a committed
    transition carries the xid that committed it). A COMMIT the engine had to leave
    unknown (the server was gone) must be resolvable now, and the ledger must agree.
    """
    problems = []
    for commit in ctx.ambiguous:
        findings.stats[f"ambiguous_{commit.truth.value}"] += 1
        if commit.truth is Truth.UNKNOWN:
            problems.append(f"a COMMIT cut {commit.cut.value} was never answered by the server")
    settled = [o for o in ctx.observations if o.get("kind") == "settled"]
    for record in settled:
        findings.stats[f"settled_{record['verdict']}"] += 1
        if "xid" in record:
            problems.extend(await _settlement(conn, record, findings, ctx.xid_horizon))
        else:
            problems.extend(await _session_settlement(conn, record, ctx.ambiguous, findings))
    findings.add("A", len(ctx.ambiguous) + len(settled), problems)


async def _settlement(
    conn: psycopg.AsyncConnection, record: dict[str, Any], findings: Findings, horizon: int
) -> list[str]:
    xid, verdict = record["xid"], record["verdict"]
    if horizon and int(xid) >= horizon:
        truth = "aborted"  # never reached the promoted server (see ``xid_horizon``)
    else:
        truth = (await (await conn.execute(XACT_STATUS, {"xid": xid})).fetchone())[0]
    expected = VERDICT_TRUTH.get(verdict, truth)
    if truth not in ("committed", "aborted"):
        return [f"commit {xid} (engine: {verdict}) is still {truth} after the quiet phase"]
    if truth != expected:
        if verdict == "committed" and await _committed_by_another(conn, record):
            findings.stats["settled_committed_by_another"] += 1
            return []
        return [f"the engine settled commit {xid} as {verdict}, PostgreSQL says {truth}"]
    if verdict == "unknown":
        findings.stats[f"resolved_later_{truth}"] += 1
    rows = await _ledger_rows(conn, record)
    by_xid = {t for t, x, _ in rows if x == xid}
    missing = set(record["transitions"]) - by_xid
    if truth == "committed" and missing:
        return [f"commit {xid} committed but the ledger lacks {sorted(missing)}"]
    if truth == "aborted" and by_xid:
        return [f"commit {xid} aborted but the ledger holds {sorted(by_xid)} from it"]
    return []


async def _committed_by_another(conn: psycopg.AsyncConnection, record: dict[str, Any]) -> bool:
    """The engine's "committed" is about its transitions: every one of them in the
    ledger with the content the settled commit wrote, whichever transaction put it
    there. After a failover that can be another: its own COMMIT never reached the
    promoted server, while the same transitions were committed there again, and the id
    it asks about may have been given out again. The engine's caller then goes on from
    transitions that are durable, which is the truth the verdict claims. Other content
    under the same ids (the same attempt started again by another lease) is not that:
    the caller would go on from a start that is not its own. A verdict about no
    transition (a lease-only update) is not covered by this: the engine settles it by
    the lease's work row, which agrees with the id's truth here."""
    rows = await _ledger_rows(conn, record)
    found = {t for t, _, _ in rows}
    return bool(found) and found == set(record["transitions"]) and not _foreign(rows, record)


async def _ledger_rows(
    conn: psycopg.AsyncConnection, record: dict[str, Any]
) -> list[tuple[str, str, str]]:
    """(transition id, xid, fingerprint) of each of the settled record's transitions in
    the ledger."""
    params = {"instances": record["instances"], "ids": record["transitions"]}
    return await (await conn.execute(LEDGER_ROWS, params)).fetchall()


def _foreign(rows: list[tuple[str, str, str]], record: dict[str, Any]) -> list[str]:
    """The settled record's transitions the ledger holds with other content."""
    written = dict(zip(record["transitions"], record["fingerprints"], strict=True))
    return sorted(t for t, _, fingerprint in rows if fingerprint != written[t])


async def _session_settlement(
    conn: psycopg.AsyncConnection,
    record: dict[str, Any],
    ambiguous: list[AmbiguousCommit],
    findings: Findings,
) -> list[str]:
    """A write sent alone in autocommit, settled by ending its session (no xid): the
    proxy's cut on that backend knows the truth. Without such a cut (the server went
    away under it) only a committed verdict can be checked, against the ledger: after
    "aborted" the engine may well have committed the same transition again.

    "aborted" means the write took no effect. A statement that committed but wrote
    nothing (its expected sequence was taken meanwhile, as when two parallel branches'
    outcomes race) also took none: with none of its transitions in the ledger, the
    server's "committed" agrees with it."""
    verdict, ids = record["verdict"], record["transitions"]
    findings.stats["settled_by_session"] += 1
    cuts = [c for c in ambiguous if c.backend_pid == record["pid"]]
    rows = await _ledger_rows(conn, record)
    missing = set(ids) - {t for t, _, _ in rows}
    if not cuts:
        findings.stats["settled_by_session_without_cut"] += 1
    elif verdict != "unknown" and VERDICT_TRUTH[verdict] != cuts[-1].truth.value:
        truth = cuts[-1].truth.value
        if not (verdict == "aborted" and missing == set(ids)):
            return [f"the engine settled the write of {ids} as {verdict}, the server says {truth}"]
        findings.stats["settled_without_effect"] += 1
    if verdict == "committed" and missing:
        return [f"the write of {ids} settled as committed but the ledger lacks {sorted(missing)}"]
    if verdict == "committed" and (foreign := _foreign(rows, record)):
        return [f"the write of {ids} settled as committed but the ledger holds {foreign} "
                "with other content"]  # fmt: skip
    return []


def _boundaries(ctx: CheckContext, findings: Findings) -> None:
    unfired = ctx.report.unfired(ctx.plan)
    findings.add(
        "B",
        len(ctx.plan),
        [f"{f.action.value} at {f.boundary.value} hit {f.hit} never happened" for f in unfired],
    )
