"""Capturing a drill schema's histories: what the checker replays and D7 keeps.

A few statements read every event, ledger row and work row of the schema (drill
schemas are small, and carry the harness's work-change log), grouped per instance into
``replay_check.History`` values. The same values, saved as JSON lines, are the
campaign's replay corpus.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from engine.model.canonical import utc
from engine.model.transitions import WorkItem, WorkKind
from engine.store.rows import HISTORY_COLUMNS, event_from_row
from engine.store.store import Store
from verification.replay_check import History, LedgerRow

EVENTS = f"SELECT {HISTORY_COLUMNS} FROM history ORDER BY instance_id, sequence"
LEDGER = """
SELECT instance_id, transition_id, expected_sequence, committed_sequence, fingerprint
FROM transitions ORDER BY instance_id, expected_sequence
"""
WORK = """
SELECT work_id, kind, instance_id, sequence, available_at, deadline, payload, tenant_id,
       correlation_id, target
FROM work ORDER BY instance_id, sequence, work_id
"""
ORIGINAL_TIMES = """
SELECT DISTINCT ON (work_id) work_id, old_available, old_deadline FROM drill_work_changes
ORDER BY work_id, change_id
"""
"""A retry or a park moves ``available_at`` after the fact, and a dead letter's retry its
``deadline`` too; the change log keeps the values the transition wrote (the first
change's old values), which its fingerprint and its decision cover."""


ONE_SNAPSHOT = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"
"""The statements read one snapshot: checks run while workers still commit (D9's live
invariants), and a transition committed between two reads would show ledger rows whose
events were not read."""


async def capture(store: Store) -> list[History]:
    """Every instance of the store's schema as a History, as of one moment."""
    async with store.connection() as conn, conn.transaction():
        await conn.execute(ONE_SNAPSHOT)
        events = await (await conn.execute(EVENTS)).fetchall()
        ledger = await (await conn.execute(LEDGER)).fetchall()
        work = await (await conn.execute(WORK)).fetchall()
        original = {w: times for w, *times in await (await conn.execute(ORIGINAL_TIMES)).fetchall()}
    histories: dict[str, History] = {}
    for row in events:
        event = event_from_row(row)
        histories.setdefault(event.instance_id, History(event.instance_id, [])).events.append(event)
    for instance, *rest in ledger:
        if instance in histories:
            histories[instance].ledger.append(LedgerRow(*rest))
    for row in work:
        item = _work_item(row)
        if item.work_id in original:
            available, deadline = original[item.work_id]
            deadline = utc(deadline) if deadline is not None else item.deadline
            item = replace(item, available_at=utc(available), deadline=deadline)
        if item.instance_id in histories:
            histories[item.instance_id].work.append(item)
    return list(histories.values())


def _work_item(row: tuple) -> WorkItem:
    work_id, kind, instance, sequence, available, deadline, payload, tenant, corr, target = row
    return WorkItem(
        work_id,
        WorkKind(kind),
        instance,
        sequence,
        utc(available),
        utc(deadline),
        None if payload is None else bytes(payload).decode(),
        tenant,
        corr,
        target,
    )


def save(histories: Iterable[History], path: Path, drill: str) -> int:
    """Append ``histories`` to the corpus file ``path``; returns how many."""
    count = 0
    with path.open("a") as out:
        for history in histories:
            out.write(json.dumps({"drill": drill, **history.to_json()}) + "\n")
            count += 1
    return count


def load(path: Path) -> list[tuple[str, History]]:
    """The corpus: (drill id, history) pairs."""
    if not path.exists():
        return []
    corpus = []
    for line in path.read_text().splitlines():
        document = json.loads(line)
        corpus.append((document.pop("drill"), History.from_json(document)))
    return corpus
