"""Small workflow definitions for end-to-end tests, built as exchange-format dicts.

Durations are short (tens to hundreds of milliseconds) so retries, timers and
backoffs happen within a test's time budget; handler timeouts stay generous so a
slow CI machine never turns a success into an unknown outcome by accident. Every
definition goes through ``parse_definition``, the same validation ``wayline
definition publish`` applies.
"""

from __future__ import annotations

from typing import Any

from engine.model.definitions import Definition
from engine.model.validation import parse_definition
from tests.e2e.app import ACTIVITY_TARGET, UNDO_TARGET

LIMIT = 65536
FAST_RETRY = {"max_attempts": 3, "initial_delay": "50ms", "max_delay": "200ms"}


def activity(
    name: str,
    *,
    retry: dict[str, Any] | None = None,
    timeout: str = "30s",
    undo: bool = False,
    on_unknown: str | None = None,
) -> dict[str, Any]:
    """An activity run by the scripted handler, optionally compensated by it too."""
    step: dict[str, Any] = {
        "name": name,
        "kind": "activity",
        "target": ACTIVITY_TARGET,
        "timeout": timeout,
        "input_limit": LIMIT,
        "result_limit": LIMIT,
        "retry": retry or FAST_RETRY,
    }
    if undo:
        step["compensation"] = {
            "target": UNDO_TARGET,
            "timeout": "30s",
            "result_limit": LIMIT,
            "retry": FAST_RETRY,
        }
    if on_unknown:
        step["on_unknown"] = on_unknown
    return step


def wait(name: str, kind: str = "signal") -> dict[str, Any]:
    """A signal or approval step (it waits far longer than any test)."""
    return {
        "name": name,
        "kind": kind,
        "target": f"e2e.{name}",
        "timeout": "1h",
        "input_limit": LIMIT,
    }


def timer(name: str, duration: str) -> dict[str, Any]:
    """A timer step; as a race branch with a long duration it is the losing timeout."""
    return {"name": name, "kind": "timer", "timeout": duration}


def fan_out(name: str, kind: str, branches: list[str]) -> dict[str, Any]:
    """A parallel or race step owning ``branches``."""
    return {"name": name, "kind": kind, "branches": branches, "fan_out_limit": len(branches)}


def join(name: str, branches: list[str]) -> dict[str, Any]:
    """The join that waits for every branch of one parallel."""
    return {"name": name, "kind": "join", "branches": branches}


def child(name: str, definition: Definition) -> dict[str, Any]:
    """A child step pinned to ``definition``'s exact fingerprint."""
    ref = definition.ref
    return {
        "name": name,
        "kind": "child",
        "target": ref.name,
        "timeout": "1m",
        "input_limit": LIMIT,
        "result_limit": LIMIT,
        "retry": FAST_RETRY,
        "child_definition": {
            "name": ref.name,
            "version": ref.version,
            "fingerprint": ref.fingerprint,
        },
    }


def definition(name: str, *steps: dict[str, Any], version: str = "1") -> Definition:
    """Validate the steps as an orchestration definition, exactly as publishing would."""
    document = {"name": name, "version": version, "mode": "orchestration", "steps": list(steps)}
    return parse_definition(document)


SINGLE = definition("e2e.single", activity("only"))
"""One activity: the smallest workflow with an effect."""

THREE_STEPS = definition("e2e.three", activity("one"), activity("two"), activity("three"))

RETRYING = definition(
    "e2e.retrying",
    activity("flaky", retry={"max_attempts": 5, "initial_delay": "100ms", "max_delay": "250ms"}),
)
"""Backoffs 100 ms, 200 ms, then capped at 250 ms."""

SAGA = definition(
    "e2e.saga",
    activity("reserve", undo=True),
    activity("charge", undo=True),
    activity("ship", undo=True),
)
"""Three compensable activities: fail or cancel at ``ship`` to unwind."""

TIMED = definition("e2e.timed", timer("nap", "200ms"), activity("after"))

SIGNALLED = definition("e2e.signalled", wait("go"), activity("after"))

RACING = definition(
    "e2e.racing",
    fan_out("first", "race", ["a", "b", "late"]),
    wait("a"),
    wait("b"),
    timer("late", "1h"),
    activity("after"),
)

PARALLEL = definition(
    "e2e.parallel",
    fan_out("fan", "parallel", ["left", "right"]),
    activity("left"),
    activity("right"),
    join("both", ["left", "right"]),
    activity("after"),
)

CHILD = definition("e2e.child", activity("inner"))

PARENT = definition("e2e.parent", activity("before"), child("kid", CHILD), activity("after"))

APPROVED = definition("e2e.approved", wait("sign", "approval"), activity("after"))

HOLD_ON_UNKNOWN = definition("e2e.hold", activity("risky", on_unknown="hold"))

SAME_KEY_ON_UNKNOWN = definition("e2e.same-key", activity("risky", on_unknown="retry_same_key"))

TIMING_OUT = definition("e2e.timing-out", activity("slow", timeout="200ms"))
