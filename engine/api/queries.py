"""The engine's read surface beside ``Client``: what an operator's tool may look at.

``Client`` changes instances (start, signal, commands, publishing, resolving dead
letters); ``Queries`` answers the questions a console asks about one store: lists of
instances and their history pages, the published versions, an instance's or a worker's
work, the registered workers, dead letters and their resolutions. The rows it returns
are exported here too, so a tool such as the studio imports this module and ``engine``,
never ``engine.store``: the store's modules stay free to change behind these names.

Each question is the store's read function bound to this store, so its signature and
docstring are written once, beside its SQL, and cannot drift from a restated copy here.
Its arguments are checked against that signature's annotations before the read runs
(``check_arguments``): an int as an instance id or a datetime without a time zone is
InputRefused saying which argument and what it must be, as the client says it.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from datetime import datetime
from typing import Any

from engine.model.arguments import check_arguments
from engine.modes.code import continuation
from engine.store import bulk_commands as bulk_reads
from engine.store import catalog, reads, replication, work_views
from engine.store import dead_letters as dead_letter_reads
from engine.store import holds as hold_reads
from engine.store import workers as worker_reads
from engine.store.bulk_commands import BulkCommand, BulkResult
from engine.store.catalog import DeclaredEdge, PublishedVersion, StoredReport
from engine.store.dead_letters import (
    DeadLetter,
    DeadLetterCursor,
    DeadLetterGroup,
    DeadLetterPage,
    ResolutionAction,
    ResolutionRecord,
)
from engine.store.holds import Hold, HoldRelease
from engine.store.reads import HistoryPage, InstancePage, InstanceRow, InstanceView
from engine.store.replication import WalPosition
from engine.store.rows import WorkState
from engine.store.store import Store
from engine.store.work_views import WorkRow
from engine.store.workers import WorkerInfo

__all__ = [
    "BulkCommand",
    "BulkResult",
    "DeadLetter",
    "DeadLetterCursor",
    "DeadLetterGroup",
    "DeadLetterPage",
    "DeclaredEdge",
    "HistoryPage",
    "Hold",
    "HoldRelease",
    "InstancePage",
    "InstanceRow",
    "InstanceView",
    "PublishedVersion",
    "Queries",
    "ResolutionAction",
    "ResolutionRecord",
    "StoredReport",
    "WalPosition",
    "WorkRow",
    "WorkState",
    "WorkerInfo",
]


class _StoreRead:
    """A store read function that ``Queries`` hands out bound to its own store.

    The function is looked up in its module at each access, not kept, so a read that
    is replaced there (a test counting the history pages read) is the one called. A call
    checks its arguments first: a coroutine's when it is awaited, as the client's are.
    """

    def __init__(self, read: Callable[..., Any]) -> None:
        self.module = sys.modules[read.__module__]
        self.name = read.__name__
        self.__doc__ = read.__doc__

    def __get__(self, queries: Queries | None, owner: type | None = None) -> Any:
        if queries is None:
            return self
        read = getattr(self.module, self.name)
        store = queries.store

        def checked(*args: Any, **kwargs: Any) -> Any:
            check_arguments(read, store, *args, **kwargs)
            return read(store, *args, **kwargs)

        if not inspect.iscoroutinefunction(read):
            return checked

        async def awaited(*args: Any, **kwargs: Any) -> Any:
            return await checked(*args, **kwargs)

        return awaited


class Queries:
    """Read-only questions about one store; every answer is a frozen row."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def now(self) -> datetime:
        """The store's clock, which the rows' times are on."""
        return self.store.now()

    # Instances and their history
    instances = _StoreRead(reads.list_instances)
    instance_rows = _StoreRead(reads.get_instances)
    parents = _StoreRead(reads.parents_of)
    fan_out = _StoreRead(reads.fan_out)

    history_page = _StoreRead(reads.history_page)
    history = _StoreRead(reads.export_history)

    # Definitions
    versions = _StoreRead(catalog.versions)
    name_owner = _StoreRead(catalog.name_owner)
    compatibility_report = _StoreRead(catalog.compatibility_report)
    migration_edges = _StoreRead(catalog.migration_edges)

    # Work and workers
    instance_work = _StoreRead(work_views.instance_work)
    work_rows = _StoreRead(work_views.work_rows)
    held_leases = _StoreRead(work_views.held_leases)
    workers = _StoreRead(worker_reads.list_workers)
    advertised_targets = _StoreRead(worker_reads.advertised_targets)
    running_targets = _StoreRead(worker_reads.running_targets)
    unserved_targets = _StoreRead(work_views.unserved_targets)

    # Dead letters
    dead_letters = _StoreRead(dead_letter_reads.list_dead_letters)
    dead_letter_groups = _StoreRead(dead_letter_reads.dead_letter_groups)
    recent_resolutions = _StoreRead(dead_letter_reads.recent_resolutions)
    resolution = _StoreRead(dead_letter_reads.find_resolution)
    instance_resolutions = _StoreRead(dead_letter_reads.latest_instance_resolutions)

    # Incident holds
    holds = _StoreRead(hold_reads.recent)
    hold = _StoreRead(hold_reads.find)
    holds_covering = _StoreRead(hold_reads.covering)
    instance_holds = _StoreRead(hold_reads.instance_holds)
    started_under_hold = _StoreRead(hold_reads.started_under_hold)

    # Replication: how far a replica's reads are behind its primary
    wal_position = _StoreRead(replication.wal_position)

    # Bulk operator actions
    bulk_command = _StoreRead(bulk_reads.find_bulk)
    recent_bulk_commands = _StoreRead(bulk_reads.recent_bulks)

    async def predecessor(self, instance_id: str) -> str:
        """The run ``instance_id`` continues (it was started as that run's successor:
        ``engine.modes.code.continuation``), '' for none."""
        candidate = continuation.predecessor_of(instance_id)
        if not candidate:
            return ""
        continued = await reads.continued_as(self.store, candidate)
        return candidate if continued == instance_id else ""
