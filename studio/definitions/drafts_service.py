"""Drafts of a team: create (empty, from a version, from imported JSON), edit, publish.

Every edit is made against the revision the editor showed; a stale one is refused and
the editor shows the latest draft instead. Edits never validate on their way in (the
validator runs when the draft is shown), except that the JSON view must hold a JSON
object.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from engine.model.definitions import Mode, definition_to_json
from engine.model.errors import DefinitionInvalid
from engine.model.validation import parse_definition
from studio.definitions import drafts
from studio.definitions import service as definitions
from studio.definitions.draft_edits import (
    Edited,
    EditRejected,
    FieldRejected,
    new_document,
    next_version,
    set_header,
)
from studio.definitions.drafts import Draft, DraftChanged
from studio.definitions.problems import FROM_ITS_CODE
from studio.definitions.service import PublishOutcome
from studio.errors import Invalid
from studio.runtime import Runtime


async def create_empty(runtime: Runtime, team: str, actor: str, name: str, version: str) -> Draft:
    document = new_document(name.strip(), version.strip() or "1")
    return await drafts.create_draft(runtime.store, team, document, "", actor)


async def create_from_document(
    runtime: Runtime, team: str, actor: str, document: dict[str, Any], based_on: str = ""
) -> Draft:
    return await drafts.create_draft(runtime.store, team, document, based_on, actor)


async def create_from_version(
    runtime: Runtime, team: str, actor: str, name: str, version: str
) -> Draft:
    """A draft of the next version, starting from the content of ``name@version``."""
    published = await definitions.version_of(runtime, team, name, version)
    if published.definition.mode is Mode.CODE:
        raise Invalid(f"{name}@{version} is not drafted here: {FROM_ITS_CODE}")
    taken = {v.definition.version for v in await definitions.versions_of(runtime, team, name)}
    document = definition_to_json(published.definition)
    document["version"] = next_version(version, taken)
    document["deprecated"] = False
    return await drafts.create_draft(runtime.store, team, document, f"{name}@{version}", actor)


async def get(runtime: Runtime, team: str, draft_id: str) -> Draft:
    return await drafts.get_draft(runtime.store, team, draft_id)


async def list_for_team(runtime: Runtime, team: str) -> list[Draft]:
    return await drafts.list_drafts(runtime.store, team)


def twin_titles(found: list[Draft]) -> set[str]:
    """The ``name@version`` titles more than one of ``found`` has: the list tells those
    drafts apart by id, start and author, so nobody edits or publishes the wrong one."""
    seen = Counter(d.title for d in found)
    return {title for title, count in seen.items() if count > 1}


async def published_as(runtime: Runtime, team: str, found: list[Draft]) -> dict[str, str]:
    """Draft id -> ``name@version`` for each draft whose content is that published
    version: a draft stays after publishing, and this tells it from unpublished work."""
    published = {v.definition.ref for v in await definitions.team_versions(runtime, team)}
    marks = {}
    for draft in found:
        try:
            ref = parse_definition(draft.document).ref
        except DefinitionInvalid:
            continue
        if ref in published:
            marks[draft.draft_id] = f"{ref.name}@{ref.version}"
    return marks


async def new_version(
    runtime: Runtime, team: str, actor: str, draft_id: str, revision: int
) -> tuple[Draft, str]:
    """Number the draft one version higher than every published version of its name."""
    draft = await drafts.get_draft(runtime.store, team, draft_id)
    name, version = draft.document.get("name"), draft.document.get("version")
    if not isinstance(name, str) or not isinstance(version, str):
        raise Invalid("give the draft a name and a version first")
    taken = {v.definition.version for v in await definitions.versions_of(runtime, team, name)}
    bumped = next_version(version, taken)
    return await edit(
        runtime, team, actor, draft_id, revision, lambda d: set_header(d, name, bumped)
    )


async def edit(
    runtime: Runtime,
    team: str,
    actor: str,
    draft_id: str,
    revision: int,
    change: Callable[[dict[str, Any]], Edited],
) -> tuple[Draft, str]:
    """Apply ``change`` to the draft as of ``revision``; returns it and the step to select."""
    draft = await drafts.get_draft(runtime.store, team, draft_id)
    if draft.revision != revision:
        raise DraftChanged(revision, draft.revision)
    try:
        edited = change(draft.document)
    except FieldRejected as rejected:
        where = f"steps[{rejected.index}].{rejected.field}"
        raise Invalid(str(rejected), [{"path": where, "message": str(rejected)}]) from None
    except EditRejected as rejected:
        raise Invalid(str(rejected)) from None
    saved = await drafts.save_draft(runtime.store, team, draft_id, edited.document, revision, actor)
    return saved, edited.selected


async def step_back(
    runtime: Runtime, team: str, actor: str, draft_id: str, way: str, revision: int
) -> Draft:
    """Undo (``way`` 'undo') or redo the draft's last edit, as of ``revision``."""
    return await drafts.step_back(runtime.store, team, draft_id, way, revision, actor)


async def replace(
    runtime: Runtime, team: str, actor: str, draft_id: str, revision: int, document: dict[str, Any]
) -> Draft:
    saved, _ = await edit(runtime, team, actor, draft_id, revision, lambda _: Edited(document))
    return saved


async def publish(
    runtime: Runtime, team: str, actor: str, draft_id: str, require_compatible: bool = False
) -> PublishOutcome:
    """Publish the draft's content; the draft stays (editable) for the next version."""
    draft = await drafts.get_draft(runtime.store, team, draft_id)
    return await definitions.publish(runtime, team, actor, draft.document, require_compatible)


async def discard(runtime: Runtime, team: str, draft_id: str) -> None:
    await drafts.delete_draft(runtime.store, team, draft_id)
