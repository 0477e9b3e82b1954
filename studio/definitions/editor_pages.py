"""The draft editor's routes: show a draft, and every edit the editor offers.

Each edit is a plain form post (so it works without JavaScript: post, then redirect
back to the draft) and, from htmx, answers with the re-rendered ``#workspace``
fragment: the edit is saved, the draft re-validated, the graph re-laid out, and
problems shown on their nodes and fields. Forms carry the draft revision they were
rendered from; a stale edit is refused with the latest draft shown (409).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from litestar import Request, Response
from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery
from litestar.response import Redirect, Template

from studio.definitions import draft_edits
from studio.definitions import drafts_service as drafts
from studio.definitions import service as definitions
from studio.definitions.draft_edits import Edited, EditRejected
from studio.definitions.drafts import Draft, DraftChanged
from studio.definitions.workspace import Selection, build_workspace
from studio.errors import Conflict, Invalid
from studio.operations import workers
from studio.principal import Principal
from studio.rendering import (
    form_values,
    go_to,
    int_field,
    is_htmx,
    page,
    see_other,
)
from studio.roles import Access
from studio.runtime import Runtime

WORKSPACE = "drafts/workspace.html"


def draft_url(draft_id: str, step: str = "", view: str = "") -> str:
    query = urlencode({k: v for k, v in (("step", step), ("view", view)) if v})
    return f"/drafts/{draft_id}" + (f"?{query}" if query else "")


async def _render(
    request: Request,
    principal: Principal,
    runtime: Runtime,
    draft: Draft,
    selection: Selection,
    *,
    view: str = "graph",
    status: int = 200,
    **extra: Any,
) -> Template:
    workspace = build_workspace(
        draft,
        editable=principal.can(Access.AUTHOR),
        targets=await workers.known_targets(runtime.queries),
        children=await definitions.child_choices(runtime, principal.team_id),
        selection=selection,
        view=view,
        **extra,
    )
    template = WORKSPACE if is_htmx(request) else "drafts/editor.html"
    return page(request, template, "definitions", status=status, ws=workspace)


def _optional_int(value: str | None) -> int | None:
    try:
        return int(value) if value not in (None, "") else None
    except ValueError:
        return None


async def show_draft(
    request: Request,
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    draft_id: FromPath[str],
    step: FromQuery[str | None] = None,
    insert: FromQuery[str | None] = None,
    branch: FromQuery[str | None] = None,
    view: FromQuery[str | None] = None,
) -> Template:
    draft = await drafts.get(runtime, principal.team_id, draft_id)
    selection = Selection(step or "", _optional_int(insert), _optional_int(branch))
    return await _render(request, principal, runtime, draft, selection, view=view or "graph")


async def create_draft(
    request: Request, principal: NamedDependency[Principal], runtime: NamedDependency[Runtime]
) -> Redirect:
    values = await form_values(request)
    name = values.get("name", "").strip()
    if not name:
        raise Invalid("give the new definition a name")
    draft = await drafts.create_empty(
        runtime, principal.team_id, principal.actor, name, values.get("version", "1")
    )
    return see_other(draft_url(draft.draft_id))


async def _apply(
    request: Request,
    principal: Principal,
    runtime: Runtime,
    draft_id: FromPath[str],
    values: dict[str, str],
    change: Callable[[dict[str, Any]], Edited],
) -> Template | Redirect:
    """Save one edit and answer with the editor (htmx) or a redirect to it (forms)."""
    view = values.get("view", "graph")
    try:
        revision = int_field(values, "revision")
        draft, selected = await drafts.edit(
            runtime, principal.team_id, principal.actor, draft_id, revision, change
        )
    except (DraftChanged, Invalid) as refused:
        current = await drafts.get(runtime, principal.team_id, draft_id)
        selection = Selection(values.get("selected", ""))
        status = 409 if isinstance(refused, DraftChanged) else 422
        return await _render(
            request,
            principal,
            runtime,
            current,
            selection,
            view=view,
            status=status,
            error=str(refused),
        )
    if not is_htmx(request):
        return see_other(draft_url(draft_id, selected, view if view != "graph" else ""))
    return await _render(request, principal, runtime, draft, Selection(selected), view=view)


async def insert_step(
    request: Request,
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    draft_id: FromPath[str],
) -> Template | Redirect:
    values = await form_values(request)
    at = int_field(values, "at")
    kind = values.get("kind", "")
    return await _apply(
        request,
        principal,
        runtime,
        draft_id,
        values,
        lambda d: draft_edits.insert_step(d, at, kind),
    )


async def add_branch(
    request: Request,
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    draft_id: FromPath[str],
) -> Template | Redirect:
    values = await form_values(request)
    owner = int_field(values, "index")
    kind = values.get("kind", "")
    return await _apply(
        request,
        principal,
        runtime,
        draft_id,
        values,
        lambda d: draft_edits.add_branch(d, owner, kind),
    )


async def update_step(
    request: Request,
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    draft_id: FromPath[str],
) -> Template | Redirect:
    values = await form_values(request)
    index = int_field(values, "index")
    pick = values.pop("child_definition.pick", "")
    if pick.count("@") == 2:  # a published version chosen from the list pins all three
        name, version, fingerprint = pick.split("@")
        values.update(
            {
                "child_definition.name": name,
                "child_definition.version": version,
                "child_definition.fingerprint": fingerprint,
                "target": name,
            }
        )
    return await _apply(
        request,
        principal,
        runtime,
        draft_id,
        values,
        lambda d: draft_edits.update_step(d, index, values),
    )


async def move_step(
    request: Request,
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    draft_id: FromPath[str],
) -> Template | Redirect:
    values = await form_values(request)
    index = int_field(values, "index")
    direction = -1 if values.get("direction") == "up" else 1
    return await _apply(
        request,
        principal,
        runtime,
        draft_id,
        values,
        lambda d: draft_edits.move_step(d, index, direction),
    )


async def delete_step(
    request: Request,
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    draft_id: FromPath[str],
) -> Template | Redirect:
    values = await form_values(request)
    index = int_field(values, "index")
    return await _apply(
        request, principal, runtime, draft_id, values, lambda d: draft_edits.delete_step(d, index)
    )


async def set_header(
    request: Request,
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    draft_id: FromPath[str],
) -> Template | Redirect:
    values = await form_values(request)
    name, version = values.get("name", ""), values.get("version", "")
    return await _apply(
        request,
        principal,
        runtime,
        draft_id,
        values,
        lambda d: draft_edits.set_header(d, name, version),
    )


async def replace_json(
    request: Request,
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    draft_id: FromPath[str],
) -> Template | Redirect:
    """Save the JSON view; text that is not a JSON object stays in the box with the error."""
    values = await form_values(request)
    text = values.get("document", "")
    try:
        document = draft_edits.parse_json(text)
    except EditRejected as rejected:
        current = await drafts.get(runtime, principal.team_id, draft_id)
        return await _render(
            request,
            principal,
            runtime,
            current,
            Selection(),
            view="json",
            status=422,
            json_text=text,
            json_error=str(rejected),
        )
    values["view"] = "json"
    return await _apply(request, principal, runtime, draft_id, values, lambda _: Edited(document))


async def publish_draft(
    request: Request,
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    draft_id: FromPath[str],
) -> Response | Template:
    """Publish; success goes to the new version's page (htmx follows HX-Redirect)."""
    try:
        outcome = await drafts.publish(runtime, principal.team_id, principal.actor, draft_id)
    except (Invalid, Conflict) as refused:
        current = await drafts.get(runtime, principal.team_id, draft_id)
        status = 409 if isinstance(refused, Conflict) else 422
        return await _render(
            request, principal, runtime, current, Selection(), status=status, error=str(refused)
        )
    definition = outcome.definition
    target = (
        f"/definitions/{definition.name}/versions/{definition.version}"
        f"?published={'new' if outcome.created else 'same'}"
    )
    return go_to(request, target)


async def discard_draft(
    request: Request,
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    draft_id: FromPath[str],
) -> Response | Redirect:
    await drafts.discard(runtime, principal.team_id, draft_id)
    return go_to(request, "/definitions")
