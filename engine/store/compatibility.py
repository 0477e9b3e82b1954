"""Judging the running instances of a name against a new version of it.

``judge_running`` replays every running or paused instance of the name's other
versions (keyset pages of the active list, at most MAX_JUDGED_INSTANCES) and asks the
shared judge (``engine.decide.compatibility``) about each: the report publishing stores
with the version and ``require_compatible`` gates on. Nothing is written. Instances
may move on after they were judged: a migration re-judges the instance it acts on.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from engine.decide.compatibility import MOVABLE, judge
from engine.model.compatibility import MAX_JUDGED_INSTANCES, CompatibilityReport, Verdict
from engine.model.definitions import Definition
from engine.model.registry import Registry
from engine.store import reads
from engine.store.errors import HistoryLimitExceeded
from engine.store.reads import InstanceRow, InstanceView
from engine.store.store import Store


async def judge_running(
    store: Store, registry: Registry, target: Definition, code: Any = None
) -> CompatibilityReport:
    """The report on every running or paused instance of ``target``'s name pinned to
    another version; ``code`` is the new version's code where its mode runs code."""
    verdicts: list[Verdict] = []
    async for row in running_of_other_versions(store, target):
        if len(verdicts) == MAX_JUDGED_INSTANCES:
            return CompatibilityReport(target.ref, tuple(verdicts), complete=False)
        verdicts.append(await _verdict(store, registry, target, row, code))
    return CompatibilityReport(target.ref, tuple(verdicts))


async def _verdict(
    store: Store, registry: Registry, target: Definition, row: InstanceRow, code: Any
) -> Verdict:
    try:
        state = await reads.inspect(store, registry, row.instance_id)
    except HistoryLimitExceeded:
        pin = row.definition
        reason = "its history is too long to replay here; continue it as new first"
        return Verdict(row.instance_id, pin.version, pin.fingerprint, reason)
    return judge(target, state, code)


async def running_of_other_versions(store: Store, target: Definition) -> AsyncIterator[InstanceRow]:
    """The rows of running or paused instances of the name on another version."""
    after = None
    while True:
        page = await reads.list_instances(
            store, InstanceView.ACTIVE, after=after, definition_name=target.name
        )
        for row in page.rows:
            if row.status in MOVABLE and row.definition.version != target.version:
                yield row
        if page.next_cursor is None:
            return
        after = page.next_cursor
