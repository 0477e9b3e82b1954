"""Bulk operator actions in the studio: choose instances, preview, confirm, read results.

Instances are chosen by the list's filters or by hand (their ids), at most
MAX_BULK_INSTANCES per request: a filter that matches more says so, and the preview and
the action cover its first MAX_BULK_INSTANCES. Filters on the step an instance is at
and on a failure code are read from replayed state, so a filtered selection examines
at most MAX_BULK_SCAN rows of the list's other filters and says when it stopped there.

The preview is the engine's (``engine.api.bulk_commands``): every chosen instance judged
from its replayed state, and the totals (``engine.decide.previews.blast_radius``).
Confirming needs a reason and the bulk id the preview was drawn with, so a form posted
twice acts once; the engine judges every instance again as it acts, and the bulk's
results are kept for its result page. The pages (``studio.instances.bulk_pages``) and
the API (``studio.instances.bulk_api``) share this module.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from engine import BulkCommands, BulkConflict
from engine.api.bulk_commands import BulkCommand, BulkOutcome, check_selection
from engine.api.queries import BulkResult
from engine.decide.bulk_actions import BulkRequestRefused, bulk_request
from engine.decide.operator_actions import Action
from engine.decide.previews import ActionRequest, BlastRadius, Preview, blast_radius
from engine.model.identifiers import team_instance_id
from engine.model.limits import MAX_BULK_INSTANCES, MAX_PAGE_ITEMS
from studio.errors import Conflict, Invalid, NotFound
from studio.instances import code_migration
from studio.instances import service as instances
from studio.instances.service import InstanceFilters, located, narrowed, parse_json
from studio.reasons import operator_reason
from studio.runtime import Runtime

MAX_BULK_SCAN = 1_000
"""Rows of the list's filters a selection examines for its step and failure-code filters."""
RECENT_BULKS = 10
"""Bulk actions listed under the instances list."""
NONE_BY_ID = "instances is empty: list 1 to {limit} instance ids (a preview takes a filter instead)"
"""Said of an empty selection by id (the API's); a form says it in its own words."""


def refused(field: str, message: str) -> Invalid:
    """Invalid located at ``field`` (as the API names it: ``instances``, ``filter``,
    ``action``, ``step``, ``resolution``, ``result``, ``version``), so the API's
    ``problems`` name it and a form says it beside that field."""
    return Invalid.at(field, message)


@dataclass(frozen=True)
class Selection:
    """The instances a bulk action covers (stored ids), and how they were chosen."""

    instance_ids: tuple[str, ...]
    more: bool = False
    """The filter matches more than MAX_BULK_INSTANCES: only the first are covered."""
    scanned_out: bool = False
    """The step or failure-code filter stopped after MAX_BULK_SCAN rows."""


async def select_by_filter(runtime: Runtime, team: str, filters: InstanceFilters) -> Selection:
    """The first MAX_BULK_INSTANCES instances the filters match, oldest first (Invalid
    when none does)."""
    chosen: list[str] = []
    cursor, scanned = None, 0
    query = instances.query_of(team, filters)
    while len(chosen) <= MAX_BULK_INSTANCES and scanned < MAX_BULK_SCAN:
        found = await runtime.queries.instances(**query, after=cursor, limit=MAX_PAGE_ITEMS)
        scanned += len(found.rows)
        rows = found.rows
        if filters.by_state:
            rows = await narrowed(runtime.primary, rows, filters)
        chosen += [r.instance_id for r in rows]
        cursor = found.next_cursor
        if cursor is None:
            break
    if not chosen:
        raise refused("filter", "no instance matches these filters")
    more = len(chosen) > MAX_BULK_INSTANCES
    scanned_out = cursor is not None and not more
    return Selection(tuple(chosen[:MAX_BULK_INSTANCES]), more, scanned_out)


def checked(instance_ids: Sequence[str], limit: int = MAX_BULK_INSTANCES) -> list[str]:
    """The chosen ids without repeats (Invalid for none, or more than ``limit``): the
    engine's one check of a selection."""
    try:
        return check_selection(instance_ids, limit)
    except ValueError as wrong:
        raise refused("instances", str(wrong)) from None


