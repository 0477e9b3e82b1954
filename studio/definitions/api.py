"""``/api/definitions``: the team's published definitions, publish, deprecate, diff."""

from __future__ import annotations

from litestar import Response
from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery, JSONBody

from engine.api.queries import PublishedVersion
from studio.definitions import service as definitions
from studio.definitions.problems import check_document
from studio.definitions.schemas import (
    DefinitionOut,
    DiffOut,
    DocumentIn,
    PublishIn,
    PublishOut,
    ValidationOut,
    VersionDetailOut,
    VersionOut,
    definition_out,
    diff_out,
    problems_out,
    published,
    version_out,
)
from studio.errors import Invalid
from studio.operations import workers
from studio.principal import Principal
from studio.runtime import Runtime


async def list_definitions(
    principal: NamedDependency[Principal], runtime: NamedDependency[Runtime]
) -> list[DefinitionOut]:
    found = await definitions.summaries(runtime, principal.team_id)
    return [definition_out(s) for s in found]


async def list_versions(
    principal: NamedDependency[Principal], runtime: NamedDependency[Runtime], name: FromPath[str]
) -> list[VersionOut]:
    found = await definitions.versions_of(runtime, principal.team_id, name)
    return [version_out(v) for v in found]


async def get_version(published_version: NamedDependency[PublishedVersion]) -> VersionDetailOut:
    document = definitions.export_document(published_version)
    return VersionDetailOut(version_out(published_version), document)


async def publish(
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    data: JSONBody[PublishIn],
) -> Response[PublishOut]:
    """Publish a definition document (201 when new, 200 when identical content existed)."""
    outcome = await definitions.publish(
        runtime, principal.team_id, principal.actor, data.document, data.require_compatible
    )
    return published(outcome)


async def validate(runtime: NamedDependency[Runtime], data: JSONBody[DocumentIn]) -> ValidationOut:
    """Check a document without publishing it (unknown targets are warnings)."""
    problems = check_document(data.document, await workers.known_targets(runtime.queries))
    fingerprint = problems.definition.fingerprint if problems.definition else None
    return ValidationOut(problems.definition is not None, fingerprint, problems_out(problems))


async def deprecate(
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    name: FromPath[str],
    version: FromPath[str],
) -> VersionOut:
    await definitions.deprecate(runtime, principal.team_id, principal.actor, name, version)
    return version_out(await definitions.version_of(runtime, principal.team_id, name, version))


async def diff(
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    name: FromPath[str],
    left: FromQuery[str],
    right: FromQuery[str],
) -> DiffOut:
    comparison = await definitions.compare(runtime, principal.team_id, name, left, right)
    if comparison is None:
        raise Invalid("name two versions to compare")
    return diff_out(comparison.left, comparison.right, comparison.diff)
