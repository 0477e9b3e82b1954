"""The draft editor's routes: show a draft, and every edit the editor offers.

Each edit is a plain form post (so it works without JavaScript: post, then redirect
back to the draft) and, from htmx, answers with the re-rendered ``#workspace``
fragment: the edit is saved, the draft re-validated, the graph re-laid out, and
problems shown on their nodes and fields. Forms carry the draft revision they were
rendered from; a stale edit is refused with the latest draft shown (409).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
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
from studio.definitions.drafts import Draft
from studio.definitions.workspace import Selection, build_workspace
from studio.drawings import drawing_of_document
from studio.errors import Conflict, Invalid
from studio.machines.authoring import build as machine_workspace
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
MACHINE_EDITOR = "machines/editor.html"
"""A machine draft's editor: plain forms, each edit a post and a redirect back."""


def draft_url(draft_id: str, step: str = "", view: str = "") -> str:
    query = urlencode({k: v for k, v in (("step", step), ("view", view)) if v})
    return f"/drafts/{draft_id}" + (f"?{query}" if query else "")


@dataclass(frozen=True)
class DraftEditor:
    """One request to the editor about one draft: who asks, through which runtime.

    Every editor route on a draft takes this one dependency (``editor``), which
    Litestar builds from the request, the principal, the runtime and the path's
    ``draft_id``; showing, saving an edit and answering are its methods.
    """

    request: Request
    principal: Principal
    runtime: Runtime
    draft_id: str

    async def draft(self) -> Draft:
        return await drafts.get(self.runtime, self.principal.team_id, self.draft_id)

    async def form(self) -> dict[str, str]:
        return await form_values(self.request)

    async def render(
        self,
        draft: Draft,
        selection: Selection,
        *,
        view: str = "graph",
        status: int = 200,
        compatible_required: bool = False,
        **extra: Any,
    ) -> Template:
        """The editor of ``draft`` (a machine's or a step list's); ``compatible_required``:
        the publish form's box comes back ticked (a publish refused with it ticked)."""
        principal, runtime = self.principal, self.runtime
        shown = {"status": status, "compatible_required": compatible_required}
        if drawing_of_document(draft.document).picture == "states":
            machine = machine_workspace(
                draft,
                selection.step,
                editable=principal.can(Access.AUTHOR),
                error=extra.get("error", ""),
            )
            return page(self.request, MACHINE_EDITOR, "definitions", mw=machine, **shown)
        marks = await drafts.published_as(runtime, principal.team_id, [draft])
        workspace = build_workspace(
            draft,
            published_as=marks.get(draft.draft_id, ""),
            editable=principal.can(Access.AUTHOR),
            targets=await workers.known_targets(runtime.queries),
            children=await definitions.child_choices(runtime, principal.team_id),
            selection=selection,
            view=view,
            **extra,
        )
        template = WORKSPACE if is_htmx(self.request) else "drafts/editor.html"
        return page(self.request, template, "definitions", ws=workspace, **shown)

    async def apply(
        self,
        values: dict[str, str],
        change: Callable[[dict[str, Any]], Edited],
        *,
        new_step: bool = False,
    ) -> Template | Redirect:
        """Save one edit and answer with the editor (htmx) or a redirect to it (forms).

        ``new_step``: the edit made a step, whose first field then takes the focus.
        """
        team, actor = self.principal.team_id, self.principal.actor
        return await self.answer(
            values,
            lambda revision: drafts.edit(
                self.runtime, team, actor, self.draft_id, revision, change
            ),
            new_step=new_step,
        )

    async def apply_fields(self, change: Callable[..., Edited], *names: str) -> Template | Redirect:
        """Save ``change(document, *fields)``, ``fields`` being the form's text fields
        ``names`` in that order ('' where one is missing): the edits that take only those."""
        values = await self.form()
        fields = [values.get(name, "") for name in names]
        return await self.apply(values, lambda d: change(d, *fields))

    async def answer(
        self,
        values: dict[str, str],
        save: Callable[[int], Awaitable[tuple[Draft, str]]],
        *,
        new_step: bool = False,
    ) -> Template | Redirect:
        """Run ``save`` on the form's revision; answer with the saved draft, or with the
        latest one and why nothing was saved (a refused field is shown at the field)."""
        view = values.get("view", "graph")
        try:
            draft, selected = await save(int_field(values, "revision"))
        except (Conflict, Invalid) as refused:
            selection = Selection(values.get("selected", ""))
            status = 409 if isinstance(refused, Conflict) else 422
            current = await self.draft()
            located = refused.problems if isinstance(refused, Invalid) else []
            if located:  # shown beside the field, with what was typed in it
                return await self.render(
                    current, selection, view=view, status=status, refused=located, typed=values
                )
            return await self.render(
                current, selection, view=view, status=status, error=str(refused)
            )
        address = draft_url(self.draft_id, selected, view if view != "graph" else "")
        if not is_htmx(self.request):
            return see_other(address)
        shown = await self.render(draft, Selection(selected), view=view, focus_first_field=new_step)
        shown.headers["HX-Replace-Url"] = address  # a reload shows what the edit showed
        return shown


