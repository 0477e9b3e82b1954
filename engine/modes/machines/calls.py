"""What a machine's code is given: ``MachineCall``, and the typed values it carries.

An advance receives the execution's parent and input and its current state as the
variant dataclass of the machine's family, and returns the next state as one. Its
database writes go through ``execute``, on the connection of the very transaction that
records the new state, so they commit exactly when that state does and roll back with
it (retry ``transactional``). It must not commit, roll back or call out of the
database itself: a retried advance would repeat such an effect (the seed forbids them).

The statements run as the database role the machine's grants name (``grants``): one
they do not allow raises ``GrantDenied``, and the execution ends dead.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.abc import Params, Query

from engine.model.errors import InputRefused, WaylineError
from engine.model.instance import Instance
from engine.modes.machines.declaration import Machine
from engine.modes.machines.manifest import MachineManifest
from engine.modes.machines.standing import as_variant, state_value
from engine.modes.machines.start_data import StartData, read_start_data
from engine.modes.machines.states import MachineState


class GrantDenied(BaseException):
    """The database refused a statement of ``MachineCall.execute``: the machine's grants
    do not allow it (insufficient_privilege). The execution ends dead, whatever the code
    does: like ``asyncio.CancelledError``, it is no ``Exception``, so an advance's
    ``except Exception`` does not swallow it (its transaction could not commit anyway)."""


@dataclass(frozen=True)
class MachineCall:
    """One advance (or compensation) attempt of execution ``execution_id``."""

    execution_id: str
    parent: str
    input: Any
    state: MachineState
    attempt: int
    connection: psycopg.AsyncConnection = dataclasses.field(repr=False)

    async def execute(self, query: Query, params: Params | None = None) -> list[tuple[Any, ...]]:
        """Run a statement in the attempt's transaction; its rows (none for a write).
        GrantDenied when the machine's grants do not allow it."""
        try:
            cursor = await self.connection.execute(query, params)
        except psycopg.errors.InsufficientPrivilege as exc:
            raise GrantDenied("a statement the machine's grants do not allow") from exc
        return await cursor.fetchall() if cursor.description else []


class StateUnreadable(ValueError):
    """A recorded state or start the machine's code cannot take (the execution is dead)."""


def decode(flow: Machine, instance: Instance) -> MachineState:
    """The execution's current state as ``flow``'s code has it (its variant dataclass)."""
    try:
        return as_variant(state_value(instance), flow.family)
    except (WaylineError, TypeError, ValueError) as exc:
        raise StateUnreadable(f"the state of {instance.instance_id} does not fit its code") from exc


def encode(flow: Machine, state: object) -> tuple[str, dict[str, Any]]:
    """The name and fields of a state ``flow``'s advance returned."""
    if type(state) not in flow.family._variants:
        raise StateUnreadable(
            f"the advance returned {type(state).__name__}, not a state of {flow.family.__name__}"
        )
    return type(state).__name__, dataclasses.asdict(state)  # type: ignore[call-overload]


def start_of(instance: Instance) -> StartData:
    """What the execution was started with (``start_data``)."""
    assert instance.spec is not None and isinstance(instance.spec.manifest, MachineManifest)
    try:
        return read_start_data(instance.spec.manifest, json.loads(instance.input or "null"))
    except (InputRefused, ValueError) as exc:
        raise StateUnreadable(f"the start data of {instance.instance_id} is unreadable") from exc
