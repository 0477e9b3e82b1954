"""Rendering pages and fragments, and the small request helpers HTML routes share.

Every page gets the principal (for the navigation, the team switcher and for hiding
controls the role does not allow) and the session's CSRF token (for forms, and for
htmx, which sends it as a header on every request from ``<body hx-headers>``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jinja2 import Environment, pass_context
from jinja2.runtime import Context
from litestar import Request, Response
from litestar.plugins.jinja import JinjaTemplateEngine
from litestar.response import Redirect, Template
from litestar.template.config import TemplateConfig
from markupsafe import Markup

from engine.model.description import failure_message
from engine.model.identifiers import local_instance_id
from engine.model.transitions import work_label
from studio import read_lag
from studio.access import maybe_principal
from studio.definitions.graph import FITS_LABEL, MAX_MARKERS, shorten
from studio.definitions.service import short_fingerprint
from studio.errors import Invalid
from studio.formats import breakable, format_duration, format_when, when_markup
from studio.instance_urls import event_url, instance_ref, instance_url
from studio.machines.diagram import seconds_text
from studio.machines.views import size
from studio.trace_links import trace_link

STUDIO = Path(__file__).resolve().parent
FEATURES = (
    "instances",
    "definitions",
    "machines",
    "code",
    "operations",
    "drills",
    "plans",
    "accounts",
)
TEMPLATES = [STUDIO / "templates", *(STUDIO / feature / "templates" for feature in FEATURES)]
"""The shared layout and macros, then each feature's own folder of templates. A feature
keeps its templates under a folder of its name (``instances/templates/instances/``), so
a template's name (``instances/page.html``) says whose it is and names never clash."""
NAV = (
    ("definitions", "Definitions", "/definitions"),
    ("instances", "Instances", "/instances"),
    ("dead-letters", "Dead letters", "/dead-letters"),
    ("drills", "Drills", "/drills"),
    ("workers", "Workers", "/workers"),
    ("holds", "Holds", "/holds"),
    ("settings", "Settings", "/settings"),
)


def template_config() -> TemplateConfig:
    return TemplateConfig(
        directory=TEMPLATES, engine=JinjaTemplateEngine, engine_callback=_configure
    )


def _configure(engine: Any) -> None:
    env: Environment = engine.engine
    env.trim_blocks = True
    env.lstrip_blocks = True
    env.filters.update(
        short=short_fingerprint,
        when=when_markup,
        when_text=format_when,
        breakable=breakable,
        duration=format_duration,
        size=size,
        timer=seconds_text,
        pretty_json=lambda value: json.dumps(value, indent=2),
        shown=shown,
        verdict_pill=verdict_pill,
        ref=instance_ref,
        instance_url=team_instance_url,
        event_url=team_event_url,
        local_id=team_local_id,
    )
    env.globals.update(
        NAV=NAV,
        shorten=shorten,
        FITS_LABEL=FITS_LABEL,
        MAX_MARKERS=MAX_MARKERS,
        trace_link=_trace_link,
        failure_message=failure_message,
        work_label=work_label,
    )
    # Litestar's own ``csrf_token`` callable serves its CSRFConfig, which the studio does
    # not use (``studio.access`` checks the session's token). Under the same name as the
    # token every page gets, it filled a macro imported without context with the
    # function's repr, and forms posted natively were refused: without it, the name
    # means the session's token or nothing.
    env.globals.pop("csrf_token", None)


@pass_context
def team_instance_url(context: Context, instance_id: str, suffix: str = "") -> str:
    """The page of an instance named by its stored id: the URL carries the id the
    viewer's team knows it by (``engine.model.identifiers.local_instance_id``)."""
    return instance_url(team_local_id(context, instance_id), suffix)


@pass_context
def team_event_url(context: Context, instance_id: str, sequence: int) -> str:
    """Where event ``sequence`` of an instance named by its stored id is shown."""
    return event_url(team_local_id(context, instance_id), sequence)


@pass_context
def team_local_id(context: Context, instance_id: str) -> str:
    """A stored instance id as the viewer's team knows it (without the team's prefix)."""
    principal = context.get("principal")
    return local_instance_id(principal.team_id if principal else "", instance_id)


def verdict_pill(verdict: str) -> str:
    """The pill class of a drill verdict or run status: passed, failed (or error), other."""
    return {"passed": "ok", "failed": "error", "error": "error"}.get(verdict, "warn")


def shown(value: Any) -> str:
    """A field value in a diff: lists as names, objects as JSON, nothing as a dash."""
    if value is None:
        return "—"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) or "(none)"
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    return str(value)


def is_htmx(request: Request) -> bool:
    return request.headers.get("hx-request") == "true"


def page(
    request: Request, template: str, section: str = "", status: int = 200, **context: Any
) -> Template:
    """A full page (or a fragment for htmx) with the shared context: with it, a page
    read from a replica says how far behind it was (``studio.read_lag``)."""
    principal = maybe_principal(request)
    return Template(
        template_name=template,
        context={
            "principal": principal,
            "csrf_token": principal.csrf_token if principal else "",
            "section": section,
            "read_lag": request.scope.get("state", {}).get(read_lag.STATE_KEY),
            **context,
        },
        status_code=status,
    )


def fragment(request: Request, template: str, **context: Any) -> Markup:
    """A template rendered to HTML outside a response (live updates, page sections)."""
    principal = maybe_principal(request)
    environment: Environment = request.app.template_engine.engine
    html = environment.get_template(template).render(
        request=request,
        principal=principal,
        csrf_token=principal.csrf_token if principal else "",
        **context,
    )
    return Markup(html)


def see_other(url: str) -> Redirect:
    """Post/redirect/get: after a successful form post, show the result with a GET."""
    return Redirect(url, status_code=303)


def go_to(request: Request, url: str) -> Response:
    """After a post: htmx follows ``HX-Redirect``, a plain form a 303 redirect."""
    if is_htmx(request):
        return Response(content="", status_code=200, headers={"HX-Redirect": url})
    return see_other(url)


async def form_values(request: Request) -> dict[str, str]:
    """The posted form, first value of each field, as text."""
    form = await request.form()
    return {key: value for key, value in form.items() if isinstance(value, str)}


def int_field(values: dict[str, str], name: str) -> int:
    try:
        return int(values.get(name, ""))
    except ValueError:
        raise Invalid(f"the form field {name} must be a whole number") from None


@pass_context
def _trace_link(context: Context, state: Any) -> str:
    """``trace_link`` under the app's ``trace_url`` (``studio.trace_links``)."""
    return trace_link(context["request"].app.state.settings.trace_url, state)
