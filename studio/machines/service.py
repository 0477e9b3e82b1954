"""Machine executions for a principal: the engine's host operations, with the engine's
refusals turned into the studio's errors.

The caller is the principal: its actor and team own what it submits, its role is the
submit's scope, and only it may read or cancel the execution (another team's looks
like none at all, another member's is refused). The machine must be the team's.
"""

from __future__ import annotations

from typing import Any

from engine import (
    AccessRefused,
    ActiveExecutionExists,
    ExecutionNotFound,
    Executions,
    FieldRefused,
    InputRefused,
    StateValue,
    SubmitConflict,
    Submitted,
)
from studio.definitions import service as definitions
from studio.errors import Conflict, Forbidden, Invalid, NotFound
from studio.principal import Principal
from studio.reasons import operator_reason
from studio.runtime import Runtime


async def submit(
    runtime: Runtime,
    principal: Principal,
    machine: str,
    parent: str,
    input: Any,
    key: str,
    version: str | None,
) -> tuple[Submitted, str]:
    """Submit an execution of the team's ``machine``; it and its status."""
    if version:
        await definitions.version_of(runtime, principal.team_id, machine, version)
    elif not await definitions.versions_of(runtime, principal.team_id, machine):
        raise NotFound(f"{machine} is not published in this team")
    executions = Executions(runtime.client)
    try:
        submitted = await executions.submit(
            machine,
            parent=parent,
            input=input,
            key=key,
            actor=principal.actor,
            team=principal.team_id,
            scope=str(principal.role or ""),
            version=version,
        )
    except (SubmitConflict, ActiveExecutionExists) as clash:
        raise Conflict(str(clash)) from None
    except FieldRefused as refused:
        raise Invalid.at(refused.field, str(refused)) from None
    except InputRefused as refused:
        raise Invalid(str(refused)) from None
    runtime.watcher.nudge()
    status = await executions.status(submitted.execution_id, principal.actor, principal.team_id)
    return submitted, status


async def state(runtime: Runtime, principal: Principal, machine: str, execution: str) -> StateValue:
    value = await _owned(runtime, principal, machine, execution, "state")
    assert isinstance(value, StateValue)
    return value


async def status(runtime: Runtime, principal: Principal, machine: str, execution: str) -> str:
    return await _owned(runtime, principal, machine, execution, "status")


async def cancel(
    runtime: Runtime,
    principal: Principal,
    machine: str,
    execution: str,
    reason: str,
    command_id: str | None,
) -> str:
    """The audited cancel, by the submitter; the status after it."""
    reason = operator_reason(reason)
    return await _owned(runtime, principal, machine, execution, "cancel", reason, command_id)


async def _owned(
    runtime: Runtime, principal: Principal, machine: str, execution: str, operation: str, *args: Any
) -> Any:
    """Run ``operation`` of ``Executions`` for the principal on its own execution."""
    run = getattr(Executions(runtime.client), operation)
    try:
        return await run(execution, principal.actor, principal.team_id, *args, machine=machine)
    except ExecutionNotFound as missing:
        raise NotFound(str(missing)) from None
    except AccessRefused as refused:
        raise Forbidden(str(refused)) from None
    except ValueError as refused:  # InputRefused, or a command id the audit cannot carry
        raise Invalid(str(refused)) from None
