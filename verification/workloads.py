"""What drills run: the drill definitions and the instances a workload starts.

``drill.flow`` touches every worker boundary in a few seconds: an activity with a
compensation and a clean scripted failure (``reserve``), a short timer (``cool``, so
timer fires are reached), a signal (``go``, delivered by the harness or a signal
subprocess), a slow activity whose lease is renewed (``work``), and an async activity
that can block the event loop (``finish``). Unknown outcomes retry with the same key,
so a crash never leaves an instance waiting for an operator and the quiet phase can
demand that every instance ends.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.model.definitions import Definition
from engine.model.validation import parse_definition
from verification import drill_code
from verification.drill_app import EFFECT_TARGET, LOOP_TARGET, UNDO_TARGET, app
from verification.drill_machine import flow as machine_flow

FLOW = "drill.flow"
SIGNAL_STEP = "go"
RETRY = {"max_attempts": 8, "initial_delay": "100ms", "max_delay": "400ms"}


def _activity(name: str, target: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "kind": "activity",
        "target": target,
        "timeout": "20s",
        "input_limit": 4096,
        "result_limit": 4096,
        "retry": RETRY,
        "on_unknown": "retry_same_key",
        **extra,
    }


FLOW_DOCUMENT: dict[str, Any] = {
    "name": FLOW,
    "version": "1",
    "mode": "orchestration",
    "steps": [
        _activity(
            "reserve",
            EFFECT_TARGET,
            compensation={
                "target": UNDO_TARGET,
                "timeout": "20s",
                "result_limit": 4096,
                "retry": RETRY,
            },
        ),
        {"name": "cool", "kind": "timer", "timeout": "300ms"},
        {
            "name": SIGNAL_STEP,
            "kind": "signal",
            "target": "drill.go",
            "timeout": "1h",
            "input_limit": 1024,
        },
        _activity("work", EFFECT_TARGET),
        _activity("finish", LOOP_TARGET),
    ],
}


BURST = "drill.burst"
BURST_STEP = "work"
BURST_TIMEOUT_MS = 1500
BURST_DOCUMENT: dict[str, Any] = {
    "name": BURST,
    "version": "1",
    "mode": "orchestration",
    "steps": [_activity(BURST_STEP, EFFECT_TARGET, timeout=f"{BURST_TIMEOUT_MS}ms")],
}
"""One sync activity with a short timeout, for many at once (U3): scripted to take
most of that timeout, so an attempt that waited for a thread first runs out of it."""


def definitions() -> list[Definition]:
    """Every definition a drill schema gets."""
    flows = [parse_definition(FLOW_DOCUMENT), parse_definition(BURST_DOCUMENT)]
    code = app.workflow_for(drill_code.CODE, drill_code.VERSION)
    assert code is not None  # drill_app declares it
    return [*flows, machine_flow.definition, code.definition]


class Signalled:
    """Whatever a drill signals: the payload names the signal's id, so what the
    instance consumed shows which signal it was."""

    signal_id: str

    @property
    def signal_payload(self) -> dict[str, Any]:
        return {"from": self.signal_id}


def first_fails_once(count: int, slow: float, first: str, script: dict[str, Any]) -> list[dict]:
    """The inputs of a workload's ``count`` instances: each one's ``work`` takes ``slow``
    seconds, ``script`` shapes the handlers, and the first fails its step ``first`` once,
    cleanly (unless ``script`` says how it fails)."""
    inputs = []
    for n in range(count):
        data: dict[str, Any] = {"slow": {"work": slow}, **script}
        if n == 0:
            data.setdefault("fail", {first: 1})
        inputs.append(data)
    return inputs


@dataclass(frozen=True)
class Planned(Signalled):
    """One instance a workload starts, and the signal it will receive."""

    instance_id: str
    input: dict[str, Any]
    signal_id: str


@dataclass(frozen=True)
class Batch:
    """What every workload is: ``count`` instances of one drill workflow, named
    ``<prefix>-<marker><n>`` (the marker keeps flows, machines and code runs apart)."""

    prefix: str
    count: int = 3

    def ids(self, marker: str = "") -> list[str]:
        return [f"{self.prefix}-{marker}{n}" for n in range(self.count)]


@dataclass(frozen=True)
class Workload(Batch):
    """A set of instances of ``drill.flow``; ``script`` shapes their handlers."""

    slow: float = 0.8
    script: dict[str, Any] = field(default_factory=dict)

    def instances(self) -> list[Planned]:
        """Deterministic ids and inputs; the first instance also fails once cleanly."""
        inputs = first_fails_once(self.count, self.slow, "reserve", self.script)
        return [Planned(i, data, f"{i}-go") for i, data in zip(self.ids(), inputs, strict=True)]


@dataclass(frozen=True)
class Execution:
    """One execution of ``drill.machine`` a machine workload starts: it counts to
    ``steps`` (0: it rests until cancelled) and should end ``ends``."""

    execution_id: str
    steps: int
    ends: frozenset[str] = frozenset({"completed"})

    @property
    def start_data(self) -> dict[str, Any]:
        return {"input": self.steps, "parent": self.execution_id}


@dataclass(frozen=True)
class MachineWorkload(Batch):
    """A set of executions of ``drill.machine``, each counting ``steps`` advances."""

    steps: int = 5

    def executions(self) -> list[Execution]:
        return [Execution(execution, self.steps) for execution in self.ids("m")]


@dataclass(frozen=True)
class CodeRun(Signalled):
    """One run of ``drill.code`` a code workload starts, and the signal it will receive."""

    id: str
    input: dict[str, Any]
    signal_id: str

    @property
    def run_id(self) -> str:
        """The run's instance id: ``<workflow>/<id>``."""
        return f"{drill_code.CODE}/{self.id}"


@dataclass(frozen=True)
class CodeWorkload(Batch):
    """A set of runs of ``drill.code``; the first fails its first step once, cleanly."""

    slow: float = 0.4

    def runs(self) -> list[CodeRun]:
        inputs = first_fails_once(self.count, self.slow, drill_code.FIRST_STEP, {})
        return [CodeRun(i, data, f"{i}-go") for i, data in zip(self.ids("c"), inputs, strict=True)]
