"""Drill plans on state machines: what a step of a machine is, and how its stubs move it.

A machine's work is its *advance*: one call of its code, run under a lease inside the
transaction that records the state it returns (retry ``transactional``). The engine's
fault points count that work as the work of the state it runs *from*: an advance's
payload names that state as its step (``engine.modes.machines.decide``), so the pin
``InReview:before_commit:kill`` hits the advance that leaves ``InReview``. A machine's
steps are therefore its states that advance (every state but the terminal ones), and
an advance reaches the claim, the COMMIT of its transaction (before and after it) and
the renewal of its lease while it runs (``MACHINE_BOUNDARIES``). It has no attempt
bracket and no handler outcome apart from its commit (its writes and its state commit
together), no signal (a timer fires inside the advance's own transaction), so
``after_attempt_start``, ``after_handler``, ``after_timer_fire``, ``before_signal_ack``
and ``duplicate_signal`` do not apply.

A stub says what a state's advance does (``verification.plan.Stub``): ``succeed``
enters ``result``, a state name or ``{"state": NAME, "fields": {...}}`` (by default
the next state on a shortest way to a terminal state), each field not given its
type's zero; ``fail`` raises in its first ``times`` attempts (all when 0: the execution
then ends dead); ``slow`` takes ``seconds`` first. An advance commits with its state or
not at all, so there is no ``unknown`` outcome and no effect outside the transaction to
repeat. Everything here is pure: the manifest in, names and problems out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from engine.model.definitions import Definition
from engine.modes.machines.field_types import FIELD_TYPES, value_problem
from engine.modes.machines.manifest import MachineManifest
from engine.worker.faults import Boundary

MACHINE_BOUNDARIES = (
    Boundary.AFTER_CLAIM,
    Boundary.BEFORE_COMMIT,
    Boundary.AFTER_COMMIT,
    Boundary.IN_LEASE_RENEWAL,
)
"""The boundaries a machine's advance reaches (see the module)."""
MACHINE_BEHAVIOURS = ("succeed", "fail", "slow")
ARROW = " -> "


class Behaviour(Protocol):
    """What a plan's stub says of one state's advance."""

    @property
    def behaviour(self) -> str: ...

    @property
    def result(self) -> Any: ...

    @property
    def times(self) -> int: ...


def manifest_of(definition: Definition) -> MachineManifest:
    """The machine manifest of a ``machine`` definition."""
    assert isinstance(definition.manifest, MachineManifest)
    return definition.manifest


def advancing(manifest: MachineManifest) -> list[str]:
    """The machine's steps: its states that advance, in the order they are declared."""
    return [v.name for v in manifest.variants if manifest.targets(v.name)]


def default_next(manifest: MachineManifest, state: str) -> str:
    """The state a succeeding stub of ``state`` enters when its plan names none: the one
    nearest to a terminal state (the first declared of those)."""
    distance = _to_terminal(manifest)
    targets = manifest.targets(state)
    return min(targets, key=lambda t: (distance.get(t, len(manifest.variants)), targets.index(t)))


def _to_terminal(manifest: MachineManifest) -> dict[str, int]:
    """Each state's fewest advances to a terminal state (absent: it never ends)."""
    distance = dict.fromkeys(manifest.terminal, 0)
    changed = True
    while changed:
        changed = False
        for source, targets in manifest.transitions:
            near = [distance[t] + 1 for t in targets if t in distance]
            if near and min(near) < distance.get(source, len(manifest.variants) + 1):
                distance[source], changed = min(near), True
    return distance


def entered(manifest: MachineManifest, state: str, result: Any) -> tuple[str, dict[str, Any]]:
    """The state (and its fields) a succeeding advance of ``state`` enters when its stub
    says ``result``; ValueError saying what is wrong and what is allowed."""
    if result is None:
        name, given = default_next(manifest, state), {}
    elif isinstance(result, str):
        name, given = result, {}
    elif isinstance(result, dict) and isinstance(result.get("state"), str):
        name, given = result["state"], result.get("fields", {})
        if set(result) - {"state", "fields"} or not isinstance(given, dict):
            raise ValueError('must be a state name or {"state": NAME, "fields": {...}}')
    else:
        raise ValueError('must be a state name or {"state": NAME, "fields": {...}}')
    targets = manifest.targets(state)
    if name not in targets:
        raise ValueError(f"{state} cannot enter {name!r}; it may enter {', '.join(targets)}")
    variant = manifest.variant(name)
    assert variant is not None
    types = dict(variant.fields)
    problems = [f"{name} has no field {f!r}" for f in given if f not in types]
    problems += [
        f"fields.{f} {problem}"
        for f, value in given.items()
        if f in types and (problem := value_problem(types[f], value))
    ]
    if problems:
        raise ValueError("; ".join(problems))
    return name, {f: given.get(f, FIELD_TYPES[t]()) for f, t in variant.fields}


def walk(manifest: MachineManifest, stubs: Mapping[str, Behaviour]) -> list[str]:
    """The states whose advance runs, in order, when the plan's stubs drive the
    machine from its initial state: until a terminal state, an advance that fails every
    attempt, a state seen before (the stubs loop: it ends dead when its transitions run
    out), or ``max_transitions``. A stub that ``entered`` refuses ends it too."""
    path, state = [], manifest.initial
    while state in advancing(manifest) and state not in path:
        path.append(state)
        stub = stubs.get(state)
        if len(path) > manifest.max_transitions or (stub and _fails_for_good(manifest, stub)):
            break
        try:
            state, _ = entered(manifest, state, stub.result if stub else None)
        except ValueError:
            break
    return path


def _fails_for_good(manifest: MachineManifest, stub: Behaviour) -> bool:
    return stub.behaviour == "fail" and not 0 < stub.times < manifest.max_attempts


def route(path: list[str]) -> str:
    """A walk as a person reads it: ``Submitted -> InReview``."""
    return ARROW.join(path) or "(no advance)"
