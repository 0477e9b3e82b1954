"""Migrating running instances to a new version, from its page: declare, preview, act.

The version's compatibility report (kept when it was published) is where an operator
starts: declare an edge from an older version to this one, choose instances the report
called compatible, preview what would happen to each (judged again now, on its current
state), and migrate them with a reason. Preview and migration are the instances list's
bulk migrate (``studio.instances.bulk``): each instance is paused if it runs, migrated
and resumed by the engine (``engine.Client.migrate``), which judges it once more when
it acts, so an instance that moved on since the preview is refused, never migrated
blindly; the bulk id keeps the results and makes a repeated form act once.

Only instances in the version's report can be chosen: they are the team's (the name
is), and possessing another id grants nothing. A request takes at most
MAX_MIGRATIONS_PER_REQUEST instances, and says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine import InputRefused
from engine.api.bulk_commands import BulkOutcome
from engine.api.queries import DeclaredEdge, PublishedVersion
from engine.decide.operator_actions import Action
from engine.decide.previews import ActionRequest
from studio.definitions import service as definitions
from studio.errors import Invalid
from studio.instances import bulk
from studio.instances.bulk import BulkPreview, Selection
from studio.principal import Principal
from studio.runtime import Runtime

MAX_MIGRATIONS_PER_REQUEST = 50
"""The most instances one preview or one migration takes."""


@dataclass(frozen=True)
class EdgeChoice:
    """An older version with instances in the report, and its declared edge (if any)."""

    from_version: str
    edge: DeclaredEdge | None


async def edge_choices(
    runtime: Runtime, published: PublishedVersion, versions: set[str]
) -> list[EdgeChoice]:
    """Each of ``versions`` (those with instances in the report) with its edge to
    ``published``, declared or not."""
    d = published.definition
    edges = {
        e.from_version: e
        for e in await runtime.queries.migration_edges(d.name)
        if e.to_version == d.version
    }
    return [EdgeChoice(v, edges.get(v)) for v in sorted(versions)]


async def declare(
    runtime: Runtime, team: str, actor: str, name: str, version: str, source: str, reason: str
) -> None:
    """Declare the edge from ``name@source`` to ``name@version`` (both the team's)."""
    await definitions.version_of(runtime, team, name, version)
    await definitions.version_of(runtime, team, name, source)
    try:
        await runtime.client.declare_migration(name, source, version, actor, reason)
    except InputRefused as refused:
        raise Invalid(str(refused)) from None


async def chosen(
    runtime: Runtime, published: PublishedVersion, instance_ids: list[str]
) -> list[str]:
    """The chosen ids, each in the version's report; Invalid for none, more than
    MAX_MIGRATIONS_PER_REQUEST, or one the report does not hold."""
    if not instance_ids:
        raise Invalid(
            "no instance was ticked: tick the compatible instances to migrate in the "
            f"report above (1 to {MAX_MIGRATIONS_PER_REQUEST} at a time)"
        )
    chosen = bulk.checked(instance_ids, MAX_MIGRATIONS_PER_REQUEST)
    stored = await definitions.compatibility_of(runtime, published)
    known = {v.instance_id for v in stored.report.verdicts} if stored else set()
    for instance_id in chosen:
        if instance_id not in known:
            ref = published.definition.ref
            raise Invalid(f"{instance_id} is not in the compatibility report of {ref}")
    return chosen


def to_version(published: PublishedVersion) -> ActionRequest:
    """The bulk action that migrates the chosen instances to ``published``."""
    return bulk.ask(Action.MIGRATE.value, version=published.definition.version)


async def preview(runtime: Runtime, published: PublishedVersion, ids: list[str]) -> BulkPreview:
    """What migrating each chosen instance would do, judged on its state now."""
    return await bulk.preview(runtime, Selection(tuple(ids)), to_version(published))


async def migrate(
    runtime: Runtime,
    principal: Principal,
    published: PublishedVersion,
    bulk_id: str,
    ids: list[str],
    reason: str,
) -> BulkOutcome:
    """Migrate each chosen instance once under ``bulk_id`` (the engine judges each
    again as it acts; the results are kept with the bulk, as any bulk action's)."""
    request = to_version(published)
    selection = Selection(tuple(ids))
    team, actor = principal.team_id, principal.actor
    return await bulk.act(runtime, team, actor, bulk_id, request, selection, reason)
