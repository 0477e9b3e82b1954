"""Each fired cell's own verdict in a plan run: printed by ``wayline drill run`` beside
each pin, kept with the run, and shown by the studio's coverage heatmap.

A run's verdict is about everything it fired at once: one violation fails it, whichever
pin led there. The heatmap's cells are (step, boundary, fault), so a cell is given the
findings that are about its step, never the run's verdict wholesale:

- A finding is about a step when it says so: the plan's own findings name their step
  (a duplicate effect, an advance's write committed twice), and a checker violation
  names an event of the drilled instance, whose step it is (a machine's ``state_entered``
  is the advance of the state it left, the state the pin names). A violation that names
  no event, an event of the instance as a whole (its end), or another instance, is
  about no step. A pin that never fired is its own cell's finding ("never fired"), not
  a fired cell's.
- When the run fired one cell only, every finding is that cell's: it was the only
  fault the run injected, so the run's verdict is its verdict.
- When it fired several, a cell *failed* when a finding is about its step and no other
  fired cell is on that step; it *passed* when nothing found is about its step and
  every finding is about the step of another fired cell; otherwise its outcome cannot
  be attributed (``UNATTRIBUTED``): a finding about no step, or a step no pin fired
  on, could be any fault's, and one about a step where several cells fired could be
  either's. It says why instead of borrowing the run's verdict.
- A cell can pass only where the checker ran: a drill whose checker did not run (its
  run broke first) attributes nothing.

The attribution assumes a fault shows where it hit: a violation it causes on the next
step, while another pin fired there, is put on that step's cell. Runs recorded before
cells had their own verdict (``from_record``) are read by the same rules as far as they
go: one fired cell takes the run's verdict, a run that found nothing passed every fired
cell, and a failed run with several fired cells is not attributable.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from engine.model.definitions import Definition, Mode
from verification import plan_machines
from verification.findings import named
from verification.plan_drills import INSTANCE, Drilled

PASSED, FAILED, UNATTRIBUTED = "passed", "failed", "unattributed"
UNREACHED = re.compile(r"B boundaries reached: \S+ at (\S+) hit (\d+) never happened")
"""Invariant B's violation about a planned fault that never happened: its boundary and
hit (its fault is the action the worker was armed with)."""
Cell = tuple[str, str, str]
"""(step, boundary, fault): a heatmap cell, whatever hit a pin fired at."""


@dataclass(frozen=True)
class CellVerdict:
    verdict: str
    """passed, failed or unattributed."""
    reason: str
    finding: str = ""
    """The finding the verdict rests on, when one does."""

    @property
    def why(self) -> str:
        """The reason, and the finding it quotes."""
        return ": ".join(part for part in (self.reason, self.finding) if part)


def cell_of(pin: dict[str, Any]) -> Cell:
    return (str(pin["step"]), str(pin["boundary"]), str(pin["fault"]))


def annotate(card: dict[str, Any], drilled: list[Drilled]) -> None:
    """Give each fired pin of the plan drills in ``card`` its cell's own ``verdict``,
    ``why`` and ``reason`` (the why without the finding it quotes, which the command
    line prints among the drill's findings), as the run keeps them (``from_record``
    reads them back)."""
    definitions = {d.ref: d.definition for d in drilled}
    for drill in card["drills"]:
        result = (drill.get("extra") or {}).get("plan")
        if result is None or result.get("definition") not in definitions:
            continue
        verdicts = attribute(drill, definitions[result["definition"]])
        result["pins"] = [_with_verdict(pin, verdicts) for pin in result.get("pins", [])]


def _with_verdict(pin: dict[str, Any], verdicts: dict[Cell, CellVerdict]) -> dict[str, Any]:
    found = verdicts.get(cell_of(pin)) if pin.get("fired") else None
    if found is None:
        return pin
    return {**pin, "verdict": found.verdict, "why": found.why, "reason": found.reason}


def attribute(drill: dict[str, Any], definition: Definition) -> dict[Cell, CellVerdict]:
    """Every fired cell of a plan's drill (its scorecard entry) and its own verdict."""
    result = (drill.get("extra") or {}).get("plan") or {}
    pins = result.get("pins") or []
    fired = sorted({cell_of(p) for p in pins if p.get("fired")})
    if not fired:
        return {}
    if not drill.get("invariants"):
        why = "the checker did not run (the run broke first): nothing was checked"
        return {cell: CellVerdict(UNATTRIBUTED, why) for cell in fired}
    found = list(_findings(drill, result, pins, definition))
    if len(fired) == 1:
        return {fired[0]: _alone(found)}
    return _among(fired, found)


