"""The invariants of code-first runs (see ``verification.invariants``).

A code-first step's body runs under ``ctx.step_id``, the attempt's idempotency key:
``<run>/<step>#<occurrence>.<try>``, stable across a crash between the effect and its
recorded result, new after a recorded (known) failure and per loop pass. The drill
workflow (``verification.drill_code``) marks every body's entry and records every
effect it performs by step_id. Against history:

- **J1 one effect per step_id**: no step_id has more than one effect unless that
  step_id recorded an unknown outcome (the only case where the engine may run a body
  again under the same key); every effect is under a step_id some attempt of its run
  durably started (a body run under a key the engine never recorded is an effect no one
  can deduplicate), and no body ran before its attempt's start was durable; every
  recorded success has its effect; the same for the undo a compensation performs;
- **J2 step_id stable**: every attempt's key reads ``<run>/<step>#<occurrence>.<try>``
  with ``try`` one plus the known failures recorded before it, so a crash (an unknown
  outcome) never changes it;
- **J3 journal replays**: every run's journal replays cleanly against the code it is
  pinned to (``verification.journal_replay``);
- **J4 recorded bodies never re-run**: no body was entered once its step_id's outcome
  was recorded (unless that step_id recorded an unknown outcome: a stopped owner may run
  its attempt late), and no step_id was entered more often than attempts under it were
  started.

Everything is per run: a run that continued as new and its successor are two runs
(each step_id names its run), so each generation's effects and attempts are held
against its own history. J1, J4 and U read the drill workflow's ledger, so they hold
for its runs; a drill plan's run of a team's own workflow has no such ledger (its
bodies are the team's), and J2 and J3 hold for every code-first run.

The flow checks that read the activities' ledger (I3's "success without effect", U's
handler entries) and one signal per step (I7) do not apply to code-first runs, whose
bodies and inbox are checked here instead (U from ``drill_code_entries``).
"""

from __future__ import annotations

import psycopg

from engine.model.events import EventKind
from engine.modes.code.step_ids import parse_step_id, step_key
from verification import drill_code
from verification.findings import Findings
from verification.replay_check import History

K = EventKind
CODE_RUNS = """
SELECT i.instance_id FROM instances i
JOIN definitions d ON d.name = i.definition_name AND d.version = i.definition_version
WHERE d.spec ->> 'mode' = 'code'
"""
"""Every code-first run of the schema (the flow checks skip these)."""
LEDGERED_RUNS = CODE_RUNS + "  AND i.definition_name = %(ledgered)s\n"
"""The code-first runs whose bodies write the drill's ledger (``drill.code``'s)."""
KINDS = {
    "started": int(K.ATTEMPT_STARTED),
    "succeeded": int(K.ATTEMPT_SUCCEEDED),
    "failed": int(K.ATTEMPT_FAILED),
    "unknown": int(K.ATTEMPT_UNKNOWN),
    "ledgered": drill_code.CODE,
}
ATTEMPTS = f"""
WITH code AS ({LEDGERED_RUNS})
SELECT s.instance_id, s.idempotency_key, o.kind
FROM history s
JOIN code c ON c.instance_id = s.instance_id
LEFT JOIN history o ON o.instance_id = s.instance_id AND o.step_name = s.step_name
                   AND o.attempt = s.attempt
                   AND o.kind IN (%(succeeded)s, %(failed)s, %(unknown)s)
WHERE s.kind = %(started)s
"""
"""Every started step attempt of a ledgered run: its key (the step_id) and outcome."""
ENTRIES = """
SELECT run_id, step_id, count(*), count(*) FILTER (WHERE NOT start_durable),
       count(*) FILTER (WHERE recorded)
FROM drill_code_entries GROUP BY run_id, step_id
"""
EFFECTS = "SELECT run_id, step_id, count(*) FROM drill_code_effects GROUP BY run_id, step_id"
COMPENSATIONS = f"""
WITH code AS ({LEDGERED_RUNS})
SELECT h.instance_id, h.step_name, count(*) FILTER (WHERE h.kind = %(comp_started)s),
       count(*) FILTER (WHERE h.kind = %(comp_succeeded)s),
       count(*) FILTER (WHERE h.kind = %(comp_unknown)s)
FROM history h JOIN code c ON c.instance_id = h.instance_id
WHERE h.kind IN (%(comp_started)s, %(comp_succeeded)s, %(comp_unknown)s)
GROUP BY h.instance_id, h.step_name
"""
"""Each compensated step of a code-first run: its compensation's attempts, successes and
unknown outcomes."""
COMPENSATION_KINDS = {
    "comp_started": int(K.COMPENSATION_ATTEMPT_STARTED),
    "comp_succeeded": int(K.COMPENSATION_SUCCEEDED),
    "comp_unknown": int(K.COMPENSATION_UNKNOWN),
    "ledgered": drill_code.CODE,
}
UNDOS = "SELECT run_id, step_id, count(*) FROM drill_code_undos GROUP BY run_id, step_id"


