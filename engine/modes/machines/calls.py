"""What a machine's code is given: ``MachineCall``, and the typed values it carries.

An advance receives the execution's parent and input and its current state as the
variant dataclass of the machine's family, and returns the next state as one. Its
database writes go through ``execute``, on the connection of the very transaction that
records the new state, so they commit exactly when that state does and roll back with
it (retry ``transactional``). It must not commit, roll back or call out of the
database itself: a retried advance would repeat such an effect (the seed forbids them).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.abc import Params, Query

from engine.modes.machines.declaration import Machine
from engine.modes.machines.states import MachineState


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
        """Run a statement in the attempt's transaction; its rows (none for a write)."""
        cursor = await self.connection.execute(query, params)
        return await cursor.fetchall() if cursor.description else []


class StateUnreadable(ValueError):
    """A recorded state or input the machine's code cannot take (the execution is dead)."""


def decode(flow: Machine, name: str, data: str | None) -> MachineState:
    """The variant ``name`` with the recorded fields ``data``, as ``flow``'s code has it."""
    family = {cls.__name__: cls for cls in flow.family._variants}
    cls = family.get(name)
    if cls is None:
        raise StateUnreadable(f"{name} is not a state of {flow.family.__name__} in this code")
    try:
        return cls(**(json.loads(data) if data is not None else {}))
    except (TypeError, ValueError) as exc:
        raise StateUnreadable(f"the recorded fields of {name} do not fit its class") from exc


def encode(flow: Machine, state: object) -> tuple[str, dict[str, Any]]:
    """The name and fields of a state ``flow``'s advance returned."""
    if type(state) not in flow.family._variants:
        raise StateUnreadable(
            f"the advance returned {type(state).__name__}, not a state of {flow.family.__name__}"
        )
    return type(state).__name__, dataclasses.asdict(state)  # type: ignore[call-overload]


def start_data(input_text: str | None) -> tuple[str, Any]:
    """The parent and the input an execution was started with (its start data)."""
    data = json.loads(input_text) if input_text else {}
    if not isinstance(data, dict):
        raise StateUnreadable("the start data of a machine is an object with parent and input")
    parent = data.get("parent", "")
    if not isinstance(parent, str):
        raise StateUnreadable("the parent of a machine execution is text")
    return parent, data.get("input")
