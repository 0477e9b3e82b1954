"""Moving a paused instance to another version, never one the judge refuses.

``record_migration`` re-judges the instance in the draft (the state the transition is
built on, so never a stale verdict) and, when it is compatible, appends the audited
``migrate`` command along the registered edge. A declared edge (one an operator
declared in the studio, with no code of its own) keeps the instance's input as it is:
its per-step progress, a machine's state and a run's journal are kept by replay, so the
input is all the migration event carries (``engine.replay.lifecycle``).
"""

from __future__ import annotations

from typing import Any

from engine.decide.compatibility import judge
from engine.decide.operator_actions import Action
from engine.decide.operator_commands import record_command
from engine.model.compatibility import IncompatibleInstances
from engine.model.definitions import Definition, DefinitionRef
from engine.model.errors import InputRefused
from engine.model.limits import MAX_REASON_LENGTH
from engine.model.transitions import Draft

SHOWN_FINGERPRINT = 12
"""Hex digits of each fingerprint the audited reason of a migration names."""


def migration_reason(reason: str, source: DefinitionRef, target: DefinitionRef) -> str:
    """The reason each command of a migration records: the operator's, then from which
    version and fingerprint to which (``ship v2 (order@1 3f2a… -> order@2 9bc1…)``), so
    the audit trail says who, why, and from what to what. InputRefused when the
    operator's reason leaves no room for the versions within MAX_REASON_LENGTH."""
    moved = (
        f"{source} {source.fingerprint[:SHOWN_FINGERPRINT]}… -> "
        f"{target} {target.fingerprint[:SHOWN_FINGERPRINT]}…"
    )
    text = f"{reason.strip()} ({moved})"
    if len(text) > MAX_REASON_LENGTH:
        room = MAX_REASON_LENGTH - len(moved) - 3
        raise InputRefused(f"the reason of a migration must be at most {room} characters")
    return text


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
        raise IncompatibleInstances(f"{verdict.line}; it was not migrated to {target.ref}")
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
