"""A plan's run as the graph shows it: each pin armed, fired or never fired, then per
node the outcome in the operator's words.

While the drill runs, the pins that fired are read from the drill's boundary report
(``boundaries.jsonl`` in its artifacts, written by the worker the moment a fault acts),
so a marker turns as its fault fires, not when the drill ends. Once the drill is
recorded, its plan result (``verification.plan_drills``: state lines, findings with
their step, effects per idempotency key, history) is laid out per node. A checker
violation names an event; it is explained on the node that event belongs to, or above
the graph when it names none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.worker.faults import Action, Boundary, Fault
from studio.drills.service import finding
from verification import plan as plans
from verification.fault_plan import BoundaryReport
from verification.findings import NAMES
from verification.plan_drills import INSTANCE
from verification.plan_report import effect_line

REPORT = "boundaries.jsonl"


@dataclass
class PinState:
    label: str
    boundary: str
    fault: str
    state: str
    """``armed`` (not fired yet), ``fired`` or ``never fired`` (the drill ended)."""


@dataclass
class NodeOutcome:
    step: str
    pins: list[PinState] = field(default_factory=list)
    state: list[str] = field(default_factory=list)
    effects: list[str] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)
    history: list[str] = field(default_factory=list)

    @property
    def css(self) -> str:
        """How the node is coloured: broken, fired or armed."""
        if self.findings:
            return "drill-violated"
        if any(p.state == "fired" for p in self.pins):
            return "drill-fired"
        return "drill-armed" if self.pins else ""


@dataclass
class RunView:
    status: str
    """running, finished or error: the job's (a drill's verdict comes before its run is
    recorded: ``verdict`` is then set while the status is still running)."""
    verdict: str = ""
    nodes: dict[str, NodeOutcome] = field(default_factory=dict)
    instance: list[str] = field(default_factory=list)
    invariants: list[tuple[str, str, int, int]] = field(default_factory=list)
    """(key, name, times checked, times broken)."""
    recovery_seconds: float | None = None
    findings: list[str] = field(default_factory=list)
    """Violations that name no step."""
    history: list[str] = field(default_factory=list)
    drill_id: str = ""

    @property
    def fired(self) -> int:
        return sum(p.state == "fired" for n in self.nodes.values() for p in n.pins)

    def instance_url(self, run_id: str) -> str:
        """The drilled instance's captured history (its schema is dropped after the run)."""
        if not (run_id and self.drill_id):
            return ""
        return f"/drills/runs/{run_id}/drills/{self.drill_id}/instances/{INSTANCE}"


def pin_states(pins: list[plans.Pin], fired: set[str], ended: bool) -> dict[str, NodeOutcome]:
    nodes: dict[str, NodeOutcome] = {}
    for pin in pins:
        state = "fired" if pin.label in fired else "never fired" if ended else "armed"
        node = nodes.setdefault(pin.step, NodeOutcome(pin.step))
        node.pins.append(PinState(pin.label, pin.boundary, pin.fault, state))
    return nodes


def fired_so_far(report: Path, pins: list[plans.Pin]) -> set[str]:
    """The worker pins the drill's boundary report shows fired (none before it exists)."""
    if not report.is_file():
        return set()
    read = BoundaryReport.read(report)
    return {
        p.label
        for p in pins
        if p.fault in plans.WORKER_FAULTS
        and read.has_fired(Fault(Boundary(p.boundary), p.hit, Action(p.fault), p.step))
    }


def live(status: str, pins: list[plans.Pin], report: Path | None) -> RunView:
    """The run while its drill has not ended: pins armed or fired."""
    fired = fired_so_far(report, pins) if report else set()
    return RunView(status, nodes=pin_states(pins, fired, ended=False))


def finished(drill: dict[str, Any], pins: list[plans.Pin]) -> RunView:
    """The run once its drill ended: its scorecard entry laid out per node."""
    result = (drill.get("extra") or {}).get("plan") or {}
    fired = {p["label"] for p in result.get("pins", []) if p.get("fired")}
    view = RunView("finished", drill.get("verdict", ""), pin_states(pins, fired, ended=True))
    view.drill_id = drill.get("id", "")
    view.recovery_seconds = result.get("recovery_seconds")
    view.invariants = [
        (key, NAMES.get(key, ""), counts[0], counts[1])
        for key, counts in (drill.get("invariants") or {}).items()
    ]
    for line in result.get("state", []):
        step, _, _ = line.partition(":")
        if step == "instance":
            view.instance.append(line)
        else:
            _node(view, step.removesuffix(" compensation")).state.append(line)
    for effect in result.get("effects", []):
        step = effect["step"].removesuffix(" compensation")
        _node(view, step).effects.append(effect_line(effect))
    steps_at: dict[int, str] = {}
    for event in result.get("history", []):
        view.history.append(_event(event))
        if event.get("step"):
            steps_at[event["seq"]] = event["step"]
            _node(view, event["step"]).history.append(_event(event))
    _place_findings(view, result.get("findings", []), drill.get("failures") or [], steps_at)
    return view


def _node(view: RunView, step: str) -> NodeOutcome:
    return view.nodes.setdefault(step, NodeOutcome(step))


def _event(event: dict[str, Any]) -> str:
    attempt = f" (attempt {event['attempt']})" if event.get("attempt") else ""
    return f"{event['seq']} {event['kind']}{' ' + event['step'] if event['step'] else ''}{attempt}"


def _place_findings(
    view: RunView, own: list[dict[str, str]], failures: list[str], steps_at: dict[int, str]
) -> None:
    """The plan's findings on their step; each other failure on the step of the event
    it names, or above the graph."""
    for item in own:
        _node(view, item["step"]).findings.append(item["text"])
    placed = {item["text"] for item in own}
    for text in failures:
        if text in placed:
            continue
        named = finding(text)
        step = _step_near(steps_at, named.sequence) if named.instance_id == INSTANCE else ""
        if step:
            _node(view, step).findings.append(text)
        else:
            view.findings.append(text)


def _step_near(steps_at: dict[int, str], sequence: int) -> str:
    """The step of the event at ``sequence`` or, for an event of the instance as a
    whole, of the last step event before it."""
    before = [seq for seq in steps_at if seq <= sequence]
    return steps_at[max(before)] if sequence and before else ""