async def select_by_hand(
    runtime: Runtime, team: str, local_ids: Sequence[str], none: str = NONE_BY_ID
) -> Selection:
    """The team's instances of ``local_ids`` (Invalid names any the team does not have;
    for none it says ``none``, with ``{limit}`` the most a request takes)."""
    wanted = [i.strip() for i in local_ids if i.strip()]
    if not wanted:
        raise refused("instances", none.format(limit=MAX_BULK_INSTANCES))
    chosen = checked(wanted)
    scoped = {i: team_instance_id(team, i) for i in chosen}
    rows = await runtime.queries.instance_rows([*scoped.values(), *chosen])
    stored, missing = [], []
    for local in chosen:
        own = [rows[i] for i in (scoped[local], local) if i in rows and rows[i].tenant_id == team]
        (stored.append(own[0].instance_id) if own else missing.append(local))
    if missing:
        raise refused("instances", f"no such instance in this team: {', '.join(missing)}")
    return Selection(tuple(stored))


def ask(
    action: str, step: str = "", resolution: str = "", result: Any = None, version: str = ""
) -> ActionRequest:
    """The bulk request a form or the API describes (Invalid says what is allowed):
    ``version`` is the version a migration moves each instance to."""
    arguments = {
        "resolution": resolution or None,
        "result": result,
        "version": version.strip() or None,
    }
    try:
        return bulk_request(action, step.strip(), arguments)
    except BulkRequestRefused as wrong:
        raise refused(wrong.field, str(wrong)) from None


def form_request(values: Mapping[str, str]) -> dict[str, Any]:
    """``ask``'s arguments from a bulk form's fields (its result is JSON text)."""
    return {
        "action": values.get("action", ""),
        "step": values.get("step", ""),
        "resolution": values.get("resolution", ""),
        "result": parse_json(values.get("result", ""), "result"),
        "version": values.get("version", ""),
    }


def ask_from_form(values: Mapping[str, str]) -> ActionRequest:
    return ask(**form_request(values))


async def chosen(
    runtime: Runtime,
    team: str,
    asked: Mapping[str, Any],
    select: Callable[[], Awaitable[Selection]],
) -> tuple[ActionRequest, Selection]:
    """The request (``ask``'s arguments) and the instances ``select`` chooses, both
    checked before either is refused: a refusal lists every field to change in its
    ``problems`` (so a form says each beside its field, all at once), and a migration
    without a version says which versions can be chosen."""
    problems: list[dict[str, str]] = []
    selection: Selection | None = None
    try:
        selection = await select()
    except Invalid as wrong:
        problems += _located(wrong)
    request: ActionRequest | None = None
    try:
        request = ask(**asked)
    except Invalid as wrong:
        problems += await _versions_allowed(runtime, team, asked, selection, _located(wrong))
    if request is not None and selection is not None:
        problems += await _undeclared_version(runtime, team, request, selection)
    if problems or request is None or selection is None:
        raise Invalid.of(problems)
    return request, selection


async def _undeclared_version(
    runtime: Runtime, team: str, request: ActionRequest, selection: Selection
) -> list[dict[str, str]]:
    """A migration to a version that no chosen instance has a migration declared to is
    refused at its field, with the versions that can be chosen (a preview refusing each
    instance alike said it once per row); one that some of them can take is previewed,
    each instance with its own verdict."""
    version = request.effect.get("version")
    if request.action is not Action.MIGRATE or version is None:
        return []
    targets = await _migration_targets(runtime, team, selection)
    if version in targets:
        return []
    rows = await runtime.queries.instance_rows(selection.instance_ids)
    if any(r.definition.version == version for r in rows.values()):
        return []  # those already run it: each is previewed as unchanged
    message = f"no migration to version {version} is declared; {_targets_text(targets, selection)}"
    return [{"path": "version", "message": message}]


def _located(wrong: Invalid) -> list[dict[str, str]]:
    return wrong.problems or [{"path": "", "message": str(wrong)}]


