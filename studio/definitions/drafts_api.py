"""``/api/drafts``: the same drafts and edits as the editor, for scripts."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Response
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody

from engine.model.words import with_article
from studio import api_examples as examples
from studio.definitions import draft_edits
from studio.definitions import drafts_service as drafts
from studio.definitions.draft_edits import Edited
from studio.definitions.schemas import (
    CompatibilityIn,
    DraftEditIn,
    DraftIn,
    DraftOut,
    DraftReplaceIn,
    PublishOut,
    draft_out,
    published,
)
from studio.errors import Invalid
from studio.operations import workers
from studio.principal import Principal
from studio.runtime import Runtime


async def _out(runtime: Runtime, draft: Any) -> DraftOut:
    return draft_out(draft, await workers.known_targets(runtime.queries))


async def list_drafts(
    principal: NamedDependency[Principal], runtime: NamedDependency[Runtime]
) -> list[DraftOut]:
    found = await drafts.list_for_team(runtime, principal.team_id)
    targets = await workers.known_targets(runtime.queries)
    return [draft_out(d, targets) for d in found]


async def create_draft(
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    data: JSONBody[DraftIn],
) -> DraftOut:
    if data.document is not None:
        draft = await drafts.create_from_document(
            runtime, principal.team_id, principal.actor, data.document
        )
    elif data.from_name and data.from_version:
        draft = await drafts.create_from_version(
            runtime, principal.team_id, principal.actor, data.from_name, data.from_version
        )
    else:
        raise Invalid("give a document, or from_name and from_version")
    return await _out(runtime, draft)


async def get_draft(
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    draft_id: FromPath[str],
) -> DraftOut:
    return await _out(runtime, await drafts.get(runtime, principal.team_id, draft_id))


async def replace_draft(
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    draft_id: FromPath[str],
    data: JSONBody[DraftReplaceIn],
) -> DraftOut:
    draft = await drafts.replace(
        runtime,
        principal.team_id,
        principal.actor,
        draft_id,
        data.revision,
        data.document,
    )
    return await _out(runtime, draft)


def _edit(data: DraftEditIn) -> Any:
    """The pure edit an API operation stands for; Invalid when an argument is missing."""

    def need(value: Any, what: str) -> Any:
        if value is None:
            raise Invalid(f"the {data.op} operation needs {what}")
        return value

    def change(document: dict[str, Any]) -> Edited:
        if data.op == "insert":
            return draft_edits.insert_step(document, need(data.at, "at"), need(data.kind, "kind"))
        index = need(data.index, "index") if data.op != "header" else 0
        if data.op == "branch":
            return draft_edits.add_branch(document, index, data.kind or "")
        if data.op == "move":
            direction = need(data.direction, "direction")
            return draft_edits.move_step(document, index, -1 if direction == "up" else 1)
        if data.op == "delete":
            return draft_edits.delete_step(document, index)
        if data.op == "update":
            return _update(document, index, need(data.fields, "fields"))
        if data.name is None and data.version is None:
            raise Invalid("the header operation needs name, version or both")
        name, version = _kept(document, "name", data.name), _kept(document, "version", data.version)
        return draft_edits.set_header(document, name, version)

    return change


def _kept(document: dict[str, Any], key: str, value: str | None) -> str:
    """``value``, or the document's own when the request left it out: a header edit
    that names only the version keeps the name (it used to clear it)."""
    if value is not None:
        return value
    kept = document.get(key)
    return kept if isinstance(kept, str) else ""


def _update(document: dict[str, Any], index: int, fields: dict[str, str]) -> Edited:
    """The step's fields set, refusing a key its kind does not have: such a key was
    ignored, and the edit answered as done."""
    kind, paths = draft_edits.step_paths(document, index)
    if unknown := sorted(set(fields) - paths):
        message = f"not a field of {with_article(kind)} step; it takes {', '.join(sorted(paths))}"
        problems = [{"path": f"fields.{key}", "message": message} for key in unknown]
        raise Invalid(f"{', '.join(unknown)}: {message}", problems)
    return draft_edits.update_step(document, index, fields)


async def edit_draft(
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    draft_id: FromPath[str],
    data: Annotated[DraftEditIn, examples.DRAFT_EDIT],
) -> DraftOut:
    draft, _ = await drafts.edit(
        runtime,
        principal.team_id,
        principal.actor,
        draft_id,
        data.revision,
        _edit(data),
    )
    return await _out(runtime, draft)


async def publish_draft(
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    draft_id: FromPath[str],
    data: JSONBody[CompatibilityIn | None] = None,
) -> Response[PublishOut]:
    """Publish the draft's content as ``POST /api/definitions`` publishes a document
    (the body is optional: ``{"compatibility": "require"}`` refuses, 409, a version a
    running instance of another version could not move to)."""
    require = data is not None and data.require_compatible
    outcome = await drafts.publish(runtime, principal.team_id, principal.actor, draft_id, require)
    return published(outcome)


async def delete_draft(
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    draft_id: FromPath[str],
) -> None:
    await drafts.discard(runtime, principal.team_id, draft_id)