def _alone(found: list[tuple[str, str]]) -> CellVerdict:
    if not found:
        return CellVerdict(PASSED, "the only fault its run fired; the run found nothing")
    return CellVerdict(FAILED, "the only fault its run fired", found[0][1])


def _among(fired: list[Cell], found: list[tuple[str, str]]) -> dict[Cell, CellVerdict]:
    on_step = Counter(step for step, _, _ in fired)
    stray = [text for step, text in found if step not in on_step]
    verdicts = {}
    for cell in fired:
        step = cell[0]
        mine = [text for about, text in found if about == step]
        if mine and on_step[step] == 1:
            verdicts[cell] = CellVerdict(FAILED, "", mine[0])
        elif mine:
            others = [":".join(c[1:]) for c in fired if c[0] == step and c != cell]
            verdicts[cell] = CellVerdict(
                UNATTRIBUTED,
                f"a finding on {step}, where {', '.join(others)} fired too, could be either's",
                mine[0],
            )
        elif stray:
            verdicts[cell] = CellVerdict(
                UNATTRIBUTED,
                f"{len(stray)} of the run's findings name no step a pin fired on, so any "
                "fault could have led there",
                stray[0],
            )
        else:
            verdicts[cell] = CellVerdict(
                PASSED, "nothing the run found is about this step (its findings are "
                "other steps' where their pins fired)" if found else "the run found nothing"
            )  # fmt: skip
    return verdicts


def _findings(
    drill: dict[str, Any], result: dict[str, Any], pins: list[dict[str, Any]],
    definition: Definition,
) -> Iterable[tuple[str, str]]:  # fmt: skip
    """(step, text) of every finding of the drill ('' for a finding about no step),
    leaving out each unfired pin's own "never fired"."""
    unfired = tuple(f"pin {p['label']} never fired" for p in pins if not p.get("fired"))
    unreached = {  # B's word for the same: about the unfired pin's cell, not a fired one's
        (str(p["boundary"]), str(p.get("hit", 1))) for p in pins if not p.get("fired")
    }
    own = result.get("findings") or []
    said = {item["text"] for item in own}
    for item in own:
        if not item["text"].startswith(unfired or ("\0",)):
            yield item["step"].removesuffix(" compensation"), item["text"]
    steps = _steps_at(result.get("history") or [], definition)
    instance = f"{definition.name}/{INSTANCE}" if definition.mode is Mode.CODE else INSTANCE
    for text in drill.get("failures") or []:
        b = UNREACHED.fullmatch(text)
        if text in said or (b is not None and b.groups() in unreached):
            continue
        where = named(text)
        yield (steps.get(where.sequence, "") if where.instance_id == instance else ""), text


def _steps_at(history: list[dict[str, Any]], definition: Definition) -> dict[int, str]:
    """The step each event of the drilled instance is about, by its sequence (events of
    the instance as a whole are about none). A machine's ``state_entered`` is the
    advance of the state it left: the state a pin on that advance names."""
    steps: dict[int, str] = {}
    machine = definition.mode is Mode.MACHINE
    state = plan_machines.manifest_of(definition).initial if machine else ""
    for event in sorted(history, key=lambda e: e["seq"]):
        step = event.get("step") or ""
        if machine and event["kind"] == "state_entered":
            steps[event["seq"]], state = state, step
        elif step:
            steps[event["seq"]] = step
    return steps


def from_record(run_verdict: str, pins: list[dict[str, Any]], pin: dict[str, Any]) -> CellVerdict:
    """A fired pin's verdict as its run recorded it, or, for a run recorded before cells
    had their own, what the run's verdict says of it (see the module)."""
    if pin.get("verdict"):
        return CellVerdict(str(pin["verdict"]), str(pin.get("why") or ""))
    fired = {cell_of(p) for p in pins if p.get("fired")}
    if len(fired) == 1 and run_verdict in (PASSED, FAILED):
        return CellVerdict(run_verdict, "the only fault its run fired")
    if run_verdict == PASSED:
        return CellVerdict(PASSED, "the run found nothing")
    return CellVerdict(
        UNATTRIBUTED,
        f"the run {run_verdict} with {len(fired)} cells fired, recorded before each cell "
        "had its own verdict: which fault led there is not known",
    )
