"""Published definitions of a team: list, versions, publish, deprecate, export, diff.

Everything is read through the team: a name another team owns is not found here, and
publishing it is a conflict (the catalog keeps a name to the team that first published
it). Publishing the same content again is harmless and says so; the same name and
version with other content is a conflict that names the fix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine import ChildDefinitionNotFound, DefinitionConflict, IncompatibleInstances
from engine.api.queries import PublishedVersion, StoredReport
from engine.model.definitions import Definition, DefinitionRef, definition_to_json
from engine.model.identifiers import local_instance_id
from engine.model.words import counted
from studio.definitions.diff import DefinitionDiff
from studio.definitions.problems import Problems, check_document
from studio.drawings import drawing_of_document
from studio.errors import Conflict, Invalid, NotFound
from studio.runtime import Runtime

SHORT_FINGERPRINT = 12


def short_fingerprint(fingerprint: str) -> str:
    """The first 12 hex digits: enough to tell versions apart at a glance."""
    return fingerprint[:SHORT_FINGERPRINT]


@dataclass(frozen=True)
class DefinitionSummary:
    """One name of the team: its latest version and how many versions it has."""

    name: str
    latest: PublishedVersion
    versions: int

    @property
    def definition(self) -> Definition:
        return self.latest.definition


@dataclass(frozen=True)
class PublishOutcome:
    """A publish's result: publishing the same content again is success, not an error,
    so the page says which happened."""

    definition: Definition
    created: bool
    """False when exactly this content was already published (nothing changed)."""

    @property
    def page(self) -> str:
        """The version's page, which says whether this publish created it or found it."""
        d = self.definition
        return f"/definitions/{d.name}/versions/{d.version}?published=" + (
            "new" if self.created else "same"
        )


@dataclass(frozen=True)
class Comparison:
    left: PublishedVersion
    right: PublishedVersion
    diff: DefinitionDiff


async def team_versions(runtime: Runtime, team: str) -> list[PublishedVersion]:
    return await runtime.queries.versions(team)


async def summaries(runtime: Runtime, team: str) -> list[DefinitionSummary]:
    """The team's definitions by name, each with its latest published version."""
    by_name: dict[str, list[PublishedVersion]] = {}
    for version in await team_versions(runtime, team):
        by_name.setdefault(version.definition.name, []).append(version)
    return [DefinitionSummary(name, found[-1], len(found)) for name, found in by_name.items()]


async def versions_of(runtime: Runtime, team: str, name: str) -> list[PublishedVersion]:
    """Every version of ``name``, oldest first; NotFound unless the team has it."""
    found = [v for v in await team_versions(runtime, team) if v.definition.name == name]
    if not found:
        raise NotFound(f"no definition named {name} in this team")
    return found


async def version_of(runtime: Runtime, team: str, name: str, version: str) -> PublishedVersion:
    for published in await versions_of(runtime, team, name):
        if published.definition.version == version:
            return published
    raise NotFound(f"{name}@{version} is not published in this team")


def problems_payload(problems: Problems) -> list[dict[str, str]]:
    return [{"path": p.path, "message": p.message} for p in problems.errors]


async def publish(
    runtime: Runtime, team: str, actor: str, document: Any, require_compatible: bool = False
) -> PublishOutcome:
    """Validate and publish ``document`` as an immutable version owned by ``team``.

    The engine judges the running instances of the name's other versions and keeps
    the report with the version (shown on its page); ``require_compatible`` refuses
    the publish (Conflict, naming them) when any could not move to it."""
    problems = check_document(document)
    if problems.definition is None:
        raise Invalid(
            f"the definition has {counted(len(problems.errors), 'problem')}; "
            "fix them before publishing",
            problems_payload(problems),
        )
    definition = problems.definition
    try:
        created = await runtime.client.publish(
            definition, actor, team, require_compatible=require_compatible
        )
    except IncompatibleInstances as refused:  # the instances as the team knows them
        report = refused.report
        why = report.refusal(lambda i: local_instance_id(team, i)) if report else str(refused)
        raise Conflict(why) from None
    except DefinitionConflict as clash:
        raise Conflict(str(clash)) from None
    except ChildDefinitionNotFound as missing:
        raise Invalid(str(missing)) from None
    return PublishOutcome(definition, created)


async def name_taken(runtime: Runtime, team: str, name: str) -> bool:
    """Whether another team owns ``name``, so that publishing it here would be refused
    (which says as much: this tells nothing a publish does not)."""
    owner = await runtime.queries.name_owner(name)
    return owner is not None and owner != team


async def deprecate(runtime: Runtime, team: str, actor: str, name: str, version: str) -> None:
    """Refuse new instances of a version; running ones keep it (its fingerprint stays).
    The version keeps who deprecated it (``actor``) and when."""
    await version_of(runtime, team, name, version)
    await runtime.client.deprecate(name, version, actor)


async def compatibility_of(runtime: Runtime, published: PublishedVersion) -> StoredReport | None:
    """The compatibility report kept when ``published`` was published (None before
    reports were kept)."""
    d = published.definition
    return await runtime.queries.compatibility_report(d.name, d.version)


def export_document(published: PublishedVersion) -> dict[str, Any]:
    """The version in the exchange format, as ``wayline definition publish`` reads it."""
    return definition_to_json(published.definition)


async def compare(
    runtime: Runtime, team: str, name: str, left: str | None, right: str | None
) -> Comparison | None:
    """A structural diff of two versions (default: the two latest); None with one version."""
    versions = await versions_of(runtime, team, name)
    if left is None and right is None:
        if len(versions) < 2:
            return None
        older, newer = versions[-2], versions[-1]
    else:
        by_version = {v.definition.version: v for v in versions}
        missing = [v for v in (left, right) if v not in by_version]
        if missing:
            raise NotFound(f"{name}@{missing[0]} is not published in this team")
        older, newer = by_version[left or ""], by_version[right or ""]
    left_document, right_document = export_document(older), export_document(newer)
    diff = drawing_of_document(right_document).diff(left_document, right_document)
    return Comparison(older, newer, diff)


async def child_choices(runtime: Runtime, team: str) -> list[DefinitionRef]:
    """Versions a child step may pin: the team's published, not deprecated versions."""
    return [v.definition.ref for v in await team_versions(runtime, team) if not v.deprecated]
