"""Definitions: immutable, fingerprinted versions of a workflow.

Definitions are read from the JSON exchange format by
``engine.model.validation.parse_definition``.

The fingerprint is the SHA-256 of the canonical JSON of ``definition_document``, in
which every field participates with its default made explicit and durations written
as whole microseconds (so ``60s`` and ``1m`` are the same definition). ``deprecated``
participates too: it is part of the version as published. Deprecating a version that
is already published is a catalog flag kept by the store, which refuses new instances
and leaves the fingerprint pinned by existing instances unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from functools import cached_property
from typing import Any, Protocol

from engine.model.canonical import digest
from engine.model.durations import format_duration, to_micros


class Mode(StrEnum):
    """A definition's mode: how it is written and advanced (its parts: ``engine.modes``).

    The first two are step lists: the engine decides (orchestration) or events do
    (choreography). A ``machine`` is a bounded state machine whose ``manifest`` says
    its states and edges. A ``code`` workflow is an ``async def`` replayed against its
    journal; its manifest names the code and holds its digest and outline.
    """

    ORCHESTRATION = "orchestration"
    CHOREOGRAPHY = "choreography"
    MACHINE = "machine"
    CODE = "code"


class StepKind(StrEnum):
    ACTIVITY = "activity"
    SIGNAL = "signal"
    TIMER = "timer"
    CHILD = "child"
    PARALLEL = "parallel"
    JOIN = "join"
    RACE = "race"
    APPROVAL = "approval"


class UnknownPolicy(StrEnum):
    """What happens after an activity attempt's outcome is unknown.

    ``hold`` waits for an operator to resolve it. ``retry_same_key`` is for activities
    that declare themselves idempotent: a new attempt reuses the unknown attempt's
    idempotency key, so a repeated effect is deduplicated by the activity itself.
    """

    HOLD = "hold"
    RETRY_SAME_KEY = "retry_same_key"


@dataclass(frozen=True)
class RetryPolicy:
    """Attempts and exponential backoff: delay n = min(initial * 2^(n-1), max)."""

    max_attempts: int
    initial_delay: timedelta
    max_delay: timedelta

    def backoff(self, attempt: int) -> timedelta:
        """Delay before the attempt after ``attempt`` (attempt counts from 1)."""
        if attempt < 1:
            raise ValueError("attempt counts from 1")
        # Exact integer microseconds: initial * 2^(n-1) overflows a timedelta long before
        # attempt 1,000. Past max_delay's bit length the product exceeds it, so stop there.
        limit = to_micros(self.max_delay)
        delay = to_micros(self.initial_delay) << min(attempt - 1, limit.bit_length())
        return self.max_delay if delay >= limit else timedelta(microseconds=delay)


@dataclass(frozen=True)
class CompensationSpec:
    """The activity that undoes a completed activity, with its own limits and retries."""

    target: str
    timeout: timedelta
    result_limit: int
    retry: RetryPolicy


@dataclass(frozen=True)
class DefinitionRef:
    """The exact definition an instance is pinned to."""

    name: str
    version: str
    fingerprint: str

    def __str__(self) -> str:
        return f"{self.name}@{self.version}"

    def to_json(self) -> dict[str, str]:
        """The pin as JSON, the one shape histories, transitions and work carry it in."""
        return {"name": self.name, "version": self.version, "fingerprint": self.fingerprint}


@dataclass(frozen=True)
class Step:
    """One step; which fields matter depends on ``kind`` (see the README's table)."""

    name: str
    kind: StepKind
    target: str = ""
    timeout: timedelta | None = None
    input_limit: int = 0
    result_limit: int = 0
    retry: RetryPolicy | None = None
    compensation: CompensationSpec | None = None
    child_definition: DefinitionRef | None = None
    branches: tuple[str, ...] = ()
    fan_out_limit: int = 0
    on_unknown: UnknownPolicy = UnknownPolicy.HOLD


class Manifest(Protocol):
    """The body of a definition that is not a step list (a state machine's manifest)."""

    def document(self) -> dict[str, Any]:
        """Its fields in the definition document, every one explicit (fingerprinted)."""
        ...

    def exchange(self) -> dict[str, Any]:
        """Its fields in the exchange format (what the catalog stores): ``document``'s,
        plus what describes the version without being part of it (a code outline's
        line numbers, which move when a comment is added)."""
        ...


@dataclass(frozen=True)
class Definition:
    """A validated definition version. Build one with ``parse_definition``.

    A step list has ``steps``; a mode that is not a step list has a ``manifest`` and no
    steps. Only a manifest's fields enter its document, so step lists' documents (and
    fingerprints) are as they were before manifests existed.
    """

    name: str
    version: str
    mode: Mode
    deprecated: bool
    steps: tuple[Step, ...] = ()
    manifest: Manifest | None = None
    _index: dict[str, Step] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", {s.name: s for s in self.steps})

    @cached_property
    def fingerprint(self) -> str:
        return digest(definition_document(self))

    @property
    def ref(self) -> DefinitionRef:
        return DefinitionRef(self.name, self.version, self.fingerprint)

    def step(self, name: str) -> Step | None:
        """The step called ``name``, or None."""
        return self._index.get(name)

    @cached_property
    def owners(self) -> dict[str, str]:
        """Branch step name -> the parallel or race step that owns it."""
        return {
            branch: step.name
            for step in self.steps
            if step.kind in (StepKind.PARALLEL, StepKind.RACE)
            for branch in step.branches
        }


def definition_document(definition: Definition) -> dict[str, Any]:
    """The canonical document the fingerprint is computed over (every field explicit)."""
    if definition.manifest is not None:
        return _manifest_document(definition)
    return _document(definition, [_step_document(s, to_micros) for s in definition.steps])


def definition_to_json(definition: Definition) -> dict[str, Any]:
    """The exchange-format document, with only the fields each kind uses (a manifest
    has no durations to spell or defaults to drop: it gives its own, ``exchange``)."""
    if definition.manifest is not None:
        return {**_head(definition), **definition.manifest.exchange()}
    steps = [_compact(_step_document(s, format_duration)) for s in definition.steps]
    return _document(definition, steps)


def _head(definition: Definition) -> dict[str, Any]:
    """The fields every definition document has, whatever its mode."""
    return {
        "name": definition.name,
        "version": definition.version,
        "mode": definition.mode.value,
        "deprecated": definition.deprecated,
    }


def _document(definition: Definition, steps: list[dict[str, Any]]) -> dict[str, Any]:
    """A step list's documents: the definition's own fields, then its steps as given."""
    return {**_head(definition), "steps": steps}


def _manifest_document(definition: Definition) -> dict[str, Any]:
    assert definition.manifest is not None
    return {**_head(definition), **definition.manifest.document()}


def _step_document(step: Step, duration: Any) -> dict[str, Any]:
    def opt(value: timedelta | None) -> Any:
        return None if value is None else duration(value)

    def retry(policy: RetryPolicy | None) -> Any:
        if policy is None:
            return None
        return {
            "max_attempts": policy.max_attempts,
            "initial_delay": duration(policy.initial_delay),
            "max_delay": duration(policy.max_delay),
        }

    compensation = step.compensation
    child = step.child_definition
    return {
        "name": step.name,
        "kind": step.kind.value,
        "target": step.target,
        "timeout": opt(step.timeout),
        "input_limit": step.input_limit,
        "result_limit": step.result_limit,
        "retry": retry(step.retry),
        "compensation": None
        if compensation is None
        else {
            "target": compensation.target,
            "timeout": duration(compensation.timeout),
            "result_limit": compensation.result_limit,
            "retry": retry(compensation.retry),
        },
        "child_definition": None if child is None else child.to_json(),
        "branches": list(step.branches),
        "fan_out_limit": step.fan_out_limit,
        "on_unknown": step.on_unknown.value,
    }


def _compact(step: dict[str, Any]) -> dict[str, Any]:
    """Drop fields at their empty default so exported documents stay readable."""
    empty = (None, "", 0, [])
    out = {k: v for k, v in step.items() if v not in empty or k in ("name", "kind")}
    if out.get("on_unknown") == UnknownPolicy.HOLD.value:
        del out["on_unknown"]
    return out
