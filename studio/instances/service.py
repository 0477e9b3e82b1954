"""A team's instances: the filtered list, and starting one.

Every read goes through the team: an instance of another team is not found. Instance
ids are the team's own (``engine.model.identifiers.team_instance_id``): every id a caller
gives is the one its team knows, found here (``find_row``) in its stored form, so
another team's ids can be neither taken nor observed; pages and answers show ids
without the team's prefix again. The list is keyset-paged with its filters in the URL;
starting checks the input before the engine sees it (valid JSON, within the smallest
input limit of the version's activities, since each activity receives the instance
input: the engine's own ``lifecycle.start_input_limit``, which ``Client.start``
enforces too). One instance's detail is ``studio.instances.detail``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from engine import ActiveExecutionExists
from engine.api.client import StartConflict
from engine.api.queries import InstancePage, InstanceRow, InstanceView, PublishedVersion
from engine.decide import lifecycle
from engine.model import inputs
from engine.model.definitions import Definition, Mode
from engine.model.errors import (
    DefinitionNotFound,
    InputRefused,
    LimitExceeded,
    NotJSON,
    RegistryError,
    ReplayRejected,
)
from engine.model.identifiers import local_instance_id, team_id_problem, team_instance_id
from engine.model.instance import Instance, InstanceStatus
from engine.modes.code.document import CodeManifest
from engine.modes.code.runs import run_id
from engine.modes.machines.start_data import SUBMITTED
from studio.code.outline_graph import read_outline
from studio.definitions import service as definitions
from studio.drawings import drawing_of
from studio.errors import Conflict, Invalid, NotFound, StudioError
from studio.instances.list_order import ListOrder, parse_cursor
from studio.instances.replays import Replayed
from studio.reads import Reads
from studio.runtime import Runtime

PAGE_SIZE = 50
VIEWS = {"active": "Running", "archived": "Finished", "all": "All"}


def parse_time(text: str, what: str) -> datetime | None:
    """A date or date-time from a filter (UTC unless it names a zone); None when empty."""
    if not text.strip():
        return None
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise Invalid(f"{what} must be a date like 2026-11-29 or 2026-11-29T10:30") from None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _at(field: str, message: str, kind: type[StudioError] = Invalid) -> StudioError:
    """A ``kind`` refusal said at ``field`` (a form shows it there, the API names it)."""
    return kind(message, [{"path": field, "message": message}])


def located(field: str, check: Callable[..., Any], *args: Any) -> Any:
    """``check``'s answer; its refusal (422 or 409) is said at ``field``."""
    try:
        return check(*args)
    except (Invalid, Conflict) as wrong:
        raise _at(field, str(wrong), type(wrong)) from None


@dataclass(frozen=True)
class InstanceFilters:
    """The list's filters as the URL carries them (text, exactly as typed)."""

    view: str = "active"
    definition: str = ""
    version: str = ""
    status: str = ""
    started_from: str = ""
    started_before: str = ""
    instance: str = ""
    step: str = ""
    """Only instances at this step (read from their replayed state)."""
    failure_code: str = ""
    """Only instances with this failure code, on the instance or any attempt (replayed)."""
    sort: str = ""
    """The list's order (``studio.instances.list_order``; '' is newest first). Not a
    filter: a bulk selection by filter ignores it and takes the oldest first."""
    nest: str = ""
    """'1': children under their parents (``studio.instances.family``). Not a filter."""

    def __post_init__(self) -> None:
        """Refuse a filter that cannot be taken, located at its field: a query parameter
        of ``GET /api/instances``, a key of a bulk request's ``filter``."""
        if self.view not in VIEWS:
            raise _at("view", "view is one of active, archived, all")
        if self.nest not in ("", "1"):
            raise _at("nest", "nest is 1 (children under their parents) or empty")
        statuses = [s.label for s in InstanceStatus]
        if self.status and self.status not in statuses:
            listed = ", ".join(statuses)
            raise _at("status", f"status is one of {listed}, or left out for every status")
        for name in ("started_from", "started_before"):
            located(name, parse_time, getattr(self, name), name.replace("_", " "))
        located("sort", ListOrder.parse, self.sort)

    @property
    def active(self) -> dict[str, str]:
        """The filters that are set, as URL parameters (the view always)."""
        return {k: v for k, v in vars(self).items() if v or k == "view"}

    def chosen(self, **changes: str) -> dict[str, str]:
        """This list's parameters that are set, with ``changes`` applied (a tab, a
        cursor): a link's URL query, or the view a tab or a heading saves."""
        values = {**self.active, **changes}
        return {k: v for k, v in values.items() if v}

    def query(self, **changes: str) -> str:
        """This list's URL query, with ``changes`` applied (a tab, a cursor)."""
        return urlencode(self.chosen(**changes))

    @property
    def narrowed(self) -> bool:
        return any(v for k, v in vars(self).items() if k not in ("view", "sort", "nest"))

    @property
    def order(self) -> ListOrder:
        return ListOrder.parse(self.sort)

    @property
    def by_state(self) -> bool:
        """Whether a filter reads the replayed state rather than the instance rows."""
        return bool(self.step or self.failure_code)


