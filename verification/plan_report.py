"""A drill plan's verdicts as text: per drill, per pin, in the operator's words.

Printed above the scorecard by ``wayline drill run --plan``: which pins fired and each
fired pin's own verdict (``verification.attribution``: with several pins fired, a
cell's verdict rests on the findings about its step), the instance's final state
(``charge: UNKNOWN (in doubt), waiting for an operator``), the invariants checked, held
and broken, the recovery time, the effects per idempotency key, the history and the
drill's findings, so a CI log answers "what happens to our workflow if ..." alone (the
scorecard's FAILED line below then names the drill only).
"""

from __future__ import annotations

from typing import Any

from engine.model.words import counted
from verification.findings import NAMES

HISTORY_LINE_EVENTS = 12
"""Events per history line; the JSON scorecard has the whole history."""


def text(card: dict[str, Any]) -> str:
    """The plan section of every plan drill in ``card`` (empty when there is none)."""
    lines: list[str] = []
    for drill in card["drills"]:
        plan = drill.get("extra", {}).get("plan")
        if plan is not None:
            lines += _drill(drill, plan)
    return "\n".join(lines)


def listed(card: dict[str, Any]) -> set[str]:
    """The drills whose findings ``text`` prints (the scorecard below need not repeat them)."""
    return {d["id"] for d in card["drills"] if d.get("extra", {}).get("plan") is not None}


def _drill(drill: dict[str, Any], plan: dict[str, Any]) -> list[str]:
    recovery = plan.get("recovery_seconds")
    head = f"plan {drill['title']}  {drill['verdict'].upper()}  {drill['seconds']} s"
    lines = [head + (f"  recovered in {recovery} s" if recovery is not None else "")]
    lines += [f"  pin {pin['label']}: {pin_outcome(pin)}" for pin in plan["pins"]]
    downs = plan.get("server_down_seconds") or []
    if downs:
        restarts = counted(len(downs), "time")
        lines.append(f"  server  restarted {restarts}, down {', '.join(map(str, downs))} s")
    lines += [f"  state  {line}" for line in plan["state"]]
    lines.append(f"  invariants  {_invariants(drill.get('invariants', {}))}")
    for effect in plan["effects"]:
        lines.append(f"  effects  {effect['step']} {effect_line(effect)}")
    lines += _history(plan["history"])
    lines += [f"  finding  {failure}" for failure in drill["failures"]]
    lines += [f"  note  {note['text']}" for note in plan.get("notes", [])]
    return lines


def pin_outcome(pin: dict[str, Any]) -> str:
    """Whether a pin fired and, when it did, its cell's own verdict and why
    (``verification.attribution``; absent from older scorecards). A finding it rests on
    is among the drill's findings below, not quoted again."""
    if not pin["fired"]:
        return "NEVER FIRED"
    verdict = pin.get("verdict")
    if verdict is None:
        return "fired"
    reason = pin.get("reason", "")
    if verdict == "passed":
        return f"fired, passed: {reason}"
    shown = "FAILED" if verdict == "failed" else "? not attributable"
    finding = "its finding is below" if pin.get("why", "") != reason else ""
    return f"fired, {shown}: " + "; ".join(part for part in (reason, finding) if part)


def _invariants(checks: dict[str, list[int]]) -> str:
    held = [k for k, (_, broke) in checks.items() if not broke]
    broke = [f"{k} {NAMES.get(k, '')}".strip() for k, (_, n) in checks.items() if n]
    return f"{len(checks)} checked, {len(held)} held, {len(broke)} broke" + (
        f" ({', '.join(broke)})" if broke else ""
    )


def _history(events: list[dict[str, Any]]) -> list[str]:
    """The events, a dozen to a line; a run that continued as new is followed by its
    successors' events, each run's first one named by its run (``run``, absent from
    older scorecards)."""
    chained = len({e.get("run") for e in events}) > 1
    words = [
        f"{_run_of(events, n) if chained else ''}{e['seq']} {e['kind']}"
        f"{' ' + e['step'] if e['step'] else ''}"
        for n, e in enumerate(events)
    ]
    return [
        f"  history  {'; '.join(words[n : n + HISTORY_LINE_EVENTS])}"
        for n in range(0, len(words), HISTORY_LINE_EVENTS)
    ]


def _run_of(events: list[dict[str, Any]], n: int) -> str:
    """``RUN: `` before the first event of each run, '' before the others."""
    run = events[n].get("run")
    return f"{run}: " if n == 0 or events[n - 1].get("run") != run else ""


def effect_line(effect: dict[str, Any]) -> str:
    """One idempotency key's calls and effects in a plan's result: a key called twice
    with one effect is an idempotent handler doing its job; two effects are a repeat.
    A team's own handler's (or code-first step body's, ``by``) effects are not counted
    (``None``): they are in its system."""
    calls = counted(effect["calls"], "call")
    if effect["effects"] is None:
        by = effect.get("by", "your handler")  # absent from older scorecards
        return f"key {effect['key']}: {calls} of {by} (its effects are in your system)"
    return f"key {effect['key']}: {calls}, {counted(effect['effects'], 'effect')}"
