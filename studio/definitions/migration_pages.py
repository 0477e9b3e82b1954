"""The migration forms of a version's page: declare an edge, preview, migrate.

Plain forms (post, then a page): the preview is a page of its own with the confirm
form (carrying the bulk id drawn with it), and migrating answers with the result of
each instance, kept with the bulk (its page is linked). See
``studio.definitions.migrations`` for what each step checks.
"""

from __future__ import annotations

from typing import Any

from litestar import Request, Response
from litestar.di import NamedDependency
from litestar.params import FromPath
from litestar.response import Template

from engine.api.queries import PublishedVersion
from engine.decide.migrations import reason_room
from engine.model.limits import MAX_REASON_LENGTH
from studio.definitions import migrations
from studio.definitions.pages import show_version
from studio.forms import REFUSALS, Posted, again, beside, posted
from studio.instances import code_migration
from studio.instances.interventions import new_id
from studio.principal import Principal
from studio.rendering import form_values, go_to, page
from studio.runtime import Runtime


def version_url(name: str, version: str) -> str:
    return f"/definitions/{name}/versions/{version}"


async def declare_edge(
    request: Request,
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    published_version: NamedDependency[PublishedVersion],
    name: FromPath[str],
    version: FromPath[str],
) -> Response:
    """Declare the edge; refused (no reason, an unknown source version), the version's
    page again with the reason beside that edge's form and what was typed in it."""
    values = await form_values(request)
    source = values.get("from_version", "")
    try:
        await migrations.declare(
            runtime,
            principal.team_id,
            principal.actor,
            name,
            version,
            source,
            values.get("reason", ""),
        )
    except REFUSALS as refused:
        shown = again(refused, values, f"edge-{source}")
        return await show_version(request, principal, runtime, published_version, **shown)
    return go_to(request, version_url(name, version) + "#migrate")


async def preview_migration(
    request: Request,
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    published_version: NamedDependency[PublishedVersion],
) -> Template:
    """What migrating the ticked instances would do; refused (none ticked, too many,
    one the report does not hold), the version's page again with them still ticked."""
    values = await posted(request)
    ids = await _ticked(request, principal, runtime, published_version, values)
    if isinstance(ids, Template):
        return ids
    return await _preview(request, principal, runtime, published_version, ids, values)


async def _ticked(
    request: Request,
    principal: Principal,
    runtime: Runtime,
    published: PublishedVersion,
    values: Posted,
) -> list[str] | Template:
    """The ticked instances (``migrations.chosen``), or, when they are refused (none,
    too many, one the report does not hold), the version's page again with them still
    ticked and the reason beside its migration form."""
    try:
        return await migrations.chosen(runtime, published, list(values.all("instance")))
    except REFUSALS as refused:
        shown = again(refused, values, "migrate")
        return await show_version(request, principal, runtime, published, **shown)


async def _preview(
    request: Request,
    principal: Principal,
    runtime: Runtime,
    published: PublishedVersion,
    ids: list[str],
    values: Posted,
    status: int = 200,
    **refusal: Any,
) -> Template:
    """The preview page with its confirm form (the reason typed kept when it was
    refused, and the bulk id it was drawn with, so a repeat still acts once; a code
    run refused for its code with the command that migrates it)."""
    found = await migrations.preview(runtime, published, ids)
    rooms = [reason_room(p.definition, published.definition.ref) for p in found.previews]
    return page(
        request,
        "definitions/migrate_preview.html",
        "definitions",
        status=status,
        published=published,
        found=found,
        reason_room=min(rooms, default=MAX_REASON_LENGTH),
        code_commands=await code_migration.for_previews(runtime, principal, found.previews),
        bulk_id=values.get("bulk_id") or new_id(),
        values=values,
        **refusal,
    )


async def migrate_instances(
    request: Request,
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    published_version: NamedDependency[PublishedVersion],
) -> Template:
    values = await posted(request)
    ids = await _ticked(request, principal, runtime, published_version, values)
    if isinstance(ids, Template):
        return ids
    bulk_id, reason = values.get("bulk_id"), values.get("reason")
    try:
        outcome = await migrations.migrate(
            runtime, principal, published_version, bulk_id, ids, reason
        )
    except REFUSALS as refused:  # the preview again, the refusal beside the reason typed
        shown = again(refused, values) | {"field_errors": beside(refused)}
        return await _preview(request, principal, runtime, published_version, ids, **shown)
    return page(
        request,
        "definitions/migrate_results.html",
        "definitions",
        published=published_version,
        outcome=outcome,
    )