async def list_page(
    reads: Reads, team: str, filters: InstanceFilters, cursor: str | None = None
) -> InstancePage:
    """One page of the list; the step and failure-code filters narrow the page's rows
    (from their replayed states), so a page may hold fewer rows than PAGE_SIZE."""
    order = filters.order
    found = await reads.queries.instances(
        **query_of(team, filters),
        after=parse_cursor(cursor, order),
        limit=PAGE_SIZE,
        sort=order.key,
        descending=order.descending,
    )
    if not filters.by_state:
        return found
    return replace(found, rows=tuple(await narrowed(reads, found.rows, filters)))


def query_of(team: str, filters: InstanceFilters) -> dict[str, Any]:
    """The store's list arguments for ``filters`` (all but the page and its cursor)."""
    status = next((s for s in InstanceStatus if s.label == filters.status), None)
    return {
        "view": InstanceView(filters.view),
        "definition_name": filters.definition or None,
        "definition_version": filters.version or None,
        "status": status,
        "tenant": team,
        "instance_prefixes": _id_prefixes(team, filters.instance.strip()),
        "started_from": parse_time(filters.started_from, "started from"),
        "started_before": parse_time(filters.started_before, "started before"),
    }


def state_matches(entry: Replayed, filters: InstanceFilters) -> bool:
    """Whether the instance is at ``filters.step`` and carries ``filters.failure_code``
    (on the instance or on any attempt, an earlier one that was retried too: the
    attempt log keeps every attempt's code), when those are set."""
    state = entry.state
    if filters.step:
        spec = state.spec
        if spec is None or filters.step.strip() not in drawing_of(spec).at(state):
            return False
    if filters.failure_code:
        codes = {r.code for records in entry.attempts.by_step.values() for r in records}
        return filters.failure_code in {state.failure_code, *codes}
    return True


async def narrowed(
    reads: Reads, rows: Sequence[InstanceRow], filters: InstanceFilters
) -> list[InstanceRow]:
    """``rows`` whose replayed state ``state_matches`` the filters."""
    kept = []
    for row in rows:
        entry = await reads.replays.load(row.instance_id, at_least=row.sequence)
        if state_matches(entry, filters):
            kept.append(row)
    return kept


async def find_row(reads: Reads, team: str, instance_id: str) -> InstanceRow | None:
    """The row of the team's instance that the team calls ``instance_id``, or None.

    That is the instance stored under the team's prefix, or else one of the team's
    instances stored under ``instance_id`` itself (started before ids were namespaced,
    or a child whose id was too long to be readable); another team's is never found.
    """
    own, _ = await _lookup(reads, team, instance_id)
    return own


async def _lookup(
    reads: Reads, team: str, instance_id: str
) -> tuple[InstanceRow | None, InstanceRow | None]:
    """The team's own row for ``instance_id`` (``find_row``), and the row stored under
    the team's prefixed id whoever owns it (another team's only if it chose that id
    before ids were namespaced), from one read."""
    scoped = team_instance_id(team, instance_id)
    rows = await reads.queries.instance_rows([scoped, instance_id])
    return _owned(rows, team, instance_id), rows.get(scoped)


async def find_rows(
    reads: Reads, team: str, instance_ids: Collection[str]
) -> dict[str, InstanceRow | None]:
    """``find_row`` of each of ``instance_ids``, from one read."""
    stored = [i for local in instance_ids for i in (team_instance_id(team, local), local)]
    rows = await reads.queries.instance_rows(stored)
    return {local: _owned(rows, team, local) for local in instance_ids}


def _owned(rows: Mapping[str, InstanceRow], team: str, instance_id: str) -> InstanceRow | None:
    """Of ``rows``, by stored id, the team's own for ``instance_id`` (``find_row``): the
    one under the team's prefix first."""
    scoped = team_instance_id(team, instance_id)
    owned = [rows[i] for i in (scoped, instance_id) if i in rows and rows[i].tenant_id == team]
    return owned[0] if owned else None


