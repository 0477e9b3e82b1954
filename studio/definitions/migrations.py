"""Migrating running instances to a new version, from its page: declare, preview, act.

The version's compatibility report (kept when it was published) is where an operator
starts: declare an edge from an older version to this one, choose instances the report
called compatible, preview what would happen to each (judged again now, on its current
state), and migrate them with a reason. Each is paused if it runs, migrated and resumed
by the engine (``engine.Client.migrate``), which judges it once more when it acts: an
instance that moved on since the preview is refused, never migrated blindly.

Only instances in the version's report can be chosen: they are the team's (the name
is), and possessing another id grants nothing. A request takes at most
MAX_MIGRATIONS_PER_REQUEST instances, and says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine import (
    DecisionRejected,
    IncompatibleInstances,
    InputRefused,
    Instance,
    InstanceStatus,
    Verdict,
    WaylineError,
)
from engine.api.queries import DeclaredEdge, PublishedVersion
from engine.model.definitions import DefinitionRef
from studio.definitions import service as definitions
from studio.errors import Invalid
from studio.runtime import Runtime

MAX_MIGRATIONS_PER_REQUEST = 50
"""The most instances one preview or one migration takes."""


@dataclass(frozen=True)
class EdgeChoice:
    """An older version with instances in the report, and its declared edge (if any)."""

    from_version: str
    edge: DeclaredEdge | None


@dataclass(frozen=True)
class Planned:
    """One chosen instance as the preview shows it, judged now."""

    instance_id: str
    status: InstanceStatus
    source: DefinitionRef
    verdict: Verdict
    edge: bool

    @property
    def refusal(self) -> str:
        """Why it would not be migrated ('' when it would)."""
        if not self.verdict.compatible:
            return self.verdict.reason
        if not self.edge:
            return f"no edge from version {self.source.version} is declared"
        return ""

    @property
    def plan(self) -> str:
        if self.refusal:
            return "refused"
        if self.status is InstanceStatus.RUNNING:
            return "paused, migrated, resumed"
        return "migrated (stays paused)"


@dataclass(frozen=True)
class Migrated:
    """What migrating one instance did: ``done`` or refused with the reason."""

    instance_id: str
    reason: str = ""

    @property
    def done(self) -> bool:
        return not self.reason


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
    """The chosen ids, each in the version's report; Invalid for none, too many, or
    one the report does not hold."""
    if not instance_ids:
        raise Invalid("choose at least one instance to migrate")
    if len(instance_ids) > MAX_MIGRATIONS_PER_REQUEST:
        raise Invalid(
            f"{len(instance_ids)} instances were chosen; at most "
            f"{MAX_MIGRATIONS_PER_REQUEST} can be migrated at a time"
        )
    stored = await definitions.compatibility_of(runtime, published)
    known = {v.instance_id for v in stored.report.verdicts} if stored else set()
    for instance_id in instance_ids:
        if instance_id not in known:
            ref = published.definition.ref
            raise Invalid(f"{instance_id} is not in the compatibility report of {ref}")
    return list(dict.fromkeys(instance_ids))


async def preview(runtime: Runtime, name: str, version: str, ids: list[str]) -> list[Planned]:
    """What migrating each chosen instance would do, judged on its state now."""
    edges = {e.from_version for e in await runtime.queries.migration_edges(name)
             if e.to_version == version}  # fmt: skip
    return [await _planned(runtime, version, instance_id, edges) for instance_id in ids]


async def _planned(runtime: Runtime, version: str, instance_id: str, edges: set[str]) -> Planned:
    state: Instance = await runtime.client.inspect(instance_id)
    verdict = await runtime.client.judge(instance_id, version)
    has_edge = state.definition.version in edges
    return Planned(instance_id, state.status, state.definition, verdict, has_edge)


async def migrate(
    runtime: Runtime, actor: str, version: str, ids: list[str], reason: str
) -> list[Migrated]:
    """Migrate each chosen instance (the engine judges each again as it acts)."""
    if not reason.strip():
        raise Invalid("give a reason: it is recorded in each instance's audit trail")
    return [await _migrate_one(runtime, actor, version, i, reason) for i in ids]


async def _migrate_one(
    runtime: Runtime, actor: str, version: str, instance_id: str, reason: str
) -> Migrated:
    try:
        await runtime.client.migrate(instance_id, version, actor, reason)
    except (IncompatibleInstances, DecisionRejected) as refused:
        return Migrated(instance_id, str(refused))
    except InputRefused as refused:
        raise Invalid(str(refused)) from None
    except WaylineError as failed:  # it ended or changed meanwhile: say so, go on
        return Migrated(instance_id, str(failed))
    return Migrated(instance_id)
