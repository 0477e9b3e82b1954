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
from engine.model.definitions import Definition
from engine.model.transitions import Draft


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