async def require_row(reads: Reads, team: str, instance_id: str) -> InstanceRow:
    """The instance's row (``find_row``); NotFound when the team has no such instance."""
    row = await find_row(reads, team, instance_id)
    if row is None:
        raise NotFound("no such instance in this team")
    return row


def _id_prefixes(team: str, typed: str) -> list[str] | None:
    """The stored forms of an id's start: the team's own ids (``<team>:<id>``) and ids
    stored as given (``find_row``) that start with ``typed``."""
    return [team_instance_id(team, typed), typed] if typed else None


async def pinned_definition(reads: Reads, row: InstanceRow) -> Definition:
    """The version an instance is pinned to (its fingerprint, not just its number)."""
    try:
        return (await reads.registries.get()).resolve(row.definition)
    except RegistryError:  # published after this process read the catalog
        return (await reads.registries.refresh()).resolve(row.definition)


# Starting ---------------------------------------------------------------------------


def parse_json(text: str, what: str) -> Any:
    """JSON from a form field; empty means no value (None).

    Read with the engine's rules for values from outside (``engine.model.inputs``): text that
    is not JSON is a mistake to correct in the form (422); JSON nested too deeply or
    holding a NUL character cannot be taken at all (InputRefused, answered 400).
    """
    if not text.strip():
        return None
    try:
        return inputs.read_json(text, f"the {what}")
    except NotJSON as mistake:
        raise Invalid(str(mistake)) from None


def check_size(value: Any, limit: int, what: str, where: str = "") -> None:
    """The engine's size check (``engine.model.inputs.check_size``) as a form's mistake (422)."""
    try:
        inputs.check_size(value, limit, f"the {what}", where)
    except LimitExceeded as refused:
        raise Invalid(str(refused)) from None


def check_instance_id(team: str, instance_id: str) -> None:
    """Refuse an id that is not valid, or too long once the team's prefix is added."""
    if problem := team_id_problem(team, instance_id):
        raise Invalid(f"the instance id {problem}")


START_PREFERENCE = {Mode.ORCHESTRATION: 2, Mode.CHOREOGRAPHY: 2, Mode.CODE: 1}
"""Which modes the start form offers first, when nothing was asked for, with its input
``{}``: a step list hands the input to its activities as it is (within the limit the
form states); a code workflow's function reads it as its code does, which its published
document does not describe (the definition model has no input schema or example), so
``{}`` is a guess there; a machine (0) starts only from ``{"input": ..., "parent":
...}``, so ``{}`` is refused."""


def start_default(
    versions: Sequence[PublishedVersion], published: Sequence[PublishedVersion] = ()
) -> PublishedVersion | None:
    """Of ``versions``, the one the start form offers when none was asked for: one the
    pre-filled ``{}`` is not known to fail, if any.

    Never a child: a version another of the team's ``published`` versions (deprecated
    ones too) starts, as a step list's child step or a code workflow's ``ctx.spawn``,
    takes its input from its parent, which a start by hand does not give. The example
    ``shipping``, which ``order-saga`` spawns with a parcel and whose first step reads
    the parcel's sku, was offered first (the catalog lists versions by name, and its
    last row was taken), and a start with ``{}`` was held at that step. Then by
    ``START_PREFERENCE`` of its mode, then the newest published.
    """
    children = {c for v in (*versions, *published) for c in _started(v.definition)}
    top = [
        v
        for v in versions
        if v.definition.name not in children
        and (v.definition.name, v.definition.version) not in children
    ]
    ranked = sorted(
        top or versions,
        key=lambda v: (START_PREFERENCE.get(v.definition.mode, 0), v.published_at),
    )
    return ranked[-1] if ranked else None


def _started(definition: Definition) -> set[str | tuple[str, str]]:
    """What ``definition`` starts as a child: a step list's child steps' versions, and
    the names a code workflow spawns (each spawn takes the latest version of its name)."""
    found: set[str | tuple[str, str]] = {
        (s.child_definition.name, s.child_definition.version)
        for s in definition.steps
        if s.child_definition is not None
    }
    if isinstance(definition.manifest, CodeManifest):
        outline = read_outline({"outline": definition.manifest.outline})
        found |= {s.raw["name"] for s in outline.steps if s.kind == "spawn" and s.raw.get("name")}
    return found


