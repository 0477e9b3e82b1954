"""Where drill plans and the definitions they drill come from: files, flags, a server.

A plan comes from a JSON file (``--plan``) or from the command line's ``--definition``
and ``--pin`` flags. Its definition is a file (``definition_file``, relative to the
plan; or ``--definition FILE.json``) or a version published on the server
(``NAME@VERSION``, read from ``--dsn``'s schema: the team's own, read only), or, for
a code-first workflow, the one its ``app`` declares. Either way the plan is then
checked against it (``verification.plan.check_against``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine import ActivityRegistry, load_app
from engine.model.definitions import Definition, Mode, StepKind
from engine.model.errors import WaylineError
from engine.model.files import load_definition
from engine.store import catalog
from engine.store.migrations import MigrationError
from engine.store.store import Store
from verification import plan as plans
from verification.plan_drills import Drilled

MAX_PLAN_BYTES = 1024 * 1024
"""Size of a plan file; the full matrix of a large definition stays well below it."""


def read_plan(path: Path) -> plans.Plan:
    """The plan in ``path``; PlanInvalid saying what is wrong with the file or the plan."""
    return plans.whole(read_shaped(path))


def read_shaped(path: Path) -> plans.Shaped:
    """The plan in ``path`` as far as its shape allows (``plans.read``); PlanInvalid
    saying what is wrong with the file."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise plans.PlanInvalid([f"{path}: cannot be read ({exc.strerror})"]) from exc
    if len(data) > MAX_PLAN_BYTES:
        raise plans.PlanInvalid([f"{path}: larger than {MAX_PLAN_BYTES} bytes"])
    try:
        document = json.loads(data)
    except ValueError as exc:
        raise plans.PlanInvalid([f"{path}: not JSON ({exc})"]) from exc
    shaped = plans.read(document)
    if not shaped.plan.definition_file:
        return shaped
    resolved = str((path.parent / shaped.plan.definition_file).resolve())
    plan = plans.Plan(**{**shaped.plan.__dict__, "definition_file": resolved})
    return plans.Shaped(plan, shaped.problems, shaped.pin_at)


def plan_from_flags(definition: str, pins: list[str], app: str, input_: Any) -> plans.Plan:
    """The plan ``--definition NAME@VERSION|FILE --pin ... [--app]`` describes."""
    return plans.whole(shaped_from_flags(definition, pins, app, input_))


def shaped_from_flags(definition: str, pins: list[str], app: str, input_: Any) -> plans.Shaped:
    """``plan_from_flags``'s plan as far as its shape allows (``plans.read``)."""
    document: dict[str, Any] = {"pins": [p.strip() for p in pins], "input": input_}
    if definition.endswith(".json") or Path(definition).is_file():
        document["definition_file"] = str(Path(definition).resolve())
    else:
        document["definition"] = definition
    if app:
        document["app"] = app
    return plans.read(document)


async def definition_of(plan: plans.Plan, dsn: str | None, schema: str) -> Definition:
    """The definition ``plan`` drills; PlanInvalid when it cannot be found or read. A
    code-first workflow's is its code's, declared by the plan's app (no server needed)."""
    declared = _declared(plan)
    if declared is not None:
        return declared
    if plan.definition_file:
        try:
            return load_definition(Path(plan.definition_file))
        except WaylineError as exc:
            raise plans.PlanInvalid([f"definition_file: {exc}"]) from exc
    name, _, version = plan.definition.rpartition("@")
    if not dsn:
        raise plans.PlanInvalid(
            [
                f"definition: {plan.definition} is read from the server: give --dsn (its "
                f"schema --schema), or give the definition's JSON file instead{_undeclared(plan)}"
            ]
        )
    try:
        store = await Store.open(dsn, schema)
    except MigrationError as exc:  # most often a mistyped --schema: not found there either
        raise plans.PlanInvalid([f"definition: {plan.definition} cannot be read: {exc}"]) from None
    try:
        found = (await catalog.load_registry(store)).get(name, version)
    finally:
        await store.close()
    if found is None:
        raise plans.PlanInvalid(
            [f"definition: {plan.definition} is not published in {schema}{_undeclared(plan)}"]
        )
    return found


