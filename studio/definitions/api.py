"""``/api/definitions``: the team's published definitions, publish, deprecate, diff."""

from __future__ import annotations

from litestar import Request, Response
from litestar.params import FromPath, FromQuery, JSONBody

from studio.definitions import service as definitions
from studio.definitions.problems import check_document
from studio.definitions.schemas import (
    DefinitionOut,
    DiffOut,
    DocumentIn,
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
from studio.rendering import principal_of, runtime_of


async def list_definitions(request: Request) -> list[DefinitionOut]:
    principal = principal_of(request)
    found = await definitions.summaries(runtime_of(request), principal.team_id)
    return [definition_out(s) for s in found]


async def list_versions(request: Request, name: FromPath[str]) -> list[VersionOut]:
    principal = principal_of(request)
    found = await definitions.versions_of(runtime_of(request), principal.team_id, name)
    return [version_out(v) for v in found]


async def get_version(
    request: Request, name: FromPath[str], version: FromPath[str]
) -> VersionDetailOut:
    principal = principal_of(request)
    found = await definitions.version_of(runtime_of(request), principal.team_id, name, version)
    return VersionDetailOut(version_out(found), definitions.export_document(found))


async def publish(request: Request, data: JSONBody[DocumentIn]) -> Response[PublishOut]:
    """Publish a definition document (201 when new, 200 when identical content existed)."""
    principal = principal_of(request)
    outcome = await definitions.publish(
        runtime_of(request), principal.team_id, principal.actor, data.document
    )
    return published(outcome)


async def validate(request: Request, data: JSONBody[DocumentIn]) -> ValidationOut:
    """Check a document without publishing it (unknown targets are warnings)."""
    problems = check_document(
        data.document, await workers.known_targets(runtime_of(request).queries)
    )
    fingerprint = problems.definition.fingerprint if problems.definition else None
    return ValidationOut(problems.definition is not None, fingerprint, problems_out(problems))


async def deprecate(request: Request, name: FromPath[str], version: FromPath[str]) -> VersionOut:
    principal = principal_of(request)
    runtime = runtime_of(request)
    await definitions.deprecate(runtime, principal.team_id, name, version)
    return version_out(await definitions.version_of(runtime, principal.team_id, name, version))


async def diff(
    request: Request, name: FromPath[str], left: FromQuery[str], right: FromQuery[str]
) -> DiffOut:
    principal = principal_of(request)
    comparison = await definitions.compare(
        runtime_of(request), principal.team_id, name, left, right
    )
    if comparison is None:
        raise Invalid("name two versions to compare")
    return diff_out(comparison.left, comparison.right, comparison.diff)