async def _versions_allowed(
    runtime: Runtime,
    team: str,
    asked: Mapping[str, Any],
    selection: Selection | None,
    problems: list[dict[str, str]],
) -> list[dict[str, str]]:
    """``problems``, with a migration's missing version saying which versions can be
    chosen ("choose the version to migrate to" alone left a person guessing)."""
    wanted = asked.get("action") == Action.MIGRATE.value
    if not (wanted and any(p["path"] == "version" for p in problems)):
        return problems
    allowed = _targets_text(await _migration_targets(runtime, team, selection), selection)
    return [
        {**p, "message": f"{p['message']}; {allowed}"} if p["path"] == "version" else p
        for p in problems
    ]


async def _migration_targets(
    runtime: Runtime, team: str, selection: Selection | None
) -> dict[str, list[str]]:
    """The versions a migration of ``selection`` (None: of the team's instances) can
    move to, each with the versions (``name@version``) it is declared from."""
    if selection is None:
        versions = await runtime.queries.versions(team)
        sources = {(v.definition.name, v.definition.version) for v in versions}
    else:
        rows = await runtime.queries.instance_rows(selection.instance_ids)
        sources = {(r.definition.name, r.definition.version) for r in rows.values()}
    targets: dict[str, list[str]] = {}
    for edge in await runtime.queries.migration_edges():
        if (edge.name, edge.from_version) in sources:
            targets.setdefault(edge.to_version, []).append(f"{edge.name}@{edge.from_version}")
    return targets


def _targets_text(targets: dict[str, list[str]], selection: Selection | None) -> str:
    """``_migration_targets`` in words."""
    whose = "this team's versions" if selection is None else "the chosen instances' versions"
    if not targets:
        return (
            f"no migration is declared from {whose} yet: declare one on the page of the "
            "version to move to (Compatibility and migration)"
        )
    each = [f"{to} (from {', '.join(froms)})" for to, froms in targets.items()]
    return f"a migration is declared from {whose} to {' or '.join(each)}"


@dataclass(frozen=True)
class BulkPreview:
    selection: Selection
    request: ActionRequest
    previews: tuple[Preview, ...]
    radius: BlastRadius


async def preview(runtime: Runtime, selection: Selection, request: ActionRequest) -> BulkPreview:
    """Each chosen instance judged (a code run's refusal saying how it is migrated:
    ``code_migration``) and the totals."""
    judged = await BulkCommands(runtime.client).preview(selection.instance_ids, request)
    previews = [replace(p, reason=code_migration.said(p.reason)) for p in judged]
    return BulkPreview(selection, request, tuple(previews), blast_radius(previews))


async def act(
    runtime: Runtime,
    team: str,
    actor: str,
    bulk_id: str,
    request: ActionRequest,
    selection: Selection,
    reason: str,
) -> BulkOutcome:
    """Take the bulk action once under ``bulk_id`` (from the preview's form)."""
    if not bulk_id:
        raise Invalid("the bulk id is missing: preview the action first")
    bulk = BulkCommand(
        bulk_id,
        team,
        request.action.value,
        request.step,
        dict(request.effect),
        actor,
        located("reason", operator_reason, reason),  # said beside the reason field
        selection.instance_ids,
    )
    try:
        outcome = await BulkCommands(runtime.client).act(bulk)
    except BulkConflict as clash:
        raise Conflict(str(clash)) from None
    except ValueError as wrong:
        raise Invalid(str(wrong)) from None
    runtime.watcher.nudge()
    return replace(outcome, results=tuple(_said(outcome.results)))


async def outcome(
    runtime: Runtime, team: str, bulk_id: str
) -> tuple[BulkCommand, list[BulkResult]]:
    """The team's bulk ``bulk_id`` and its results; NotFound for another team's."""
    found = await runtime.queries.bulk_command(bulk_id)
    if found is None or found[0].tenant_id != team:
        raise NotFound("no such bulk action in this team")
    return found[0], _said(found[1])


def _said(results: Iterable[BulkResult]) -> list[BulkResult]:
    """``results``, a code run's refusal saying how it is migrated (``code_migration``)."""
    return [replace(r, detail=code_migration.said(r.detail)) for r in results]


async def recent(runtime: Runtime, team: str) -> list[BulkCommand]:
    return await runtime.queries.recent_bulk_commands(team, RECENT_BULKS)
