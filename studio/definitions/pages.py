"""Definition pages: the list, a name's versions with a diff, one version, export, import.

Published versions never change; what these pages do to them is deprecate one, export
it, or start a new draft from it. Import reads JSON (pasted or uploaded), validates it
and shows a preview (graph and problems) before it is saved as a draft or published.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from litestar import Request, Response
from litestar.datastructures import UploadFile
from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery
from litestar.response import Redirect, Template

from engine.api.queries import PublishedVersion
from engine.model.identifiers import name_problem
from studio.definitions import draft_edits, migrations
from studio.definitions import drafts_service as drafts
from studio.definitions import service as definitions
from studio.definitions.draft_edits import EditRejected
from studio.definitions.editor_pages import draft_url
from studio.definitions.graph import node_classes
from studio.definitions.problems import check_document
from studio.drawings import drawing_of_document
from studio.errors import Invalid
from studio.formats import attachment
from studio.forms import REFUSALS, posted, shown
from studio.instances import code_migration
from studio.machines.edits import new_machine
from studio.machines.views import machine_view
from studio.operations import holds, workers
from studio.principal import Principal
from studio.rendering import form_values, go_to, page, see_other
from studio.runtime import Runtime

PUBLISHED_NOTICES = {
    "new": "Published. This version is now immutable.",
    "same": "Identical content was already published as this version; nothing changed.",
}
MAX_UPLOAD_BYTES = draft_edits.MAX_DOCUMENT_CHARS
"""The largest definition file the import form reads (a pasted document has as many
characters at most)."""
UPLOAD_TOO_LARGE = (
    f"the chosen file is larger than the {MAX_UPLOAD_BYTES:,} bytes a definition file "
    "may have; choose a smaller file"
)


def graph_view(document: Any, marks: dict[str, str] | None = None) -> dict[str, Any]:
    """What the read-only picture macro needs for a document, drawn by its mode;
    ``marks`` (a diff's) says which steps, or states and edges, changed."""
    drawing = drawing_of_document(document)
    if drawing.picture == "states":
        return machine_view(document, marks)
    return {
        "picture": drawing.picture,
        "graph": drawing.layout(document),
        "structure": drawing.structure(document),
        "classes": lambda node: node_classes(node, None, marks),
    }


async def list_page(
    request: Request, principal: NamedDependency[Principal], runtime: NamedDependency[Runtime]
) -> Template:
    return await _list(request, principal, runtime)


async def _list(
    request: Request,
    principal: Principal,
    runtime: Runtime,
    refused: NewDraftRefused | None = None,
) -> Template:
    """The list; with ``refused``, answered to a refused *New definition* form, which
    comes back open with what was typed and the reason beside its field (422)."""
    found = await drafts.list_for_team(runtime, principal.team_id)
    return page(
        request,
        "definitions/list.html",
        "definitions",
        status=422 if refused else 200,
        summaries=await definitions.summaries(runtime, principal.team_id),
        drafts=found,
        twins=drafts.twin_titles(found),
        published=await drafts.published_as(runtime, principal.team_id, found),
        new_draft=refused,
    )


@dataclass(frozen=True)
class NewDraftRefused:
    """Why the *New definition* form was refused: the field at fault, the reason and
    the form's values as typed."""

    field: str
    message: str
    typed: dict[str, str]


def _new_draft_problem(name: str, version: str) -> tuple[str, str] | None:
    """The field a new draft's name and version would be refused for, and why: what
    publishing would refuse, said at once (before a draft with a 100 KB name widens
    every page that lists it)."""
    if not name:
        return "name", "give the new definition a name"
    for field, given in (("name", name), ("version", version)):
        if problem := name_problem(given):
            return field, f"the definition {field} {problem}"
    return None


async def create_draft(
    request: Request, principal: NamedDependency[Principal], runtime: NamedDependency[Runtime]
) -> Template | Redirect:
    values = await form_values(request)
    name = values.get("name", "").strip()
    version = values.get("version", "").strip() or "1"
    if problem := _new_draft_problem(name, version):
        field, message = problem
        return await _list(request, principal, runtime, NewDraftRefused(field, message, values))
    if values.get("kind") == "machine":
        document = new_machine(name, version)
        draft = await drafts.create_from_document(
            runtime, principal.team_id, principal.actor, document
        )
    else:
        draft = await drafts.create_empty(
            runtime, principal.team_id, principal.actor, name, version
        )
    return see_other(draft_url(draft.draft_id))


async def versions_page(
    request: Request,
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    name: FromPath[str],
    left: FromQuery[str | None] = None,
    right: FromQuery[str | None] = None,
) -> Template:
    versions = await definitions.versions_of(runtime, principal.team_id, name)
    comparison = await definitions.compare(runtime, principal.team_id, name, left, right)
    views = {}
    if comparison is not None:
        views = {
            "left": graph_view(
                definitions.export_document(comparison.left), comparison.diff.marks("left")
            ),
            "right": graph_view(
                definitions.export_document(comparison.right), comparison.diff.marks("right")
            ),
        }
    return page(
        request,
        "definitions/versions.html",
        "definitions",
        name=name,
        versions=list(reversed(versions)),
        comparison=comparison,
        views=views,
        latest_view=graph_view(definitions.export_document(versions[-1])),
        holds_shown=await holds.banner(runtime, principal.team_id, name),
    )


async def version_page(
    request: Request,
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    published_version: NamedDependency[PublishedVersion],
    published: FromQuery[str | None] = None,
) -> Template:
    notice = PUBLISHED_NOTICES.get(published or "", "")
    return await show_version(request, principal, runtime, published_version, notice=notice)


async def show_version(
    request: Request,
    principal: Principal,
    runtime: Runtime,
    published_version: PublishedVersion,
    status: int = 200,
    **extra: Any,
) -> Template:
    """A version's page; with ``extra`` from ``forms.again``, its migration form shown
    again after it was refused (the instances ticked still ticked)."""
    definition = published_version.definition
    document = definitions.export_document(published_version)
    compatibility = await definitions.compatibility_of(runtime, published_version)
    verdicts = compatibility.report.verdicts if compatibility else ()
    sources = {v.from_version for v in verdicts}
    edges = await migrations.edge_choices(runtime, published_version, sources)
    declared = {e.from_version for e in edges if e.edge}
    return page(
        request,
        "definitions/version.html",
        "definitions",
        status=status,
        published=published_version,
        document=document,
        view=graph_view(document),
        compatibility=compatibility,
        edges=edges,
        code_commands=code_migration.for_report(runtime, principal, definition, verdicts, declared),
        max_migrations=migrations.MAX_MIGRATIONS_PER_REQUEST,
        holds_shown=await holds.banner(
            runtime, principal.team_id, definition.name, definition.version
        ),
        **shown({"notice": "", **extra}),
    )


async def export_version(published_version: NamedDependency[PublishedVersion]) -> Response:
    body = json.dumps(definitions.export_document(published_version), indent=2) + "\n"
    filename = f"{published_version.definition.ref}.json"
    return Response(
        content=body,
        media_type="application/json",
        headers={"Content-Disposition": attachment(filename)},
    )


async def draft_from_version(
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    name: FromPath[str],
    version: FromPath[str],
) -> Redirect:
    draft = await drafts.create_from_version(
        runtime, principal.team_id, principal.actor, name, version
    )
    return see_other(draft_url(draft.draft_id))


async def deprecate_version(
    request: Request,
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    name: FromPath[str],
    version: FromPath[str],
) -> Response:
    await definitions.deprecate(runtime, principal.team_id, principal.actor, name, version)
    return go_to(request, f"/definitions/{name}")


async def import_page(request: Request) -> Template:
    return import_form(request)


def import_form(
    request: Request,
    text: str = "",
    preview: Any = None,
    status: int = 200,
    error: str = "",
    compatible_required: bool = False,
) -> Template:
    """The import page: the form (with the largest file it takes, which the browser
    checks as a file is chosen: a file over the studio's own body limit never reaches
    the server's check) and, once previewed, the preview (``compatible_required``: its
    publish box ticked again, after a refusal it was ticked for)."""
    return page(
        request,
        "definitions/import.html",
        "definitions",
        status=status,
        text=text,
        preview=preview,
        error=error,
        compatible_required=compatible_required,
        max_upload=MAX_UPLOAD_BYTES,
        upload_too_large=UPLOAD_TOO_LARGE,
    )


async def _posted_document_text(request: Request) -> tuple[str, dict[str, str]]:
    """The JSON text from the upload (when a file was chosen) or the text box."""
    form = await request.form()
    values = {k: v for k, v in form.items() if isinstance(v, str)}
    upload = form.get("file")
    if isinstance(upload, UploadFile) and upload.filename:
        data = await upload.read(MAX_UPLOAD_BYTES + 1)
        if len(data) > MAX_UPLOAD_BYTES:
            raise Invalid(UPLOAD_TOO_LARGE)
        return data.decode("utf-8", errors="replace"), values
    return values.get("document", ""), values


async def import_preview(
    request: Request, principal: NamedDependency[Principal], runtime: NamedDependency[Runtime]
) -> Template:
    """The preview of the chosen file or the pasted JSON; refused (a file too large, or
    text that is not a JSON object), the form again with the reason and the text kept.
    A valid definition whose name another team owns is said to be taken, not valid."""
    try:
        text, _ = await _posted_document_text(request)
    except REFUSALS as refused:
        pasted = (await posted(request)).get("document")
        return _import_refused(request, pasted, None, refused, refused.status)
    try:
        document = draft_edits.parse_json(text)
    except EditRejected as rejected:
        return _import_refused(request, text, None, rejected, 422)
    targets = await workers.known_targets(runtime.queries)
    problems = check_document(document, targets)
    taken = problems.definition is not None and await definitions.name_taken(
        runtime, principal.team_id, problems.definition.name
    )
    preview = {"problems": problems, "view": graph_view(document), "taken": taken}
    return import_form(request, json.dumps(document, indent=2), preview)


async def import_save(
    request: Request, principal: NamedDependency[Principal], runtime: NamedDependency[Runtime]
) -> Template | Redirect:
    """Save the previewed JSON as a draft, or publish it (valid content only)."""
    values = await form_values(request)
    text = values.get("document", "")
    try:
        document = draft_edits.parse_json(text)
    except EditRejected as rejected:
        return _import_refused(request, text, None, rejected, 422)
    if values.get("action") != "publish":
        draft = await drafts.create_from_document(
            runtime, principal.team_id, principal.actor, document, "import"
        )
        return see_other(draft_url(draft.draft_id))
    required = bool(values.get("require_compatible"))
    try:
        outcome = await definitions.publish(
            runtime, principal.team_id, principal.actor, document, required
        )
    except REFUSALS as refused:
        return _import_refused(request, text, document, refused, refused.status, required)
    return see_other(outcome.page)


def _import_refused(
    request: Request,
    text: str,
    document: Any,
    error: Exception,
    status: int,
    compatible_required: bool = False,
) -> Template:
    """The import page again, with the reason and (for a readable document) its preview."""
    preview = None
    if document is not None:
        preview = {"problems": check_document(document), "view": graph_view(document)}
    return import_form(request, text, preview, status, str(error), compatible_required)