def draft_editor(
    request: Request,
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    draft_id: FromPath[str],
) -> DraftEditor:
    """The ``editor`` dependency of the routes on one draft."""
    return DraftEditor(request, principal, runtime, draft_id)


def _optional_int(value: str | None) -> int | None:
    try:
        return int(value) if value not in (None, "") else None
    except ValueError:
        return None


def _step_at(values: dict[str, str]) -> Callable[[dict[str, Any]], int]:
    """Where, in the document an edit is applied to, the step the form named is (a step
    form also names the step by the name it sets: see ``locate_step``)."""
    index, name = int_field(values, "index"), values.get("index_name")
    renamed_to = values.get("name", "").strip() or None
    return lambda document: draft_edits.locate_step(document, index, name, renamed_to)


async def show_draft(
    editor: NamedDependency[DraftEditor],
    step: FromQuery[str | None] = None,
    insert: FromQuery[str | None] = None,
    branch: FromQuery[str | None] = None,
    view: FromQuery[str | None] = None,
) -> Template:
    selection = Selection(step or "", _optional_int(insert), _optional_int(branch))
    return await editor.render(await editor.draft(), selection, view=view or "graph")


async def insert_step(editor: NamedDependency[DraftEditor]) -> Template | Redirect:
    values = await editor.form()
    at = int_field(values, "at")
    kind = values.get("kind", "")
    return await editor.apply(values, lambda d: draft_edits.insert_step(d, at, kind), new_step=True)


async def add_branch(editor: NamedDependency[DraftEditor]) -> Template | Redirect:
    values = await editor.form()
    owner = _step_at(values)
    kind = values.get("kind", "")
    return await editor.apply(
        values, lambda d: draft_edits.add_branch(d, owner(d), kind), new_step=True
    )


async def update_step(editor: NamedDependency[DraftEditor]) -> Template | Redirect:
    values = await editor.form()
    index = _step_at(values)
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
    return await editor.apply(values, lambda d: draft_edits.update_step(d, index(d), values))


async def move_step(editor: NamedDependency[DraftEditor]) -> Template | Redirect:
    values = await editor.form()
    index = _step_at(values)
    direction = -1 if values.get("direction") == "up" else 1
    return await editor.apply(values, lambda d: draft_edits.move_step(d, index(d), direction))


async def delete_step(editor: NamedDependency[DraftEditor]) -> Template | Redirect:
    values = await editor.form()
    index = _step_at(values)
    return await editor.apply(values, lambda d: draft_edits.delete_step(d, index(d)))


async def set_header(editor: NamedDependency[DraftEditor]) -> Template | Redirect:
    return await editor.apply_fields(draft_edits.set_header, "name", "version")


async def replace_json(editor: NamedDependency[DraftEditor]) -> Template | Redirect:
    """Save the JSON view; text that is not a JSON object stays in the box with the error."""
    values = await editor.form()
    text = values.get("document", "")
    try:
        document = draft_edits.parse_json(text)
    except EditRejected as rejected:
        return await editor.render(
            await editor.draft(),
            Selection(),
            view="json",
            status=422,
            json_text=text,
            json_error=str(rejected),
        )
    values["view"] = "json"
    return await editor.apply(values, lambda _: Edited(document))


async def undo_edit(editor: NamedDependency[DraftEditor]) -> Template | Redirect:
    return await _step_back(editor, "undo")


async def redo_edit(editor: NamedDependency[DraftEditor]) -> Template | Redirect:
    return await _step_back(editor, "redo")


async def _step_back(editor: DraftEditor, way: str) -> Template | Redirect:
    """Bring back the document before the last edit (undo) or the one undone (redo)."""
    values = await editor.form()
    team, actor = editor.principal.team_id, editor.principal.actor
    selected = values.get("selected", "")

    async def save(revision: int) -> tuple[Draft, str]:
        draft = await drafts.step_back(editor.runtime, team, actor, editor.draft_id, way, revision)
        return draft, selected

    return await editor.answer(values, save)


async def new_version(editor: NamedDependency[DraftEditor]) -> Template | Redirect:
    """Number a published draft's content as the next version, in one click."""
    values = await editor.form()
    team, actor = editor.principal.team_id, editor.principal.actor
    return await editor.answer(
        values,
        lambda revision: drafts.new_version(editor.runtime, team, actor, editor.draft_id, revision),
    )


async def publish_draft(editor: NamedDependency[DraftEditor]) -> Response | Template:
    """Publish; success goes to the new version's page (htmx follows HX-Redirect)."""
    principal = editor.principal
    required = bool((await editor.form()).get("require_compatible"))
    try:
        outcome = await drafts.publish(
            editor.runtime, principal.team_id, principal.actor, editor.draft_id, required
        )
    except (Invalid, Conflict) as refused:
        status = 409 if isinstance(refused, Conflict) else 422
        return await editor.render(
            await editor.draft(),
            Selection(),
            status=status,
            error=str(refused),
            compatible_required=required,
        )
    return go_to(editor.request, outcome.page)


async def discard_draft(editor: NamedDependency[DraftEditor]) -> Response | Redirect:
    await drafts.discard(editor.runtime, editor.principal.team_id, editor.draft_id)
    return go_to(editor.request, "/definitions")