def _undeclared(plan: plans.Plan) -> str:
    """What to add when ``plan.app`` does not declare the code workflow the plan names
    (a misspelt name or version there is the usual reason a code plan is not found)."""
    if not plan.app:
        return ""
    declared = ", ".join(map(str, _team_app(plan).workflows)) or "none"
    return f"; nor does {plan.app} declare it as a code workflow (it declares {declared})"


def borrowed_server(plan: plans.Plan) -> str:
    """Why ``plan`` cannot run on the server ``--dsn`` names, and what to do instead."""
    labels = ", ".join(p.label for p in plan.pins if p.fault == plans.RESTART_DATABASE)
    instead = " with its definition as definition_file" if plan.definition and not plan.app else ""
    return (
        f"pins {labels}: {plans.OWNED_SERVER_NEEDED} (--dsn names a server given to it): run "
        f"the plan without --dsn{instead}, and a private cluster is started for it"
    )


def _team_app(plan: plans.Plan) -> ActivityRegistry:
    """The app ``plan`` names, loaded here as its drill's workers will load it: a module
    that does not import is refused before any drill starts, not as a worker that exits."""
    try:
        return load_app(plan.app)
    except WaylineError as exc:
        raise plans.PlanInvalid([f"app: {exc}"]) from exc


def _handlers_missing(plan: plans.Plan, definition: Definition) -> None:
    """PlanInvalid naming each activity and compensation target of a step list that
    ``plan.app`` has no handler for: no worker would ever claim that step's work, and
    the drill would wait for it until its time ran out."""
    if not plan.app or definition.mode is not Mode.ORCHESTRATION:
        return
    app = _team_app(plan)
    missing = [f"{target} ({what})" for what, target in _targets(definition) if not app.get(target)]
    if missing:
        handled = ", ".join(t for t in app.targets if app.get(t) is not None) or "none"
        raise plans.PlanInvalid(
            [f"app: {plan.app} has no handler for {', '.join(missing)}; it handles {handled}"]
        )


def _targets(definition: Definition) -> list[tuple[str, str]]:
    """Each activity's target and its compensation's, in step order, with what runs it."""
    found = []
    for step in definition.steps:
        if step.kind is StepKind.ACTIVITY:
            found.append((f"step {step.name}", step.target))
        if step.compensation:
            found.append((f"{step.name}'s compensation", step.compensation.target))
    return found


def _declared(plan: plans.Plan) -> Definition | None:
    """The code-first workflow ``plan.definition`` as ``plan.app`` declares it, if so."""
    if not (plan.app and plan.definition):
        return None
    app = _team_app(plan)
    name, _, version = plan.definition.rpartition("@")
    found = app.workflow_for(name, version)
    return found.definition if found is not None else None


async def drilled(
    shaped: plans.Shaped, dsn: str | None, schema: str, for_each_pin: bool = False
) -> list[Drilled]:
    """The drills of ``shaped``'s plan: one, or one per pin; each checked against its
    definition. PlanInvalid lists the plan's every problem at once: its shape's, then
    (when the definition can be found) its well-shaped parts' against the definition.
    A plan that restarts the database is refused on a server given by ``dsn``."""
    plan, problems = shaped.plan, shaped.problems
    if not shaped.definable:
        raise plans.PlanInvalid(problems)
    if dsn and plans.restarts(plan):
        raise plans.PlanInvalid([*problems, borrowed_server(plan)])
    try:
        definition = await definition_of(plan, dsn, schema)
    except plans.PlanInvalid as invalid:
        raise plans.PlanInvalid([*problems, *invalid.problems]) from None
    problems = plans.checked(shaped, definition)
    if problems:
        raise plans.PlanInvalid(problems)
    _handlers_missing(plan, definition)
    chosen = plans.for_each_pin(plan) if for_each_pin and plan.pins else [plan]
    return [Drilled(p, definition) for p in chosen]
