"""The route table: every route of the studio, with the access it requires.

This is the one place that says who may call what. The app builds its route handlers
from it, the access guard reads each route's rule from it, and a test walks it to try
every route with every role, so a route cannot exist without a rule. Access levels are
explained in ``studio.roles``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from litestar import Response
from litestar.handlers import HTTPRouteHandler
from litestar.openapi.datastructures import ResponseSpec

from studio import api_responses, observability
from studio.access import SAFE_METHODS, enforce_access
from studio.accounts import api as api_people
from studio.accounts import settings_pages as settings
from studio.accounts import signin_pages as signin
from studio.definitions import api as api_definitions
from studio.definitions import drafts_api as api_drafts
from studio.definitions import editor_pages as editor
from studio.definitions import migration_pages
from studio.definitions import pages as definitions
from studio.drills import api as api_drills
from studio.drills import pages as drills
from studio.instances import api as api_instances
from studio.instances import bulk_api as api_bulk
from studio.instances import bulk_pages as bulk_actions
from studio.instances import intervention_pages as interventions
from studio.instances import live_pages as instance_live
from studio.instances import pages as instances
from studio.instances.schemas import JOINED
from studio.machines import api as api_machines
from studio.machines import pages as machine_editor
from studio.machines.schemas import RESUBMITTED
from studio.operations import dead_letter_pages as dead_letters
from studio.operations import dead_letters_api as api_dead_letters
from studio.operations import hold_pages as holds
from studio.operations import holds_api as api_holds
from studio.operations import worker_pages as workers
from studio.operations import workers_api as api_workers
from studio.plans import api as api_plans
from studio.plans import pages as plans
from studio.plans import run_pages as plan_runs
from studio.roles import Access

P, S, V, A, ADM = Access.PUBLIC, Access.SIGNED_IN, Access.VIEWER, Access.AUTHOR, Access.ADMIN
OP = Access.OPERATOR
PROBE = Access.PROBE
NOT_FOUND, CONFLICT, INVALID = 404, 409, 422
REPUBLISHED = api_responses.REPUBLISHED
DRAFT = "/drafts/{draft_id:str}"
VERSION = "/definitions/{name:str}/versions/{version:str}"
INSTANCE = "/instances/{ref:str}"
"""``ref`` is the instance id with each ``/`` written as ``~`` (``studio.instance_urls``)."""
RUN = "/drills/runs/{run_id:str}"
PLANS = VERSION + "/plans"
PLAN = PLANS + "/{plan:str}"
PLAN_VERSION = PLAN + "/versions/{number:str}"
API_PLANS = "/api" + PLANS
API_PLAN = "/api" + PLAN
API_PLAN_VERSION = "/api" + PLAN_VERSION
HOLD = "/holds/{hold_id:str}"
API_VERSION = "/api" + VERSION
API_DRAFT = "/api" + DRAFT
API_INSTANCE = "/api" + INSTANCE
EXECUTIONS = "/api/machines/{name:str}/executions"
EXECUTION = EXECUTIONS + "/{ref:str}"
"""``ref`` is the execution id with each ``/`` written as ``~``, as for instances."""


@dataclass(frozen=True)
class Route:
    """One row of the table: who may call ``method path`` and, for the JSON API, which
    answers its OpenAPI document lists (so the document cannot drift from the guard)."""

    method: str
    path: str
    handler: Callable[..., Any]
    access: Access
    status: int | None = None
    errors: tuple[int, ...] = ()
    """Error statuses the service behind an API route answers on its own (404, 409, 422);
    the others follow from the route itself (``error_statuses``)."""
    also: Mapping[int, ResponseSpec] | None = field(default=None, compare=False)
    """Other successful answers than ``status`` (publishing identical content: 200)."""

    @property
    def is_api(self) -> bool:
        return self.path.startswith("/api/")

    @property
    def error_statuses(self) -> frozenset[int]:
        """Every error status the route can answer, as ``studio.api_responses`` explains."""
        found = {400, *self.errors}
        if not self.access.open:
            found.update((401, 503))
        if self.access is not Access.SIGNED_IN or self.method not in SAFE_METHODS:
            found.add(403)
        if "{" in self.path:
            found.add(404)
        if "data" in inspect.signature(self.handler).parameters:
            found.add(413)
        return frozenset(found)

    def responses(self) -> dict[int, ResponseSpec] | None:
        """The OpenAPI responses besides the handler's own success (API routes only)."""
        if not self.is_api:
            return None
        return {**api_responses.error_responses(self.error_statuses), **(self.also or {})}


