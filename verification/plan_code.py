"""Drill plans on code-first workflows: a run's steps are its journaled calls.

A code-first run journals each ``ctx.step`` call under its key, the step's name and
occurrence (``charge.1``, ``work.2`` for the second call of ``work``), and runs its body
as an attempt of that key: the engine's fault points count the attempt's boundaries by
it (its durable start, its body's end, the COMMIT of its outcome: ``CODE_STEP_
BOUNDARIES``). So a code plan pins ``KEY:BOUNDARY:FAULT``, and the steps it offers are
the first call of each step the code's outline names (``engine.modes.code.outline``);
later calls are pinned by their occurrence. A step's claim is not its own (its attempt
is handed on with the decision that asked for it), and a renewal is reached only by a
body slower than a renewal, which the plan does not control: neither is offered.

A signal the code waits for (``ctx.wait_signal``, ``ctx.race``, ``ctx.all``) is
answered by the harness (``answers``: name to payload, sent once when the run starts,
kept in its inbox until the code waits) and can be pinned at ``before_signal_ack``, as
a step list's signal step is.

The bodies are the team's code, so a code plan names the app that declares the
workflow (``app``); recorded stubs do not replace them. Everything here is pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from engine.model.definitions import Definition
from engine.modes.code.document import CodeManifest
from engine.worker.faults import Boundary

CODE_STEP_BOUNDARIES = (
    Boundary.AFTER_ATTEMPT_START,
    Boundary.AFTER_HANDLER,
    Boundary.BEFORE_COMMIT,
    Boundary.AFTER_COMMIT,
)
SIGNAL_BOUNDARIES = (Boundary.BEFORE_SIGNAL_ACK,)
MAX_OCCURRENCE = 100
"""The highest call of one step a pin may name (``work.100``)."""
KEY = re.compile(r"^(.+)\.([1-9][0-9]*)$")
WAITS = ("wait", "race", "all")


def outline_of(definition: Definition) -> list[dict[str, Any]]:
    assert isinstance(definition.manifest, CodeManifest)
    return definition.manifest.outline


def _verbs(nodes: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Every durable verb of the outline, in source order, inside any control flow."""
    for node in nodes:
        if "verb" in node:
            yield node
        for key in ("then", "else", "body"):
            yield from _verbs(node.get(key, []))
        for handler in node.get("handlers", []):
            yield from _verbs(handler.get("body", []))


def step_names(definition: Definition) -> list[str]:
    """The names of the steps the code calls, each once, in source order."""
    names = [v["name"] for v in _verbs(outline_of(definition)) if v["verb"] == "step"]
    return list(dict.fromkeys(str(n) for n in names))


def signals(definition: Definition) -> list[str]:
    """The signals the code waits for, each once, in source order."""
    found: list[str] = []
    for verb in _verbs(outline_of(definition)):
        if verb["verb"] == "wait":
            found.append(str(verb["name"]))
        elif verb["verb"] in WAITS:
            found += [str(n) for n in verb.get("on", [])]
    return list(dict.fromkeys(found))


def steps(definition: Definition) -> list[str]:
    """What a code plan offers to pin: each step's first call, then each signal."""
    return [f"{name}.1" for name in step_names(definition)] + signals(definition)


def boundaries(definition: Definition, step: str) -> tuple[Boundary, ...]:
    """The boundaries ``step`` (a step's key, or a signal) reaches (none when the code
    has no such step or signal)."""
    if step in signals(definition):
        return SIGNAL_BOUNDARIES
    match = KEY.match(step)
    if match and match[1] in step_names(definition) and int(match[2]) <= MAX_OCCURRENCE:
        return CODE_STEP_BOUNDARIES
    return ()


def step_problem(definition: Definition, step: str) -> str:
    """Why ``step`` names no step key or signal of the code ('' when it does)."""
    if boundaries(definition, step):
        return ""
    keys = ", ".join(steps(definition))
    return (
        f"no step call or signal {step!r}; the code has {keys} (a step's key is its name and "
        f"call: charge.2 is the second call of charge, up to {MAX_OCCURRENCE})"
    )
