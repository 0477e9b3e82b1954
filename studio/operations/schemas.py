"""The JSON shapes of the operations API: dead letters and their resolution, workers."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from engine.api.queries import DeadLetterGroup, WorkRow
from engine.model.identifiers import local_instance_id
from studio.choices import DeadLetterAction
from studio.operations.dead_letters import (
    DEFAULT_DEADLINE_IN,
    DEFAULT_RETRY_IN,
    DeadLetterView,
    ItemResult,
)
from studio.operations.workers import WorkerView
from studio.projection import projected


@dataclass
class DeadLetterOut:
    work_id: str
    instance_id: str
    definition: str | None
    version: str | None
    target: str
    token: int
    attempts: int
    failure_code: str
    failed_at: datetime
    deadline: datetime


@dataclass
class DeadLetterGroupOut:
    failure_code: str
    definition: str
    version: str
    count: int
    first_failed_at: datetime
    last_failed_at: datetime


@dataclass
class DeadLetterPageOut:
    items: list[DeadLetterOut]
    groups: list[DeadLetterGroupOut]
    next: str | None


@dataclass
class FenceIn:
    """A dead letter to resolve: its instance (as the list shows it), work id and token."""

    instance_id: str
    work_id: str
    token: int


@dataclass
class ResolveIn:
    """Resolve dead letters; each item gets its own result."""

    action: DeadLetterAction
    reason: str
    items: list[FenceIn]
    command_id: str | None = None
    """Deduplicates: the same command id again only replays what was done."""
    retry_in: str = DEFAULT_RETRY_IN
    deadline_in: str = DEFAULT_DEADLINE_IN


@dataclass
class ItemResultOut:
    work_id: str
    token: int
    instance_id: str
    ok: bool
    outcome: str
    message: str


@dataclass
class LeaseOut:
    work_id: str
    instance_id: str
    step: str
    attempt: int
    fencing_token: int
    expires_at: datetime | None


@dataclass
class WorkerOut:
    worker_id: str
    targets: list[str]
    started_at: datetime
    heartbeat_at: datetime
    concurrency: int
    hostname: str
    live: bool
    leases: list[LeaseOut]


def dead_letter_out(view: DeadLetterView, team: str) -> DeadLetterOut:
    d, ref = view.item, view.definition
    return projected(
        DeadLetterOut,
        d,
        instance_id=local_instance_id(team, d.instance_id),
        definition=ref.name if ref else None,
        version=ref.version if ref else None,
    )


def group_out(group: DeadLetterGroup) -> DeadLetterGroupOut:
    names = {"definition": group.definition_name, "version": group.definition_version}
    return projected(DeadLetterGroupOut, group, **names)


def result_out(result: ItemResult, team: str) -> ItemResultOut:
    instance_id = local_instance_id(team, result.instance_id)
    return ItemResultOut(
        result.work_id, result.token, instance_id, result.ok, result.outcome, result.message
    )


def lease_out(row: WorkRow, team: str) -> LeaseOut:
    instance_id = local_instance_id(team, row.instance_id)
    return LeaseOut(
        row.work_id, instance_id, row.step, row.attempt, row.token, row.lease_expires_at
    )


def worker_out(view: WorkerView, team: str) -> WorkerOut:
    info = view.info
    return WorkerOut(
        info.worker_id,
        list(info.targets),
        info.started_at,
        info.heartbeat_at,
        info.concurrency,
        info.hostname,
        view.live,
        [lease_out(lease, team) for lease in view.leases],
    )