ROUTES: tuple[Route, ...] = (
    # Signing in, and a person's own account
    Route("GET", "/", signin.home, S),
    Route("GET", "/login", signin.login_page, P),
    Route("POST", "/login", signin.login, P),
    Route("GET", "/login/join", signin.join_page, P),
    Route("POST", "/login/join", signin.join, P),
    Route("POST", "/logout", signin.logout, S),
    Route("GET", "/account", signin.account_page, S),
    Route("POST", "/account/password", signin.change_password, S),
    Route("POST", "/account/team", signin.switch_team, S),
    # For orchestrators and scrapers (``studio.observability``)
    Route("GET", "/healthz", observability.healthz, PROBE),
    Route("GET", "/readyz", observability.readyz, PROBE),
    Route("GET", "/metrics", observability.metrics, PROBE),
    # Definitions and versions
    Route("GET", "/definitions", definitions.list_page, V),
    Route("GET", "/definitions/import", definitions.import_page, A),
    Route("POST", "/definitions/import", definitions.import_preview, A),
    Route("POST", "/definitions/import/save", definitions.import_save, A),
    Route("GET", "/definitions/{name:str}", definitions.versions_page, V),
    Route("GET", VERSION, definitions.version_page, V),
    Route("GET", VERSION + "/export", definitions.export_version, V),
    Route("POST", VERSION + "/draft", definitions.draft_from_version, A),
    Route("POST", VERSION + "/deprecate", definitions.deprecate_version, A),
    Route("POST", VERSION + "/edges", migration_pages.declare_edge, OP),
    Route("POST", VERSION + "/migrate/preview", migration_pages.preview_migration, OP),
    Route("POST", VERSION + "/migrate", migration_pages.migrate_instances, OP),
    # Drill plans on a version's graph (issue 22)
    Route("GET", PLANS, plans.plans_page, V),
    Route("POST", PLANS, plans.save_plan, OP),
    Route("GET", PLANS + "/compose", plans.compose, OP),
    Route("POST", PLANS + "/compose", plans.compose, OP),
    Route("GET", PLANS + "/coverage", plan_runs.coverage_page, V),
    Route("GET", PLANS + "/jobs/{job_id:str}", plan_runs.job_page, V),
    Route("GET", PLAN + "/diff", plans.diff_page, V),
    Route("GET", PLAN_VERSION + "/export", plans.export_plan, V),
    Route("POST", PLAN_VERSION + "/run", plan_runs.run_plan, OP),
    # The draft editor
    Route("POST", "/drafts", definitions.create_draft, A),
    Route("GET", DRAFT, editor.show_draft, V),
    Route("POST", DRAFT + "/insert", editor.insert_step, A),
    Route("POST", DRAFT + "/branch", editor.add_branch, A),
    Route("POST", DRAFT + "/update", editor.update_step, A),
    Route("POST", DRAFT + "/move", editor.move_step, A),
    Route("POST", DRAFT + "/delete-step", editor.delete_step, A),
    Route("POST", DRAFT + "/header", editor.set_header, A),
    Route("POST", DRAFT + "/json", editor.replace_json, A),
    Route("POST", DRAFT + "/undo", editor.undo_edit, A),
    Route("POST", DRAFT + "/redo", editor.redo_edit, A),
    Route("POST", DRAFT + "/new-version", editor.new_version, A),
    Route("POST", DRAFT + "/publish", editor.publish_draft, A),
    Route("POST", DRAFT + "/discard", editor.discard_draft, A),
    Route("POST", DRAFT + "/machine/add-state", machine_editor.add_state, A),
    Route("POST", DRAFT + "/machine/state", machine_editor.update_state, A),
    Route("POST", DRAFT + "/machine/remove-state", machine_editor.remove_state, A),
    Route("POST", DRAFT + "/machine/add-edge", machine_editor.add_edge, A),
    Route("POST", DRAFT + "/machine/remove-edge", machine_editor.remove_edge, A),
    Route("POST", DRAFT + "/machine/bounds", machine_editor.set_bounds, A),
    # Instances: list, start, inspect, follow, act
    Route("GET", "/instances", instances.list_page, V),
    Route("POST", "/instances/view", instances.save_view, V),
    Route("GET", "/instances/new", instances.start_page, OP),
    Route("POST", "/instances", instances.start_instance, OP),
    Route("GET", "/instances/bulk", bulk_actions.preview_page, OP),
    Route("POST", "/instances/bulk", bulk_actions.confirm, OP),
    Route("GET", "/instances/bulk/{bulk_id:str}", bulk_actions.result_page, V),
    Route("GET", INSTANCE, instances.instance_page, V),
    Route("GET", INSTANCE + "/state", instances.state_panel, V),
    Route("GET", INSTANCE + "/history", instances.history, V),
    Route("GET", INSTANCE + "/history.json", instances.export_history, V),
    Route("GET", INSTANCE + "/live", instance_live.live, V),
    Route("POST", INSTANCE + "/signals/{step:str}", interventions.send_signal, OP),
    Route("GET", INSTANCE + "/actions/{action:str}", interventions.confirm_action, OP),
    Route("POST", INSTANCE + "/actions/{action:str}", interventions.do_action, OP),
    # Dead letters, drills, workers
    Route("GET", "/dead-letters", dead_letters.dead_letters_page, V),
    Route("POST", "/dead-letters/resolve", dead_letters.resolve, OP),
    Route("GET", "/drills", drills.drills_page, V),
    Route("POST", "/drills/runs", drills.start_run, OP),
    Route("GET", "/drills/jobs/{job_id:str}", drills.job_page, V),
    Route("POST", "/drills/jobs/{job_id:str}/stop", drills.stop_job, OP),
    Route("GET", "/drills/compare", drills.compare_page, V),
    Route("GET", RUN, drills.run_page, V),
    Route("GET", RUN + "/drills/{drill_id:str}" + INSTANCE, drills.captured_instance, V),
    Route("GET", "/workers", workers.workers_page, V),
    Route("GET", "/holds", holds.holds_page, V),
    Route("POST", "/holds", holds.place_hold, OP),
    Route("POST", HOLD + "/release", holds.release_hold, OP),
    # Team settings
    Route("GET", "/settings", settings.settings_page, V),
    Route("POST", "/settings/members", settings.invite_member, ADM),
    Route(
        "POST",
        "/settings/invitations/{invitation_id:str}/withdraw",
        settings.withdraw_invitation,
        ADM,
    ),
    Route("POST", "/settings/members/{user_id:str}/role", settings.set_role, ADM),
    Route("POST", "/settings/members/{user_id:str}/remove", settings.remove_member, ADM),
    Route("POST", "/settings/tokens", settings.create_token, ADM),
    Route("POST", "/settings/tokens/{token_id:str}/revoke", settings.revoke_token, ADM),
    # The JSON API
    Route("GET", "/api/me", api_people.me, S),
    Route("GET", "/api/definitions", api_definitions.list_definitions, V),
    Route(
        "POST",
        "/api/definitions",
        api_definitions.publish,
        A,
        errors=(CONFLICT, INVALID),
        also=REPUBLISHED,
    ),
    Route("POST", "/api/definitions/validate", api_definitions.validate, A, 200),
    Route("GET", "/api/definitions/{name:str}", api_definitions.list_versions, V),
    Route("GET", "/api/definitions/{name:str}/diff", api_definitions.diff, V, errors=(INVALID,)),
    Route("GET", API_VERSION, api_definitions.get_version, V),
    Route("POST", API_VERSION + "/deprecate", api_definitions.deprecate, A, 200),
    Route("GET", API_PLANS, api_plans.list_plans, V, errors=(INVALID,)),
    Route("POST", API_PLANS, api_plans.save_plan, OP, 201, (INVALID,)),
    Route("GET", API_PLANS + "/coverage", api_plans.plan_coverage, V, errors=(INVALID,)),
    Route("GET", API_PLANS + "/jobs/{job_id:str}", api_plans.get_plan_run, V, errors=(INVALID,)),
    Route("GET", API_PLAN, api_plans.get_plan, V, errors=(INVALID,)),
    Route("GET", API_PLAN_VERSION, api_plans.get_plan_version, V, errors=(INVALID,)),
    Route("GET", API_PLAN_VERSION + "/export", api_plans.export_plan, V, errors=(INVALID,)),
    Route("POST", API_PLAN_VERSION + "/run", api_plans.run_plan, OP, 202, (CONFLICT, INVALID)),
    Route("GET", "/api/drafts", api_drafts.list_drafts, V),
    Route("POST", "/api/drafts", api_drafts.create_draft, A, errors=(NOT_FOUND, INVALID)),
    Route("GET", API_DRAFT, api_drafts.get_draft, V),
    Route("PUT", API_DRAFT, api_drafts.replace_draft, A, errors=(CONFLICT, INVALID)),
    Route("DELETE", API_DRAFT, api_drafts.delete_draft, A),
    Route("POST", API_DRAFT + "/edits", api_drafts.edit_draft, A, 200, (CONFLICT, INVALID)),
    Route(
        "POST",
        API_DRAFT + "/publish",
        api_drafts.publish_draft,
        A,
        errors=(CONFLICT, INVALID),
        also=REPUBLISHED,
    ),
    Route("GET", "/api/instances", api_instances.list_instances, V, errors=(INVALID,)),
    Route(
        "POST",
        "/api/instances",
        api_instances.start_instance,
        OP,
        errors=(NOT_FOUND, CONFLICT, INVALID),
        also=JOINED,
    ),
    Route("POST", "/api/instances/bulk/preview", api_bulk.preview, OP, 200, (INVALID,)),
    Route("POST", "/api/instances/bulk", api_bulk.act, OP, 200, (CONFLICT, INVALID)),
    Route("GET", "/api/instances/bulk/{bulk_id:str}", api_bulk.get_bulk, V),
    Route("GET", API_INSTANCE, api_instances.get_instance, V),
    Route("GET", API_INSTANCE + "/history", api_instances.get_history, V, errors=(INVALID,)),
    Route(
        "POST", API_INSTANCE + "/signals", api_instances.send_signal, OP, 200, (CONFLICT, INVALID)
    ),
    Route("POST", API_INSTANCE + "/actions", api_instances.command, OP, 200, (CONFLICT, INVALID)),
    Route(
        "POST",
        EXECUTIONS,
        api_machines.submit,
        OP,
        errors=(CONFLICT, INVALID),
        also=RESUBMITTED,
    ),
    Route("GET", EXECUTION + "/state", api_machines.get_state, V),
    Route("GET", EXECUTION + "/status", api_machines.get_status, V),
    Route("POST", EXECUTION + "/cancel", api_machines.cancel, OP, 200, (INVALID,)),
    Route("GET", "/api/dead-letters", api_dead_letters.list_dead_letters, V, errors=(INVALID,)),
    Route("POST", "/api/dead-letters/resolve", api_dead_letters.resolve, OP, 200, (INVALID,)),
    Route("GET", "/api/drills", api_drills.catalogue, V),
    Route("GET", "/api/drills/runs", api_drills.list_runs, V, errors=(INVALID,)),
    Route("POST", "/api/drills/runs", api_drills.start_run, OP, 202, (CONFLICT, INVALID)),
    Route("GET", "/api/drills/runs/{run_id:str}", api_drills.get_run, V),
    Route("GET", "/api/drills/jobs/{job_id:str}", api_drills.get_job, V),
    Route("POST", "/api/drills/jobs/{job_id:str}/stop", api_drills.stop_job, OP, 202, (CONFLICT,)),
    Route("GET", "/api/drills/compare", api_drills.compare, V, errors=(NOT_FOUND, INVALID)),
    Route("GET", "/api/workers", api_workers.list_workers, V),
    Route("GET", "/api/holds", api_holds.list_holds, V),
    Route("POST", "/api/holds", api_holds.place_hold, OP, errors=(INVALID,)),
    Route("POST", "/api" + HOLD + "/release", api_holds.release_hold, OP, 200, (CONFLICT, INVALID)),
    Route("GET", "/api/members", api_people.list_members, V),
    Route("GET", "/api/members/audit", api_people.list_account_audit, V, errors=(INVALID,)),
    Route("GET", "/api/tokens", api_people.list_tokens, ADM),
    Route("POST", "/api/tokens", api_people.create_token, ADM, errors=(INVALID,)),
    Route("DELETE", "/api/tokens/{token_id:str}", api_people.revoke_token, ADM),
)


