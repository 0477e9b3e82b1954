"""A drill plan as the studio edits it: from the plan form to the plan document.

The form carries the whole working plan (its pins as ``STEP:BOUNDARY:FAULT`` values,
the input as JSON, each activity's stub), so pinning a fault is a round trip that
re-draws the graph with its markers and nothing is stored until the operator saves.
The document is exactly what ``wayline drill run --plan`` reads, and the harness's own
checks (``verification.plan``) decide what is valid, so the studio and the CLI agree.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.model.definitions import Definition, Mode, StepKind
from verification import plan as plans

MAX_INPUT_CHARS = 20_000
"""Characters of a plan's input (or a stub's result) as typed in the form."""
PLAN_NAME_CHARS = plans.MAX_NAME_CHARS


class FormData(Mapping[str, list[str]]):
    """Posted (or queried) form values, each name with all its values."""

    def __init__(self, values: dict[str, list[str]]) -> None:
        self._values = values

    def __getitem__(self, key: str) -> list[str]:
        return self._values[key]

    def __iter__(self) -> Any:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def one(self, key: str, default: str = "") -> str:
        found = self._values.get(key) or [default]
        return found[-1].strip()


@dataclass
class WorkingPlan:
    """The plan being edited: its document, and every problem it has so far."""

    name: str
    document: dict[str, Any]
    problems: list[str] = field(default_factory=list)

    @property
    def pins(self) -> list[plans.Pin]:
        return [plans.Pin(**p) for p in self.document.get("pins", [])]

    def markers(self) -> dict[str, list[plans.Pin]]:
        """The pins of each step, as the graph marks its node."""
        found: dict[str, list[plans.Pin]] = {}
        for pin in self.pins:
            found.setdefault(pin.step, []).append(pin)
        return found

    def stub(self, step: str) -> plans.Stub:
        raw = self.document.get("stubs", {}).get(step)
        return plans.Stub(**raw) if raw else plans.Stub()


def boundaries_for(definition: Definition, step: str) -> list[str]:
    """The boundaries a pin on ``step`` can name (none for a step with no work of its own)."""
    return [b.value for b in plans.boundaries_of(definition, step)]


def stubbed_steps(definition: Definition) -> list[str]:
    """The steps a plan stubs: a step list's activities, a machine's states that advance."""
    if definition.mode is Mode.MACHINE:
        return plans.steps_of(definition)
    return [s.name for s in definition.steps if s.kind is StepKind.ACTIVITY]


def ref(definition: Definition) -> str:
    return f"{definition.name}@{definition.version}"


def from_document(document: dict[str, Any], definition: Definition) -> WorkingPlan:
    """A saved (or posted JSON) plan document, checked against ``definition``."""
    working = WorkingPlan(str(document.get("name", "")), document)
    working.problems = check(document, definition)
    return working


def check(document: dict[str, Any], definition: Definition) -> list[str]:
    """Every problem of ``document`` as a plan of ``definition`` (none: it can run)."""
    try:
        plan = plans.parse(document)
        if plan.definition != ref(definition):
            return [f"definition: this plan drills {ref(definition)}, not {plan.definition!r}"]
        plans.check_against(plan, definition)
    except plans.PlanInvalid as invalid:
        return invalid.problems
    return []


def from_form(form: FormData, definition: Definition) -> WorkingPlan:
    """The working plan the form describes, with its problems (pins and JSON fields)."""
    problems: list[str] = []
    name = form.one("name")
    if len(name) > PLAN_NAME_CHARS:
        problems.append(f"name: at most {PLAN_NAME_CHARS} characters")
        name = name[:PLAN_NAME_CHARS]
    document: dict[str, Any] = {"name": name, "definition": ref(definition)}
    document["input"] = _json(form.one("input", "null"), "input", problems)
    document["stubs"] = _stubs(form, definition, problems)
    document["pins"] = [
        plans.parse_pin(text).as_json() for text in form.get("pin", []) if _pin_shaped(text)
    ]
    working = WorkingPlan(name, document, problems)
    working.problems += check(document, definition)
    return working


def _pin_shaped(text: str) -> bool:
    return bool(plans.PIN_PATTERN.match(text.strip()))


def _json(text: str, path: str, problems: list[str]) -> Any:
    if len(text) > MAX_INPUT_CHARS:
        problems.append(f"{path}: at most {MAX_INPUT_CHARS} characters of JSON")
        return None
    try:
        return json.loads(text or "null")
    except ValueError:
        problems.append(f"{path}: not valid JSON (write null for nothing)")
        return None


def _stubs(form: FormData, definition: Definition, problems: list[str]) -> dict[str, Any]:
    """Each activity's stub from its fields; a plain ``succeed`` with no result is the
    default and is left out, as a hand-written plan would."""
    stubs: dict[str, Any] = {}
    for step in stubbed_steps(definition):
        behaviour = form.one(f"stub.{step}.behaviour", "succeed")
        result = _json(form.one(f"stub.{step}.result", "null"), f"stubs.{step}.result", problems)
        seconds_text = form.one(f"stub.{step}.seconds", "0") or "0"
        try:
            seconds: Any = float(seconds_text)
        except ValueError:
            problems.append(f"stubs.{step}.seconds: {seconds_text!r} is not a number of seconds")
            seconds = 0.0
        idempotent = form.one(f"stub.{step}.ignores_keys") != "on"
        times_text = form.one(f"stub.{step}.times", "0") or "0"
        times: Any = int(times_text) if times_text.isascii() and times_text.isdigit() else -1
        raw = {"behaviour": behaviour, "result": result, "seconds": seconds}
        if times:  # kept from the plan as saved (a hand-written or API plan may set it)
            raw["times"] = times
        if (behaviour, result, seconds, idempotent) != ("succeed", None, 0.0, True):
            stubs[step] = {**raw, "idempotent": idempotent}
    return stubs


def with_pin(form: FormData, definition: Definition) -> tuple[FormData, str]:
    """The form with the picked ``step``/``boundary``/``fault`` added as a pin, or the
    form unchanged and why that pin cannot be added."""
    pin = plans.Pin(form.one("step"), form.one("boundary"), form.one("fault"))
    if not pin.step:
        return form, "pick a step: click its node on the graph"
    current = from_form(form, definition)
    plan = plans.parse({**current.document, "pins": []}) if not current.problems else None
    problem = plans.pin_problem(plan or plans.Plan(definition=ref(definition)), definition, pin)
    if problem:
        return form, f"{pin.label}: {problem}"
    if pin.label in form.get("pin", []):
        return form, f"{pin.label} is pinned already"
    return FormData({**dict(form), "pin": [*form.get("pin", []), pin.label]}), ""


def without_pin(form: FormData, label: str) -> FormData:
    """The form without the pin ``label``."""
    return FormData({**dict(form), "pin": [p for p in form.get("pin", []) if p != label]})