class Attempts:
    """The started attempts of code-first runs, by (run, step_id): how many, and each
    one's outcome kind (None while it has none)."""

    def __init__(self, rows: list[tuple[str, str, int | None]]) -> None:
        self.started: dict[tuple[str, str], int] = {}
        self.outcomes: dict[tuple[str, str], list[int | None]] = {}
        for run, key, outcome in rows:
            self.started[(run, key)] = self.started.get((run, key), 0) + 1
            self.outcomes.setdefault((run, key), []).append(outcome)

    def count(self, run: str, step_id: str, kind: int) -> int:
        return self.outcomes.get((run, step_id), []).count(kind)

    def unknown(self, run: str, step_id: str) -> bool:
        return self.count(run, step_id, KINDS["unknown"]) > 0


async def check(
    conn: psycopg.AsyncConnection, findings: Findings, histories: list[History], excused: bool
) -> None:
    """J1, J2, J4 and U for code-first runs (J3 is ``verification.journal_replay``)."""
    attempts = Attempts(await (await conn.execute(ATTEMPTS, KINDS)).fetchall())
    entries = await (await conn.execute(ENTRIES)).fetchall()
    effects = await (await conn.execute(EFFECTS)).fetchall()
    effects_checked(findings, attempts, entries, effects)
    compensations = await (await conn.execute(COMPENSATIONS, COMPENSATION_KINDS)).fetchall()
    undos_checked(findings, compensations, await (await conn.execute(UNDOS)).fetchall())
    reruns_checked(findings, attempts, entries)
    _unknowns(findings, attempts, entries, excused)
    runs = {run for (run,) in await (await conn.execute(CODE_RUNS)).fetchall()}
    findings.stats["code_runs"] += len(runs)
    step_ids(findings, [h for h in histories if h.instance_id in runs])


def effects_checked(
    findings: Findings, attempts: Attempts, entries: list[tuple], effects: list[tuple]
) -> None:
    """J1 (see the module)."""
    problems = []
    performed = {(run, key): n for run, key, n in effects}
    for (run, key), n in performed.items():
        if (run, key) not in attempts.started:
            problems.append(f"{run}: an effect under step_id {key}, which no attempt started")
        elif n > 1 and not attempts.unknown(run, key):
            problems.append(f"{run}: {n} effects under step_id {key}, which recorded no unknown")
    problems += [
        f"{run}: a body under step_id {key} ran before its attempt's start was durable"
        for run, key, _, early, _ in entries
        if early
    ]
    succeeded = KINDS["succeeded"]
    problems += [
        f"{run}: step_id {key} recorded success without any effect"
        for (run, key) in attempts.started
        if attempts.count(run, key, succeeded) and not performed.get((run, key))
    ]
    findings.stats["code_effects"] += sum(performed.values())
    findings.add("J1", len(performed) + len(attempts.started), problems)


