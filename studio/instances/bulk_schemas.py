"""The JSON shapes of bulk operator actions: what to preview or take, and the answers.

Converted from the engine's previews and the kept bulk results, so the API says what
the preview and result pages show.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from engine.api.queries import BulkCommand, BulkResult
from engine.decide.bulk_actions import BULK_ACTIONS, RESOLUTIONS
from engine.decide.previews import Preview, Verdict
from engine.model.identifiers import local_instance_id
from studio.choices import InstanceStatusName, InstanceView, one_of
from studio.instances.bulk import BulkPreview
from studio.instances.schemas import ConsequencesOut, consequences_out

BulkActionName = one_of(a.value for a in BULK_ACTIONS)
BulkResolution = one_of(RESOLUTIONS)
BulkOutcomeName = one_of(("done", "unchanged", "refused"))


@dataclass
class BulkFilterIn:
    """The instances list's filters (as on the Instances page)."""

    view: InstanceView = "active"
    definition: str = ""
    version: str = ""
    status: InstanceStatusName | None = None
    step: str = ""
    failure_code: str = ""
    started_from: str = ""
    started_before: str = ""


@dataclass
class BulkPreviewIn:
    """An action and its instances: ``instances`` by id, or else ``filter``."""

    action: BulkActionName
    step: str | None = None
    """For retry and resolve: the step; none means each instance's activity in doubt."""
    resolution: BulkResolution | None = None
    result: Any = None
    version: str | None = None
    """For migrate: the version of their name each instance moves to (along a declared
    edge; an instance the compatibility judge refuses is never migrated)."""
    instances: list[str] | None = None
    filter: BulkFilterIn | None = None


@dataclass
class BulkIn:
    """Take a previewed action once: the same ``bulk_id`` again acts on nothing twice."""

    bulk_id: str
    action: BulkActionName
    reason: str
    instances: list[str]
    step: str | None = None
    resolution: BulkResolution | None = None
    result: Any = None
    version: str | None = None


@dataclass
class InstancePreviewOut(ConsequencesOut):
    id: str
    definition: str
    version: str
    fingerprint: str
    status: InstanceStatusName
    verdict: str
    """applies, unchanged or refused."""
    reason: str
    step: str | None
    becomes: InstanceStatusName | None
    moves_to: MovesToOut | None = None
    """For migrate: the version (and fingerprint) the instance would run afterwards."""


@dataclass
class MovesToOut:
    definition: str
    version: str
    fingerprint: str


@dataclass
class RefusalOut:
    reason: str
    instances: list[str]


@dataclass
class VersionCountOut:
    definition: str
    version: str
    fingerprint: str
    instances: int


@dataclass
class BulkPreviewOut:
    bulk_id: str
    """A fresh bulk id to take this action with (``POST /api/instances/bulk``)."""
    limit: int
    more: bool
    """The filter matches more than ``limit`` instances; these are the first."""
    total: int
    applies: int
    unchanged: int
    refused: int
    refusals: list[RefusalOut]
    same_key_reruns: int
    new_key_reruns: int
    compensations: dict[str, int]
    in_doubt: dict[str, int]
    versions: list[VersionCountOut]
    instances: list[InstancePreviewOut] = field(default_factory=list)


@dataclass
class BulkResultOut:
    id: str
    outcome: BulkOutcomeName
    detail: str
    command_id: str | None
    status_before: InstanceStatusName
    status_after: InstanceStatusName


@dataclass
class BulkOut:
    bulk_id: str
    action: BulkActionName
    step: str | None
    arguments: dict[str, Any]
    actor: str
    reason: str
    created_at: datetime | None
    replayed: bool
    """True when this request acted on nothing: the bulk had been taken before."""
    results: list[BulkResultOut]


def preview_out(found: BulkPreview, bulk_id: str, limit: int, team: str) -> BulkPreviewOut:
    radius = found.radius
    return BulkPreviewOut(
        bulk_id=bulk_id,
        limit=limit,
        more=found.selection.more,
        total=radius.total,
        applies=radius.applies,
        unchanged=radius.verdicts.get(Verdict.UNCHANGED, 0),
        refused=radius.verdicts.get(Verdict.REFUSED, 0),
        refusals=[
            RefusalOut(reason, [local_instance_id(team, i) for i in ids])
            for reason, ids in radius.refusals.items()
        ],
        same_key_reruns=radius.same_key_reruns,
        new_key_reruns=radius.new_key_reruns,
        compensations=dict(radius.compensations),
        in_doubt={fate.value: n for fate, n in radius.in_doubt.items()},
        versions=[
            VersionCountOut(ref.name, ref.version, ref.fingerprint, n)
            for ref, n in radius.versions.items()
        ],
        instances=[instance_preview_out(p, team) for p in found.previews],
    )


def instance_preview_out(p: Preview, team: str) -> InstancePreviewOut:
    return InstancePreviewOut(
        id=local_instance_id(team, p.instance_id),
        definition=p.definition.name,
        version=p.definition.version,
        fingerprint=p.definition.fingerprint,
        status=p.status.label,
        verdict=p.verdict.value,
        reason=p.reason,
        step=p.request.step or None,
        becomes=p.becomes.label if p.becomes else None,
        **consequences_out(p),
        moves_to=MovesToOut(p.moves_to.name, p.moves_to.version, p.moves_to.fingerprint)
        if p.moves_to
        else None,
    )


def bulk_out(bulk: BulkCommand, results: list[BulkResult], team: str, replayed: bool) -> BulkOut:
    return BulkOut(
        bulk_id=bulk.bulk_id,
        action=bulk.action,
        step=bulk.step or None,
        arguments=bulk.arguments,
        actor=bulk.actor,
        reason=bulk.reason,
        created_at=bulk.created_at,
        replayed=replayed,
        results=[
            BulkResultOut(
                local_instance_id(team, r.instance_id),
                r.outcome,
                r.detail,
                r.command_id or None,
                r.status_before.label,
                r.status_after.label,
            )
            for r in results
        ],
    )
