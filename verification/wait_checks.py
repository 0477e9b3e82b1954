"""I8 no orphan waits (see ``verification.invariants``): no wait of an instance is left
without the work that ends it, and no work is left for an instance that is over.

The reference (reliability.md section 2) says it of a live instance: every pending timer
or sleep in its state has its due row (Temporal #11869: a timer that silently never
fires). So for an instance running, cancelling or failing, every timer not fired and
every activity ready or waiting to retry has open work (a paused instance's work is
parked, not judged).

Every instance the drill touched is examined, not only those still live when checked:
after a quiet phase every instance has ended, and judging the live ones alone checked
nothing. An instance's end retires the work nobody holds in the same transaction
(``engine.store.commits``: nothing is left waiting for an instance that is over), so for
an ended instance

- none of its work is still available or parked by an incident hold, ever, and none is
  still leased after the quiet phase (before it, the worker holding it may still be
  finishing the attempt it started: its completion settles the row);
- one that completed (ended by its own decision, not cut short) holds no wait still
  open in its state: every timer fired or lost its race to another branch, no activity
  or compensation is ready, in flight or waiting to retry, and no child is still
  awaited. A completed step list's steps say what completing requires; a code-first
  run's open waits are its code's (replayed by J3) and a machine's its advances' (M3),
  so those are examined for their work only.

A wait of an instance cut short (cancelled, failed, terminated) is not pending but
cancelled by that end (``engine.model.description.never_happens``), and a dead letter
stays for an operator's decision: neither is an orphan. A code-first run that continued
as new ended as at a return (its successor has work of its own, judged as its own
instance): no work may be left for it. An instance that moved after
its history was captured (workers still run) is judged at its next check.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import psycopg

from engine.model.definitions import Mode
from engine.model.description import lost_race
from engine.model.fan_out import AWAITED
from engine.model.instance import AttemptStatus, Instance, InstanceStatus
from engine.model.transitions import WorkKind, work_label
from engine.store.rows import WorkState
from verification.findings import Findings

OPEN_WORK = f"""
SELECT i.instance_id, i.sequence, w.work_id, w.kind, w.state, w.payload FROM instances i
LEFT JOIN work w ON w.instance_id = i.instance_id
  AND w.state IN ({WorkState.AVAILABLE}, {WorkState.LEASED}, {WorkState.HELD})
"""
"""Every instance's position and its open work (held work too), read in one snapshot."""
UNSETTLED = frozenset({AttemptStatus.READY, AttemptStatus.RUNNING, AttemptStatus.RETRY_WAITING})
"""An attempt's states a completed instance may not hold: due, in flight, or to retry."""


@dataclass(frozen=True)
class OpenWork:
    work_id: str
    kind: WorkKind | int
    state: WorkState
    step: str

    @property
    def label(self) -> str:
        return work_label(self.kind, self.step)


async def check(
    conn: psycopg.AsyncConnection, findings: Findings, states: dict[str, Instance], quiet: bool
) -> None:
    """I8 over every replayed instance at its stored position (see the module)."""
    positions: dict[str, int] = {}
    work: dict[str, list[OpenWork]] = {}
    for instance, sequence, work_id, kind, state, payload in await (
        await conn.execute(OPEN_WORK)
    ).fetchall():
        positions[instance] = sequence
        if work_id is not None:
            item = OpenWork(work_id, _kind(kind), WorkState(state), _step(payload))
            work.setdefault(instance, []).append(item)
    problems: list[str] = []
    checked = 0
    for state in states.values():
        if positions.get(state.instance_id) != state.sequence:
            continue  # moved on since its capture: its work is of a later position
        mine = work.get(state.instance_id, [])
        if state.status.terminal:
            examined, found = _ended(state, mine, quiet)
        elif state.status is InstanceStatus.PAUSED:
            continue
        else:
            examined, found = _live(state, mine)
        checked += examined
        problems += found
    findings.add("I8", checked, problems)


def _live(state: Instance, work: list[OpenWork]) -> tuple[int, list[str]]:
    """Every pending timer and every due or retrying activity has its open work."""
    open_work = {(w.kind, w.step) for w in work}
    checked, problems = 0, []
    for timer in state.timers.values():
        if timer.fired_at is None:
            checked += 1
            if (WorkKind.TIMER, timer.step) not in open_work:
                problems.append(f"{state.instance_id}: timer {timer.step} has no due work")
    for progress in state.activities.values():
        if progress.status in (AttemptStatus.READY, AttemptStatus.RETRY_WAITING):
            checked += 1
            if (WorkKind.ACTIVITY, progress.step) not in open_work:
                problems.append(f"{state.instance_id}: {progress.step} has no due work")
    return checked, problems


def _ended(state: Instance, work: list[OpenWork], quiet: bool) -> tuple[int, list[str]]:
    """No work left for it (one check: its work); a completed step list's waits all
    closed (one check each)."""
    ended = state.status.label
    problems = [
        f"{state.instance_id}: {ended}, but its {w.label} work {w.work_id} is still "
        f"{w.state.label}: nothing may wait for an instance that is over"
        for w in work
        if quiet or w.state is not WorkState.LEASED
    ]
    checked = 1
    spec = state.spec
    if state.status is InstanceStatus.COMPLETED and spec and spec.mode is Mode.ORCHESTRATION:
        examined, open_waits = _open_waits(state)
        checked += examined
        problems += open_waits
    return checked, problems


def _open_waits(state: Instance) -> tuple[int, list[str]]:
    """The waits a completed instance still holds open in its state."""
    said = f"{state.instance_id}: completed"
    problems = [
        f"{said} with timer {t.step} still pending (it never fired, and no race it is a "
        "branch of was won by another)"
        for t in state.timers.values()
        if t.fired_at is None and not lost_race(state, t.step)
    ]
    tracks = (("activity", state.activities), ("compensation of", state.compensations))
    for track, attempts in tracks:
        problems += [
            f"{said} with {track} {p.step} still {p.status.label} (attempt {p.attempt})"
            for p in attempts.values()
            if p.status in UNSETTLED
        ]
    problems += [
        f"{said} while child {c.step} ({c.child_id}) was still awaited ({c.status.label})"
        for c in state.children.values()
        if c.status in AWAITED
    ]
    examined = (
        len(state.timers) + len(state.activities) + len(state.compensations) + len(state.children)
    )
    return examined, problems


def _kind(kind: int) -> WorkKind | int:
    try:
        return WorkKind(kind)
    except ValueError:
        return kind


def _step(payload: bytes | None) -> str:
    try:
        return str(json.loads(bytes(payload or b"{}"))["step"])
    except (ValueError, KeyError, TypeError):
        return ""