async def start(
    runtime: Runtime,
    team: str,
    name: str,
    version: str,
    instance_id: str = "",
    input_text: str = "",
    started_by: str = "",
) -> tuple[Instance, bool]:
    """Start an instance of the team's ``name``@``version`` as ``started_by`` (the
    principal's actor, kept with its start): the instance, and whether this call
    started it.

    The same id with the same version and input again returns the existing instance
    (so a form posted twice starts one instance) and False; with anything else it is a
    conflict.
    The id is the team's own: another team's instance of the same id is another
    instance, and never a conflict.
    """
    for field_name, value in (("definition", name), ("version", version)):
        if not value.strip():
            raise _at(field_name, f"{field_name} is empty: name the published one to start")
    published = await definitions.version_of(runtime, team, name, version)
    if published.deprecated:
        raise _at("version", f"{name}@{version} is deprecated and refuses new instances")
    value = located("input", _start_input, published.definition, input_text)
    chosen = instance_id.strip() or f"{name}-{uuid.uuid4().hex[:12]}"
    if published.definition.mode == Mode.CODE:
        stored = located("instance_id", code_run_id, name, chosen)
    else:
        stored = await _start_id(runtime, team, chosen)
    try:
        state, created = await _start(runtime, name, stored, value, version, team, started_by)
    except StartConflict:
        shown = local_instance_id(team, stored)  # a code run's is NAME/ID, as listed
        raise _at(
            "instance_id",
            f"instance {shown} already exists with another definition or input; "
            "choose another instance id",
            Conflict,
        ) from None
    except DefinitionNotFound as missing:
        raise NotFound(str(missing)) from None
    except InputRefused as refused:  # a machine's start data, which the engine reads
        raise _at("input", str(refused)) from None
    except ActiveExecutionExists as active:  # a machine's one active execution per parent
        raise _at(
            "input",
            f"{name} already has an active execution for parent {value['parent']}: "
            f"{local_instance_id(team, active.active_id)}; "
            "a parent has one at a time, so wait for it to end or cancel it",
            Conflict,
        ) from None
    runtime.watcher.nudge()
    return state, created


def _start_input(definition: Definition, input_text: str) -> Any:
    """The start input as JSON, within its activities' limit and, for a machine,
    naming no submitter; each refusal is the input field's."""
    value = parse_json(input_text, "input")
    limit, step = lifecycle.start_input_limit(definition)
    check_size(value, limit, "input", step)
    if definition.mode == Mode.MACHINE:
        _refuse_submitter(definition.name, value)
    return value


def _refuse_submitter(name: str, value: Any) -> None:
    """A start from the studio is its signed-in member's: who submitted an execution
    (its owner, team, role and key, which its advances are re-checked against and its
    submitter's operations answer to) is recorded only by a submit, from the caller's
    own identity, never typed into the start data."""
    if isinstance(value, dict) and (given := [f for f in SUBMITTED if f in value]):
        raise Invalid(
            f"a start's data may not set {', '.join(given)}: who submitted an execution is "
            f"recorded by a submit (POST /api/machines/{name}/executions), from the caller"
        )


def code_run_id(name: str, chosen: str) -> str:
    """A code-first run's id, ``<name>/<id>`` (seed 001: the id is the run's identity,
    which routes address without a lookup; the workflow's name is its team's alone)."""
    try:
        return run_id(name, chosen)
    except InputRefused as refused:
        raise Invalid(str(refused)) from None


async def _start_id(runtime: Runtime, team: str, chosen: str) -> str:
    """The stored id a start of the team's ``chosen`` (a step list or machine) takes."""
    located("instance_id", check_instance_id, team, chosen)
    own, scoped = await _lookup(runtime.primary, team, chosen)
    if own is None and scoped is not None:  # another team's, stored before namespacing
        raise _at("instance_id", "this instance id is taken; choose another", Conflict)
    return own.instance_id if own is not None else team_instance_id(team, chosen)


async def _start(
    runtime: Runtime,
    name: str,
    instance_id: str,
    value: Any,
    version: str,
    team: str,
    started_by: str = "",
) -> tuple[Instance, bool]:
    """``Client.start_or_join``; an existing instance of a version this process has not
    loaded yet is compared after reloading the registry."""
    client = runtime.client
    args = (name, instance_id, value, version, team, started_by)
    try:
        return await client.start_or_join(*args)
    except ReplayRejected:
        await client.registries.refresh()
        return await client.start_or_join(*args)
