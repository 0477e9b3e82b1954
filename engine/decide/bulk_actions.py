"""The operator actions that can be taken on many instances at once, and how each is
asked of one instance of the selection.

``BULK_ACTIONS`` is the one table: the studio offers what it lists, the API accepts
what it lists, and ``judge`` turns a bulk request into each instance's own request
(the step it acts on, its arguments) and previews it (``engine.decide.previews``).
An action that needs more than that per instance supplies its own ``prepare`` (the
step in doubt) or its own dry run: a migration along a declared edge is several
commands (pause, migrate, resume), built as ``Client.migrate`` builds them
(``engine.decide.migrations.migration_dry_run``), and an instance the compatibility
judge calls incompatible is refused with the judge's reason.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from engine.decide.audit import LIFECYCLE
from engine.decide.migrations import migration_dry_run
from engine.decide.operator_actions import Action
from engine.decide.previews import (
    ActionRequest,
    DryRun,
    Preview,
    dry_run,
    in_doubt_step,
    preview,
    refused,
)
from engine.model.instance import Instance
from engine.model.registry import Registry

RESOLUTIONS = ("succeeded", "failed", "absent")
"""How an unknown outcome is settled (the fold's ``activity_resolved`` codes)."""


class StepChoice(StrEnum):
    """Which step of each instance a bulk action acts on."""

    NONE = "none"
    """A lifecycle action: the instance itself."""
    IN_DOUBT = "in doubt"
    """The step the operator names, or else the instance's one activity in doubt."""


class BulkRequestRefused(ValueError):
    """A bulk request that cannot be asked. ``field`` is the one to change (``action``,
    ``step`` or an argument's name, as the API spells it), so a form can say it beside
    that field rather than above the whole form."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


Prepare = Callable[[Instance, ActionRequest], ActionRequest]
"""Turn the bulk's request into this instance's; ValueError says why it cannot apply."""
Check = Callable[[Mapping[str, Any]], None]
"""Check the arguments given once for every instance; BulkRequestRefused says what is
allowed, and of which argument."""


def _as_asked(instance: Instance, request: ActionRequest) -> ActionRequest:
    return request


def _in_doubt(instance: Instance, request: ActionRequest) -> ActionRequest:
    if request.step:
        return request
    step = in_doubt_step(instance)
    if step is None:
        raise ValueError("no activity is in doubt")
    return request.on(step)


def _no_check(arguments: Mapping[str, Any]) -> None:
    return None


def _check_version(arguments: Mapping[str, Any]) -> None:
    version = arguments.get("version")
    if not isinstance(version, str) or not version.strip():
        raise BulkRequestRefused("version", "choose the version to migrate to")


def _check_resolution(arguments: Mapping[str, Any]) -> None:
    if arguments.get("resolution") not in RESOLUTIONS:
        raise BulkRequestRefused("resolution", f"choose a resolution: {', '.join(RESOLUTIONS)}")
    if "result" in arguments and arguments["resolution"] != "succeeded":
        raise BulkRequestRefused("result", "only an outcome settled as succeeded carries a result")


@dataclass(frozen=True)
class BulkAction:
    action: Action
    label: str
    step: StepChoice = StepChoice.NONE
    arguments: tuple[str, ...] = ()
    """The effect's fields the operator gives once for every instance."""
    prepare: Prepare = _as_asked
    check: Check = _no_check
    run: DryRun = dry_run
    """How the action is built on an instance (one command, unless it says otherwise)."""


BULK_ACTIONS: dict[Action, BulkAction] = {
    b.action: b
    for b in (
        *(BulkAction(action, label) for action, label in LIFECYCLE.items()),
        BulkAction(
            Action.RETRY_ACTIVITY,
            "Retry the activity in doubt",
            StepChoice.IN_DOUBT,
            prepare=_in_doubt,
        ),
        BulkAction(
            Action.RESOLVE_ACTIVITY,
            "Resolve the unknown outcome",
            StepChoice.IN_DOUBT,
            ("resolution", "result"),
            _in_doubt,
            check=_check_resolution,
        ),
        BulkAction(
            Action.MIGRATE,
            "Migrate to version",
            arguments=("version",),
            check=_check_version,
            run=migration_dry_run,
        ),
    )
}
"""Every bulk action, in the order the studio offers them."""


def bulk_request(
    action: Action | str, step: str = "", arguments: Mapping[str, Any] | None = None
) -> ActionRequest:
    """The request of a bulk action, checked: BulkRequestRefused says what is wrong, what
    is allowed and which field (an unknown action, a step it does not take, a missing or
    extra argument)."""
    try:
        bulk = BULK_ACTIONS[Action(action)]
    except (ValueError, KeyError):
        allowed = ", ".join(a.value for a in BULK_ACTIONS)
        message = f"bulk action {action!r} is not one of: {allowed}"
        raise BulkRequestRefused("action", message) from None
    if step and bulk.step is StepChoice.NONE:
        raise BulkRequestRefused("step", f"{bulk.action.value} acts on instances, not on a step")
    given = {k: v for k, v in (arguments or {}).items() if v is not None}
    extra = set(given) - set(bulk.arguments)
    if extra:
        named = sorted(extra)
        raise BulkRequestRefused(named[0], f"{bulk.action.value} takes no {', '.join(named)}")
    bulk.check(given)
    return ActionRequest(bulk.action, step, given)


def judge(
    instance: Instance,
    registry: Registry,
    now: datetime,
    request: ActionRequest,
    code: Any = None,
) -> Preview:
    """The preview of ``request`` as a bulk action on ``instance``: prepared for it
    (``BulkAction.prepare``), then previewed; refused when it cannot even be asked.
    ``code`` is given to a dry run that replays code (a migration's: the target
    version's ``CodeWorkflow``), and only to one."""
    bulk = BULK_ACTIONS[request.action]
    try:
        own = bulk.prepare(instance, request)
    except ValueError as cannot:
        return refused(instance, request, str(cannot))
    run = bulk.run if code is None else functools.partial(bulk.run, code=code)
    return preview(instance, registry, now, own, run)
