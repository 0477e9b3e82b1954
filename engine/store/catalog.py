"""Published definition versions: immutable, pinned by fingerprint.

Publishing the same content again is a no-op; the same name and version with other
content is a conflict (a version is never edited: publish a new one). ``deprecated``
here is the catalog flag: set after publication, it refuses new instances while
existing ones still resolve, and it does not change the pinned fingerprint.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from engine.model.compatibility import CompatibilityReport, report_from_json
from engine.model.definitions import Definition, DefinitionRef, Mode, definition_to_json
from engine.model.errors import DefinitionNotFound
from engine.model.registry import MigrationEdge, Registry, keep_input
from engine.model.validation import parse_definition
from engine.store.errors import StoreError
from engine.store.statements import catalog as sql
from engine.store.store import Store
from engine.store.transactions import transact

FINGERPRINT_SHOWN = 12
"""How many hex digits of a fingerprint a message shows (as ``wayline definition list``)."""


class DefinitionConflict(StoreError):
    """This name and version are already published with other content."""


class ChildDefinitionNotFound(DefinitionNotFound):
    """A child step pins a version its team has not published (missing, another
    fingerprint, or another team's: the message is the same for all three)."""


@dataclass(frozen=True)
class PublishedVersion:
    definition: Definition
    deprecated: bool
    published_at: datetime
    published_by: str
    team_id: str = ""
    deprecated_by: str = ""
    """Who deprecated it (empty while it is active, and for a version deprecated before
    this was kept); a second deprecation keeps the first's who and when."""
    deprecated_at: datetime | None = None


async def publish(
    store: Store,
    definition: Definition,
    actor: str = "",
    team: str = "",
    report: CompatibilityReport | None = None,
) -> bool:
    """Publish a version; True when new, False when the same content was already there.

    A name belongs to the team that first published it; another team gets a conflict.
    Every child step must pin a version this team published (``_require_child``).
    ``report`` (the judgement of the instances running when it was published) is kept
    with a new version, in the same transaction; publishing again keeps the first.
    """
    params = {
        "name": definition.name,
        "version": definition.version,
        "fingerprint": definition.fingerprint,
        "spec": Jsonb(definition_to_json(definition)),
        "deprecated": definition.deprecated,
        "actor": actor,
        "team": team,
    }

    async def body(conn: psycopg.AsyncConnection) -> tuple[Any, ...] | None:
        """None when published now; else the version already there (or its owner's)."""
        for step in definition.steps:
            if step.child_definition is not None:
                await _require_child(conn, step.name, step.child_definition, team)
        if await (await conn.execute(sql.PUBLISH, params)).fetchone() is not None:
            if report is not None:
                await conn.execute(sql.SAVE_REPORT, {**params, **_report_row(report)})
            return None
        existing = await (await conn.execute(sql.EXISTING_VERSION, params)).fetchone()
        return existing or ("", team, False)

    existing = await transact(store, f"publishing {definition.ref}", body)
    if existing is None:
        return True
    fingerprint, owner, same_version = existing
    if owner != team:
        raise DefinitionConflict(f"the name {definition.name} belongs to another team")
    if same_version and fingerprint == definition.fingerprint:
        return False
    raise DefinitionConflict(conflict_message(definition, fingerprint))


def _report_row(report: CompatibilityReport) -> dict[str, Any]:
    return {
        "report": Jsonb(report.to_json()),
        "compatible": report.compatible_count,
        "incompatible": len(report.incompatible),
        "complete": report.complete,
    }


@dataclass(frozen=True)
class StoredReport:
    """A version's compatibility report as the catalog keeps it, and when it was made."""

    report: CompatibilityReport
    judged_at: datetime


async def compatibility_report(store: Store, name: str, version: str) -> StoredReport | None:
    """The report stored when ``name@version`` was published; None for a version
    published before reports were kept."""
    async with store.reading() as conn:
        params = {"name": name, "version": version}
        row = await (await conn.execute(sql.REPORT, params)).fetchone()
    if row is None:
        return None
    document, judged_at = row
    document = json.loads(document) if isinstance(document, str) else document
    return StoredReport(report_from_json(document), judged_at)


def conflict_message(definition: Definition, published: str) -> str:
    """Why ``definition`` cannot be published beside the version of its name already
    published with fingerprint ``published``. Code is not read from a document an author
    can open, so its message gives both fingerprints: the code changed, not a file.
    A worker whose app's code differs from the version it is asked to run says the same."""
    if definition.mode is Mode.CODE:
        return (
            f"{definition.ref} is published with fingerprint {published[:FINGERPRINT_SHOWN]}…, "
            f"this code is {definition.fingerprint[:FINGERPRINT_SHOWN]}…: publish a new version"
        )
    return (
        f"{definition.ref} is already published with other content; publish a new version instead"
    )


async def owns(store: Store, ref: DefinitionRef, team: str) -> bool:
    """Whether ``team`` published exactly ``ref`` (name, version and fingerprint)."""
    async with store.reading() as conn:
        return await _owns(conn, ref, team)


async def name_owner(store: Store, name: str) -> str | None:
    """The team that owns ``name`` (the first to publish it); None when unpublished."""
    async with store.reading() as conn:
        row = await (await conn.execute(sql.NAME_OWNER, {"name": name})).fetchone()
    return None if row is None else row[0]


async def _owns(conn: psycopg.AsyncConnection, ref: DefinitionRef, team: str) -> bool:
    params = {"name": ref.name, "version": ref.version, "fingerprint": ref.fingerprint}
    row = await (await conn.execute(sql.OWNED_VERSION, {**params, "team": team})).fetchone()
    return row is not None


async def _require_child(
    conn: psycopg.AsyncConnection, step: str, ref: DefinitionRef, team: str
) -> None:
    """Refuse a child pinned to a version this team did not publish. A child runs under
    its parent's team, so pinning another team's version would run that team's graph
    and targets; the message is the same whether the version is missing or another
    team's, so publishing cannot be used to learn what other teams have."""
    if not await _owns(conn, ref, team):
        raise ChildDefinitionNotFound(
            f"step {step} pins child definition {ref.name}@{ref.version} with fingerprint "
            f"{ref.fingerprint[:12]}, which is not published in this team; publish it first"
        )


async def versions(store: Store, team: str | None = None) -> list[PublishedVersion]:
    """Every published version (of one team, when given), grouped by name, oldest first."""
    async with store.reading() as conn:
        rows = await (await conn.execute(sql.ALL_VERSIONS, {"team": team})).fetchall()
    return [PublishedVersion(_load(spec), *rest) for spec, *rest in rows]


async def load_registry(store: Store) -> Registry:
    """A registry of every published version and every declared migration edge (what
    workers replay against)."""
    edges = [
        MigrationEdge(e.name, e.from_version, e.to_version, keep_input)
        for e in await migration_edges(store)
    ]
    return Registry((v.definition for v in await versions(store)), edges)


@dataclass(frozen=True)
class DeclaredEdge:
    """A migration edge an operator declared: who, why and when."""

    name: str
    from_version: str
    to_version: str
    declared_by: str
    reason: str
    declared_at: datetime


async def migration_edges(store: Store, name: str | None = None) -> list[DeclaredEdge]:
    """The declared edges (of one name, when given), oldest first."""
    async with store.reading() as conn:
        rows = await (await conn.execute(sql.EDGES, {"name": name})).fetchall()
    return [DeclaredEdge(*row) for row in rows]


async def declare_edge(
    store: Store, name: str, from_version: str, to_version: str, actor: str, reason: str
) -> bool:
    """Store an edge between two published versions (the caller checked they are);
    True when new, False when it was declared before (the first declaration stays)."""
    params = {
        "name": name,
        "from_version": from_version,
        "to_version": to_version,
        "actor": actor,
        "reason": reason,
    }

    async def body(conn: psycopg.AsyncConnection) -> tuple[Any, ...] | None:
        return await (await conn.execute(sql.DECLARE_EDGE, params)).fetchone()

    return await transact(store, f"declaring {name} {from_version}->{to_version}", body) is not None


async def resolve_for_start(store: Store, name: str, version: str | None) -> DefinitionRef:
    """The version to start: the given one (refused if deprecated) or the latest active.

    Only its reference is read: versions are immutable, so the caller takes the parsed
    definition from its registry (reloading that only for a version it has not seen).
    """
    async with store.reading() as conn:
        if version is None:
            row = await (await conn.execute(sql.LATEST_ACTIVE, {"name": name})).fetchone()
            if row is None:
                raise DefinitionNotFound(f"no active version of {name} is published")
            return DefinitionRef(name, *row)
        row = await (
            await conn.execute(sql.ONE_VERSION, {"name": name, "version": version})
        ).fetchone()
    if row is None:
        raise DefinitionNotFound(f"{name}@{version} is not published")
    if row[2]:
        raise DefinitionNotFound(f"{name}@{version} is deprecated and refuses new instances")
    return DefinitionRef(name, row[0], row[1])


async def deprecate(store: Store, name: str, version: str, actor: str = "") -> None:
    """Deprecate a version, recording who did and when (kept from the first time)."""

    async def body(conn: psycopg.AsyncConnection) -> tuple[Any, ...] | None:
        params = {"name": name, "version": version, "actor": actor}
        return await (await conn.execute(sql.DEPRECATE, params)).fetchone()

    if await transact(store, f"deprecating {name}@{version}", body) is None:
        raise DefinitionNotFound(f"{name}@{version} is not published")


def _load(spec: object) -> Definition:
    document = json.loads(spec) if isinstance(spec, str) else spec
    return parse_definition(document)
