"""Declaring a machine in Python: ``machine(...)`` and ``@flow.advance``.

``machine`` takes the seed's declarations as Python values (the state family and its
variants as classes, the input as a built-in type) and writes the same JSON document a
manifest file holds; that document is then validated by the very reader that reads
files (``parse_definition``), so both forms obey the same rules, report the same
messages and, for one machine, have the same fingerprint. Every declaration is a
required keyword except ``compensation``, which the seed makes optional.

``function`` and ``compensation`` name the code by the names a worker's app binds to
it, as an activity's ``target`` does: a manifest published from a file runs with the
app that declares the same machine. ``@flow.advance`` records the function for that
app; running it is the worker's part (see the package's docstring).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.model.definitions import Definition, definition_to_json
from engine.model.validation import parse_definition
from engine.modes.machines.field_types import type_name
from engine.modes.machines.states import MachineState, family_document, is_family, seal

Advance = Callable[..., Any]


@dataclass
class Machine:
    """A declared machine: its validated definition and, once registered, its advance."""

    definition: Definition
    family: type[MachineState]
    advance_function: Advance | None = field(default=None)
    compensation_function: Advance | None = field(default=None)

    @property
    def document(self) -> dict[str, Any]:
        """The JSON manifest document (what ``wayline definition check`` reads)."""
        return definition_to_json(self.definition)

    def advance(self, function: Advance) -> Advance:
        """Record ``function`` as the machine's advance (a decorator); once only."""
        if self.advance_function is not None:
            raise TypeError(f"{self.definition.ref} already has an advance")
        self.advance_function = _coroutine(function, "advance")
        return function

    def compensate(self, function: Advance) -> Advance:
        """Record ``function`` as the compensation a cancellation runs (a decorator)."""
        if self.definition.manifest.compensation is None:
            raise TypeError(f"{self.definition.ref} declares no compensation")
        if self.compensation_function is not None:
            raise TypeError(f"{self.definition.ref} already has a compensation")
        self.compensation_function = _coroutine(function, "compensation")
        return function


def _coroutine(function: Advance, what: str) -> Advance:
    """An advance runs inside a database transaction and awaits its statements: it must
    be an ``async def``."""
    if not inspect.iscoroutinefunction(function):
        raise TypeError(f"the {what} {function.__name__} must be an async def")
    return function


def machine(
    name: str,
    *,
    version: str,
    function: str,
    state: type[MachineState],
    input: type,
    initial: type,
    terminal: Sequence[type],
    timers: Mapping[type, int],
    transitions: Mapping[type, Sequence[type]],
    grants: Sequence[str],
    resource: str,
    max_attempts: int,
    max_transitions: int,
    retry: str,
    concurrency: str,
    compensation: str | None = None,
) -> Machine:
    """Declare a machine; DefinitionInvalid lists every broken rule, as for a file."""
    if not is_family(state):
        raise TypeError("state must be a state family (a direct subclass of MachineState)")
    document = {
        "name": name,
        "version": version,
        "mode": "machine",
        "function": function,
        "resource": resource,
        "state": family_document(state),
        "input": type_name(input),
        "initial": _name(initial),
        "terminal": [_name(t) for t in terminal],
        "timers": {_name(s): seconds for s, seconds in timers.items()},
        "transitions": {_name(s): [_name(t) for t in ts] for s, ts in transitions.items()},
        "compensation": compensation,
        "grants": list(grants),
        "max_attempts": max_attempts,
        "max_transitions": max_transitions,
        "retry": retry,
        "concurrency": concurrency,
    }
    definition = parse_definition(document)
    seal(state, str(definition.ref))
    return Machine(definition, state)


def _name(state: Any) -> Any:
    """A state class by its name (anything else as it is, for validation to report)."""
    return state.__name__ if isinstance(state, type) else state