def route_handlers(routes: tuple[Route, ...] = ROUTES) -> list[HTTPRouteHandler]:
    """Litestar handlers for the table; each carries its rule and the access guard."""
    handlers = []
    for route in routes:
        handler = HTTPRouteHandler(
            path=route.path,
            http_method=route.method,
            guards=[enforce_access],
            opt={"access": route.access},
            include_in_schema=route.is_api,
            status_code=route.status,
            name=f"{route.method} {route.path}",
            tags=[route.path.split("/")[2]] if route.is_api else None,
            operation_id=f"{route.method.lower()}_{route.handler.__name__}",
            responses=route.responses(),
        )
        handlers.append(handler(route.handler))
    return allow_handlers(routes) + handlers


def allow_handlers(routes: tuple[Route, ...]) -> list[HTTPRouteHandler]:
    """An ``OPTIONS`` answer for each path, whose ``Allow`` names every method the table
    serves there.

    Litestar makes one itself, but for a path served by several handlers it keeps the
    one made with the first handler, whose ``Allow`` lists only that handler's method.
    These come first, so Litestar makes none.
    """
    methods: dict[str, set[str]] = {}
    for route in routes:
        methods.setdefault(route.path, {"OPTIONS"}).add(route.method)
    return [_allow(path, ", ".join(sorted(allowed))) for path, allowed in methods.items()]


def _allow(path: str, allowed: str) -> HTTPRouteHandler:
    def options() -> Response:
        return Response(None, status_code=204, headers={"Allow": allowed})

    return HTTPRouteHandler(
        path=path,
        http_method="OPTIONS",
        guards=[enforce_access],
        opt={"access": Access.PUBLIC},
        include_in_schema=False,
        sync_to_thread=False,
        name=f"OPTIONS {path}",
    )(options)
