"""The migration forms of a version's page: declare an edge, preview, migrate.

Plain forms (post, then a page): the preview is a page of its own with the confirm
form (carrying the bulk id drawn with it), and migrating answers with the result of
each instance, kept with the bulk (its page is linked). See
``studio.definitions.migrations`` for what each step checks.
"""

from __future__ import annotations

from litestar import Request, Response
from litestar.di import NamedDependency
from litestar.params import FromPath
from litestar.response import Template

from engine.api.queries import PublishedVersion
from studio.definitions import migrations
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
    name: FromPath[str],
    version: FromPath[str],
) -> Response:
    values = await form_values(request)
    await migrations.declare(
        runtime,
        principal.team_id,
        principal.actor,
        name,
        version,
        values.get("from_version", ""),
        values.get("reason", ""),
    )
    return go_to(request, version_url(name, version) + "#migrate")


async def _chosen(request: Request, runtime: Runtime, published: PublishedVersion) -> list[str]:
    """The instances the form chose, checked against the version."""
    form = await request.form()
    ids = [v for v in form.getall("instance", []) if isinstance(v, str)]
    return await migrations.chosen(runtime, published, ids)


async def preview_migration(
    request: Request,
    runtime: NamedDependency[Runtime],
    published_version: NamedDependency[PublishedVersion],
) -> Template:
    ids = await _chosen(request, runtime, published_version)
    return page(
        request,
        "definitions/migrate_preview.html",
        "definitions",
        published=published_version,
        found=await migrations.preview(runtime, published_version, ids),
        bulk_id=new_id(),
    )


async def migrate_instances(
    request: Request,
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    published_version: NamedDependency[PublishedVersion],
) -> Template:
    ids = await _chosen(request, runtime, published_version)
    values = await form_values(request)
    bulk_id, reason = values.get("bulk_id", ""), values.get("reason", "")
    outcome = await migrations.migrate(runtime, principal, published_version, bulk_id, ids, reason)
    return page(
        request,
        "definitions/migrate_results.html",
        "definitions",
        published=published_version,
        outcome=outcome,
    )
