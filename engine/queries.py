"""The engine's read surface beside ``Client``: what an operator's tool may look at.

``Client`` changes instances (start, signal, commands, publishing, resolving dead
letters); ``Queries`` answers the questions a console asks about one store: lists of
instances and their history pages, the published versions, an instance's or a worker's
work, the registered workers, dead letters and their resolutions. The rows it returns
are exported here too, so a tool such as the studio imports this module and ``engine``,
never ``engine.store``: the store's modules stay free to change behind these names.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection
from datetime import datetime

from engine.model.events import Event, EventKind
from engine.model.instance import InstanceStatus
from engine.model.limits import MAX_HISTORY_PAGE_EVENTS, MAX_PAGE_ITEMS
from engine.store import catalog, dead_letters, reads, work_views, workers
from engine.store.catalog import PublishedVersion
from engine.store.dead_letters import (
    DeadLetter,
    DeadLetterCursor,
    DeadLetterGroup,
    DeadLetterPage,
    ResolutionAction,
    ResolutionRecord,
)
from engine.store.reads import HistoryPage, InstancePage, InstanceRow, InstanceView
from engine.store.rows import WorkState
from engine.store.store import Store
from engine.store.work_views import MAX_VIEW_ROWS, WorkRow
from engine.store.workers import WorkerInfo

__all__ = [
    "DeadLetter",
    "DeadLetterCursor",
    "DeadLetterGroup",
    "DeadLetterPage",
    "HistoryPage",
    "InstancePage",
    "InstanceRow",
    "InstanceView",
    "PublishedVersion",
    "Queries",
    "ResolutionAction",
    "ResolutionRecord",
    "WorkRow",
    "WorkState",
    "WorkerInfo",
]


class Queries:
    """Read-only questions about one store; every answer is a frozen row."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def now(self) -> datetime:
        """The store's clock, which the rows' times are on."""
        return self.store.now()

    # Instances and their history

    async def instances(
        self,
        view: InstanceView = InstanceView.ACTIVE,
        after: tuple[datetime, str] | None = None,
        limit: int = MAX_PAGE_ITEMS,
        *,
        definition_name: str | None = None,
        definition_version: str | None = None,
        status: InstanceStatus | None = None,
        tenant: str | None = None,
        instance_id: str | None = None,
        started_from: datetime | None = None,
        started_before: datetime | None = None,
    ) -> InstancePage:
        """One keyset page of instances, newest first, narrowed by the filters given."""
        return await reads.list_instances(
            self.store,
            view,
            after,
            limit,
            definition_name=definition_name,
            definition_version=definition_version,
            status=status,
            tenant=tenant,
            instance_id=instance_id,
            started_from=started_from,
            started_before=started_before,
        )

    async def instance_rows(self, instance_ids: Collection[str]) -> dict[str, InstanceRow]:
        """The rows of the given instances that exist, by id."""
        return await reads.get_instances(self.store, instance_ids)

    async def history_page(
        self,
        instance_id: str,
        after: int = 0,
        limit: int = MAX_HISTORY_PAGE_EVENTS,
        kinds: list[EventKind] | None = None,
        step: str | None = None,
    ) -> HistoryPage:
        """Events after sequence ``after``, at most ``limit``; filters narrow the page."""
        return await reads.history_page(self.store, instance_id, after, limit, kinds, step)

    def history(self, instance_id: str) -> AsyncIterator[Event]:
        """Every event of the instance in order, one page in memory at a time."""
        return reads.export_history(self.store, instance_id)

    # Definitions

    async def versions(self, team: str | None = None) -> list[PublishedVersion]:
        """Every published version (of one team, when given), by name, oldest first."""
        return await catalog.versions(self.store, team)

    # Work and workers

    async def instance_work(self, instance_id: str, limit: int = MAX_VIEW_ROWS) -> list[WorkRow]:
        """The newest ``limit`` work rows of the instance, newest first."""
        return await work_views.instance_work(self.store, instance_id, limit)

    async def work_rows(self, work_ids: Collection[str]) -> dict[str, WorkRow]:
        """The given work rows that exist, by id."""
        return await work_views.work_rows(self.store, work_ids)

    async def held_leases(
        self, owners: Collection[str], tenant: str | None = None
    ) -> list[WorkRow]:
        """Leases held by ``owners`` (only ``tenant``'s work when given)."""
        return await work_views.held_leases(self.store, owners, tenant)

    async def workers(self) -> list[WorkerInfo]:
        """Registered workers, most recently heard first."""
        return await workers.list_workers(self.store)

    async def advertised_targets(self, since: datetime) -> list[str]:
        """Activity targets advertised by workers that spoke after ``since``."""
        return await workers.advertised_targets(self.store, since)

    # Dead letters

    async def dead_letters(
        self,
        after: DeadLetterCursor | None = None,
        limit: int = MAX_PAGE_ITEMS,
        tenant: str | None = None,
        failure_code: str | None = None,
    ) -> DeadLetterPage:
        """Unresolved dead letters after ``after``, oldest failure first."""
        return await dead_letters.list_dead_letters(
            self.store, after, limit, tenant=tenant, failure_code=failure_code
        )

    async def dead_letter_groups(self, tenant: str | None = None) -> list[DeadLetterGroup]:
        """Groups (failure code, definition version) of the unresolved dead letters."""
        return await dead_letters.dead_letter_groups(self.store, tenant=tenant)

    async def recent_resolutions(
        self, tenant: str | None = None, limit: int = MAX_PAGE_ITEMS
    ) -> list[ResolutionRecord]:
        """The newest ``limit`` resolutions (of ``tenant``'s work when given)."""
        return await dead_letters.recent_resolutions(self.store, tenant=tenant, limit=limit)

    async def resolution(self, command_id: str) -> ResolutionRecord | None:
        """The committed resolution with this command id, if any."""
        return await dead_letters.find_resolution(self.store, command_id)
