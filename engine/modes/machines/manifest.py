"""A state machine's manifest: its states, its allowed edges and its bounded behaviour.

The manifest is the body of a ``machine`` definition (``Definition.manifest``) and the
whole of what its fingerprint covers beside the name, version and deprecation: the
code of ``advance`` is not (history records states, never code paths). It holds the
seed's declarations (``function``, ``resource``, ``state``, ``initial``, ``terminal``,
``timers``, ``compensation``, ``grants``, ``max_attempts``, ``max_transitions``,
``retry``, ``concurrency``), the ``input`` type, the state family's variants with their
fields, and Wayline's ``transitions``: the edges an advance may take, which the studio
draws and replay enforces.

Lists that are sets (terminal states, edge targets, grants) are kept in one order
(variant order; grants sorted), so writing them in another order is the same machine
with the same fingerprint, as ``60s`` and ``1m`` are the same step-list timeout.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any


@dataclass(frozen=True)
class Variant:
    """One state of the machine: its name and its fields' names and types, in order."""

    name: str
    fields: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class MachineManifest:
    """A validated manifest (read by ``engine.modes.machines.validation``)."""

    function: str
    resource: str
    state: str
    variants: tuple[Variant, ...]
    input: str
    initial: str
    terminal: tuple[str, ...]
    timers: tuple[tuple[str, int], ...]
    transitions: tuple[tuple[str, tuple[str, ...]], ...]
    compensation: str | None
    grants: tuple[str, ...]
    max_attempts: int
    max_transitions: int
    retry: str
    concurrency: str

    @cached_property
    def _variants(self) -> dict[str, Variant]:
        return {v.name: v for v in self.variants}

    @cached_property
    def _edges(self) -> dict[str, tuple[str, ...]]:
        return dict(self.transitions)

    @cached_property
    def _timers(self) -> dict[str, int]:
        return dict(self.timers)

    def variant(self, name: str) -> Variant | None:
        """The variant called ``name``, or None."""
        return self._variants.get(name)

    def targets(self, state: str) -> tuple[str, ...]:
        """The states an advance of ``state`` may enter (none from a terminal state)."""
        return self._edges.get(state, ())

    def timer(self, state: str) -> int | None:
        """The seconds a timer state waits before its advance; None for other states."""
        return self._timers.get(state)

    def is_terminal(self, state: str) -> bool:
        return state in self.terminal

    def document(self) -> dict[str, Any]:
        """The manifest's fields of the definition document, every one explicit."""
        return {
            "function": self.function,
            "resource": self.resource,
            "state": {
                "name": self.state,
                "variants": [{"name": v.name, "fields": dict(v.fields)} for v in self.variants],
            },
            "input": self.input,
            "initial": self.initial,
            "terminal": list(self.terminal),
            "timers": dict(self.timers),
            "transitions": {source: list(targets) for source, targets in self.transitions},
            "compensation": self.compensation,
            "grants": list(self.grants),
            "max_attempts": self.max_attempts,
            "max_transitions": self.max_transitions,
            "retry": self.retry,
            "concurrency": self.concurrency,
        }

    def exchange(self) -> dict[str, Any]:
        """The exchange form is the canonical one: a manifest has nothing beside it."""
        return self.document()