def undos_checked(findings: Findings, compensations: list[tuple], undos: list[tuple]) -> None:
    """J1 for compensations: a step's effect undone at most once unless its compensation
    recorded an unknown outcome, only by a compensation that started, and every
    compensation that succeeded undid it. An undo runs under its step's step_id."""
    recorded = {(run, step): tuple(counts) for run, step, *counts in compensations}
    undone: dict[tuple[str, str], int] = {}
    for run, key, n in undos:
        parts = parse_step_id(key)
        step = step_key(parts.step, parts.occurrence)
        undone[(run, step)] = undone.get((run, step), 0) + n
    problems = []
    for (run, step), n in undone.items():
        started, _, unknown = recorded.get((run, step), (0, 0, 0))
        if not started:
            problems.append(f"{run}: {step} undone {n} times, but no compensation started")
        elif n > 1 and not unknown:
            problems.append(f"{run}: {step} undone {n} times, its compensation never unknown")
    problems += [
        f"{run}: the compensation of {step} succeeded without undoing it"
        for (run, step), (_, done, _) in recorded.items()
        if done and not undone.get((run, step))
    ]
    findings.stats["code_undos"] += sum(undone.values())
    findings.add("J1", len(recorded) + len(undone), problems)


def reruns_checked(findings: Findings, attempts: Attempts, entries: list[tuple]) -> None:
    """J4 (see the module)."""
    problems = []
    for run, key, entered, _, recorded in entries:
        started = attempts.started.get((run, key), 0)
        if recorded and not attempts.unknown(run, key):
            problems.append(f"{run}: the body of {key} ran again after its outcome was recorded")
        elif entered > started:
            problems.append(f"{run}: the body of {key} ran {entered} times for {started} attempts")
    findings.stats["code_bodies_entered"] += sum(e[2] for e in entries)
    findings.add("J4", len(entries), problems)


def _unknowns(findings: Findings, attempts: Attempts, entries: list[tuple], excused: bool) -> None:
    """U for code-first steps: each attempt recorded unknown had its body entered (one
    entry under its step_id per unknown attempt at least)."""
    entered = {(run, key): n for run, key, n, _, _ in entries}
    unknown = KINDS["unknown"]
    never = [
        f"{run}: step_id {key} recorded {n} unknown outcomes but its body was entered "
        f"{entered.get((run, key), 0)} times"
        for (run, key) in attempts.started
        if (n := attempts.count(run, key, unknown)) > entered.get((run, key), 0)
    ]
    findings.stats["code_unknown_outcomes"] += sum(
        attempts.count(run, key, unknown) for run, key in attempts.started
    )
    if excused:
        findings.stats["false_unknowns_excused"] += len(never)
        never = []
    findings.add("U", 0, never)


def expected_step_id(run: str, key: str, known_failures: int) -> str:
    """The step_id an attempt of step ``key`` (``<name>.<occurrence>``) must run under
    after ``known_failures`` recorded known failures of that occurrence."""
    name, _, occurrence = key.rpartition(".")
    return f"{run}/{name}#{occurrence}.{known_failures + 1}"


def step_ids(findings: Findings, histories: list[History]) -> None:
    """J2 (see the module), from each code-first run's events in order."""
    problems, checked = [], 0
    for history in histories:
        failures: dict[str, int] = {}
        for event in history.events:
            if event.kind is K.ATTEMPT_FAILED:
                failures[event.step] = failures.get(event.step, 0) + 1
            elif event.kind is K.ATTEMPT_STARTED:
                checked += 1
                known = failures.get(event.step, 0)
                wanted = expected_step_id(history.instance_id, event.step, known)
                if event.idempotency_key != wanted:
                    problems.append(
                        f"{history.instance_id}: attempt {event.attempt} of {event.step} ran "
                        f"under {event.idempotency_key}, not {wanted}"
                    )
    findings.add("J2", checked, problems)
