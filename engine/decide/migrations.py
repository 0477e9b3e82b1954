"""Moving a paused instance to another version, never one the judge refuses.

``record_migration`` re-judges the instance in the draft (the state the transition is
built on, so never a stale verdict) and, when it is compatible, appends the audited
``migrate`` command along the registered edge. A declared edge (one an operator
declared in the studio, with no code of its own) keeps the instance's input as it is:
its per-step progress, a machine's state and a run's journal are kept by replay, so the
input is all the migration event carries (``engine.replay.lifecycle``).

``migration_target`` is the one check of where an instance may go (the version exists,
an edge leads there, the judge's verdict), and ``migration_dry_run`` builds on a
throwaway draft the very commands ``Client.migrate`` commits one by one (pause if it
runs, migrate, resume what was paused), so a bulk migration's preview is read off the
engine's own rules.
"""

from __future__ import annotations

import contextlib
from datetime import datetime
from typing import Any

from engine.decide.compatibility import judge
from engine.decide.operator_actions import Action
from engine.decide.operator_commands import record_command
from engine.decide.previews import DRY_RUN_ID, ActionRequest, AlreadyThere
from engine.model.compatibility import IncompatibleInstances, Verdict
from engine.model.definitions import Definition, DefinitionRef
from engine.model.errors import DecisionRejected, DefinitionNotFound, InputRefused, RegistryError
from engine.model.instance import Instance, InstanceStatus
from engine.model.limits import MAX_REASON_LENGTH
from engine.model.registry import Registry
from engine.model.transitions import Draft
from engine.modes import decide

SHOWN_FINGERPRINT = 12
"""Hex digits of each fingerprint the audited reason of a migration names."""


def migration_reason(reason: str, source: DefinitionRef, target: DefinitionRef) -> str:
    """The reason each command of a migration records: the operator's, then from which
    version and fingerprint to which (``ship v2 (order@1 3f2a… -> order@2 9bc1…)``), so
    the audit trail says who, why, and from what to what. InputRefused when the
    operator's reason leaves no room for the versions within MAX_REASON_LENGTH."""
    text = f"{reason.strip()} ({_moved(source, target)})"
    if len(text) > MAX_REASON_LENGTH:
        room = reason_room(source, target)
        raise InputRefused(f"the reason of a migration must be at most {room} characters")
    return text


def reason_room(source: DefinitionRef, target: DefinitionRef) -> int:
    """The most characters an operator's reason for a migration from ``source`` to
    ``target`` may have: what MAX_REASON_LENGTH leaves beside the versions it names."""
    return MAX_REASON_LENGTH - len(_moved(source, target)) - len(" ()")


def _moved(source: DefinitionRef, target: DefinitionRef) -> str:
    return (
        f"{source} {source.fingerprint[:SHOWN_FINGERPRINT]}… -> "
        f"{target} {target.fingerprint[:SHOWN_FINGERPRINT]}…"
    )


def record_migration(
    draft: Draft,
    command_id: str,
    target: Definition,
    actor: str,
    reason: str,
    code: Any = None,
) -> None:
    """Append the audited migration of the draft's (paused) instance to ``target``.

    IncompatibleInstances (naming the instance and why) when the judge refuses it;
    RegistryError-based rejection when no edge is registered (replay's own check)."""
    state = draft.state
    assert state is not None
    verdict = judge(target, state, code)
    if not verdict.compatible:
        raise IncompatibleInstances.not_migrated(verdict, target.ref)
    edge = draft.registry.migration(target.name, state.definition.version, target.version)
    record_command(
        draft,
        command_id,
        Action.MIGRATE,
        actor,
        reason,
        target=target.ref,
        input=edge.apply(state.value("input")),
    )


def version_of(registry: Registry, state: Instance, version: str) -> Definition:
    """``version`` of the instance's definition name; DefinitionNotFound without it."""
    target = registry.get(state.definition.name, version)
    if target is None:
        raise DefinitionNotFound(f"{state.definition.name}@{version} is not published")
    return target


def migration_target(
    registry: Registry, state: Instance, to_version: str, code: Any = None
) -> tuple[Definition, Verdict]:
    """Where migrating ``state`` to ``to_version`` leads, and the judge's verdict on it.

    DefinitionNotFound for an unpublished version; DecisionRejected when no edge leads
    from the instance's version there (an operator declares edges; nothing is guessed)."""
    target = version_of(registry, state, to_version)
    try:
        registry.migration(target.name, state.definition.version, to_version)
    except RegistryError as missing:
        raise DecisionRejected(f"{missing}: declare the edge first") from None
    return target, judge(target, state, code)


def migration_dry_run(
    instance: Instance,
    registry: Registry,
    now: datetime,
    request: ActionRequest,
    code: Any = None,
) -> Draft:
    """Migrate ``instance`` to ``request.effect["version"]`` on a throwaway draft, as
    ``Client.migrate`` would with ``code`` (the target version's code where its mode
    runs code); raises (as a preview's refusal) when it would refuse. AlreadyThere when
    the instance already runs that version."""
    to_version = request.effect["version"]
    try:
        if version_of(registry, instance, to_version).ref == instance.definition:
            raise AlreadyThere(f"it already runs {instance.definition}")
        target, verdict = migration_target(registry, instance, to_version, code)
    except DefinitionNotFound as missing:
        raise ValueError(str(missing)) from None
    if not verdict.compatible:
        raise ValueError(f"incompatible: {verdict.reason}")
    draft = Draft(registry, instance, max(now, instance.updated_at))
    why = migration_reason("preview", instance.definition, target.ref)
    paused = instance.status is InstanceStatus.RUNNING
    if paused:
        record_command(draft, f"{DRY_RUN_ID}.pause", Action.PAUSE, "preview", why)
    record_migration(draft, f"{DRY_RUN_ID}.migrate", target, "preview", why, code)
    if paused:
        record_command(draft, f"{DRY_RUN_ID}.resume", Action.RESUME, "preview", why)
    with contextlib.suppress(DecisionRejected):  # a mode the engine does not orchestrate
        decide(draft)
    return draft
