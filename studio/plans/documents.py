"""A drill plan as the studio edits it: from the plan form to the plan document.

The form carries the whole working plan (its pins as ``STEP:BOUNDARY:FAULT`` values,
the input as JSON, each activity's stub), so pinning a fault is a round trip that
re-draws the graph with its markers and nothing is stored until the operator saves.
The document is exactly what ``wayline drill run --plan`` reads, and the harness's own
checks (``verification.plan``) decide what is valid, so the studio and the CLI agree.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.model.definitions import Definition, Mode, StepKind
from studio.plans import outline_nodes
from verification import plan as plans
from verification import plan_code

MAX_INPUT_CHARS = 20_000
"""Characters of a plan's input (or a stub's result) as typed in the form."""
PLAN_NAME_CHARS = plans.MAX_NAME_CHARS
MAX_SHOWN_CHARS = 40
"""Characters of a refused value quoted back at its field."""
MAX_DIGITS = 9
ANSWERED = (StepKind.SIGNAL, StepKind.APPROVAL)
HIT_ALLOWED = (
    f"the n-th time the step reaches the boundary: a whole number from 1 to {plans.MAX_HIT}"
)
TIMES_ALLOWED = (
    f"how many first attempts fail: a whole number from 0 to {plans.MAX_FAIL_TIMES} "
    "(0: every attempt)"
)
JSON_ALLOWED = f"JSON of at most {MAX_INPUT_CHARS} characters (null for nothing)"
SECONDS_ALLOWED = (
    f"how long a slow stub takes: a number of seconds from 0 to {plans.MAX_SLOW_SECONDS:g}"
)
NAME_ALLOWED = f"a name of 1 to {PLAN_NAME_CHARS} characters"
NAME_REQUIRED = f"required: {NAME_ALLOWED}"
APP_SHAPE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*")
"""``MODULE:APP``: a dotted module path, a colon, the name of the app in it."""
APP_ALLOWED = (
    "the module and the app in it that declare this workflow, as MODULE:APP "
    "(e.g. shop.worker:app), importable where `wayline drill run` runs"
)
APP_REQUIRED = (
    "required: a code-first workflow runs its own code, so name the app that declares it, "
    "as MODULE:APP (e.g. shop.worker:app)"
)
CALL_ALLOWED = (
    f"which call of the step: a whole number from 1 to {plan_code.MAX_OCCURRENCE} "
    "(2: its second call)"
)


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
    """The plan being edited: its document, and every problem it has so far: the
    plan's (``problems``) and, by form field name, a field's value that is not allowed
    (``field_errors``, shown at that field with what is, its text kept in ``typed``)."""

    name: str
    document: dict[str, Any]
    problems: list[str] = field(default_factory=list)
    field_errors: dict[str, str] = field(default_factory=dict)
    typed: dict[str, str] = field(default_factory=dict)

    @property
    def valid(self) -> bool:
        return not (self.problems or self.field_errors)

    def all_problems(self) -> list[str]:
        """Every problem, a field's named by its field."""
        return [*self.problems, *(f"{k}: {v}" for k, v in self.field_errors.items())]

    def text(self, name: str, value: str) -> str:
        """Field ``name``'s text: as typed when it was refused (so it can be corrected,
        not typed again), else ``value``, the plan's own."""
        return self.typed.get(name) or value

    def answer(self, step: str) -> str:
        """The answer field's text: as typed when refused, else the plan's JSON."""
        return self.text(f"answer.{step}", json.dumps(self.document.get("answers", {}).get(step)))

    def times(self, step: str) -> str:
        return self.text(f"stub.{step}.times", str(self.stub(step).times))

    def result(self, step: str) -> str:
        return self.text(f"stub.{step}.result", json.dumps(self.stub(step).result))

    def seconds(self, step: str) -> str:
        return self.text(f"stub.{step}.seconds", str(self.stub(step).seconds))

    def input_text(self) -> str:
        return self.text("input", json.dumps(self.document.get("input")))

    @property
    def pins(self) -> list[plans.Pin]:
        """The document's pins: objects as the form saves them, or text as a plan
        posted to the API may keep them (opening such a plan was a 500)."""
        return list(plans.pins_of(self.document.get("pins", [])))

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
    """The steps a plan stubs: a step list's activities, a machine's states that advance
    (a code-first workflow's bodies are its code: none)."""
    if definition.mode is Mode.MACHINE:
        return plans.steps_of(definition)
    if definition.mode is Mode.CODE:
        return []
    return [s.name for s in definition.steps if s.kind is StepKind.ACTIVITY]


def answered_steps(definition: Definition) -> list[str]:
    """The steps a plan answers: a step list's signal and approval steps, the signals a
    code-first workflow waits for (a machine waits for none)."""
    if definition.mode is Mode.CODE:
        return plan_code.signals(definition)
    if definition.mode is not Mode.ORCHESTRATION:
        return []
    return [s.name for s in definition.steps if s.kind in ANSWERED]


def ref(definition: Definition) -> str:
    return f"{definition.name}@{definition.version}"


def from_document(document: dict[str, Any], definition: Definition) -> WorkingPlan:
    """A saved (or posted JSON) plan document, checked against ``definition``."""
    working = WorkingPlan(str(document.get("name", "")), document)
    working.problems = check(document, definition)
    return working


def check(document: dict[str, Any], definition: Definition) -> list[str]:
    """Every problem of ``document`` as a plan of ``definition`` (none: it can run): those
    of its shape, then its well-shaped parts' against ``definition``, all at once."""
    shaped = plans.read(document)
    if not shaped.definable:
        return shaped.problems
    if shaped.plan.definition != ref(definition):
        drills = f"this plan drills {ref(definition)}, not {shaped.plan.definition!r}"
        return [*shaped.problems, f"definition: {drills}"]
    problems = plans.checked(shaped, definition)
    if shaped.plan.app and definition.mode is Mode.ORCHESTRATION:
        problems.append(STUDIO_HANDLERS.format(app=shaped.plan.app))
    return problems


STUDIO_HANDLERS = (
    "app: the studio drills a step list with the stubs of its activities and does not load "
    "your code ({app}): leave app out here, and run your own handlers from the command line "
    "where they can be imported (`wayline drill run --plan FILE` with app in FILE)"
)
"""A step list's plan naming the team's handlers: run from the studio, it ran them in the
studio's drill workers when they happened to be importable there, else failed saying a
worker exited; and the form, which has no app for a step list, dropped it on a save."""


def from_form(form: FormData, definition: Definition, saving: bool = False) -> WorkingPlan:
    """The working plan the form describes, with its problems (pins and JSON fields);
    ``saving``: a required field left empty is refused at its field too."""
    name = form.one("name")
    document: dict[str, Any] = {"name": name, "definition": ref(definition)}
    working = WorkingPlan(name, document)
    if len(name) > PLAN_NAME_CHARS:
        _refuse(working, "name", name, NAME_ALLOWED)
        document["name"] = working.name = name[:PLAN_NAME_CHARS]
    elif not name and saving:
        working.field_errors["name"] = NAME_REQUIRED
    document["input"] = _field_json(form, "input", working)
    document["stubs"] = _stubs(form, definition, working)
    document["pins"] = [
        plans.parse_pin(text).as_json() for text in form.get("pin", []) if _pin_shaped(text)
    ]
    document["answers"] = _answers(form, definition, working)
    if definition.mode is Mode.CODE:
        document["app"] = _app(form, working, saving)
    working.problems += check(document, definition)
    return working


def _app(form: FormData, working: WorkingPlan, saving: bool) -> str:
    """The app that declares a code-first workflow, refused at its field unless it is
    ``MODULE:APP`` (left empty while the plan is composed, only the plan's problems
    say it is required: the field says so when the plan is saved)."""
    text = form.one("app")
    if text and not APP_SHAPE.fullmatch(text):
        _refuse(working, "app", text, APP_ALLOWED)
    elif not text and saving:
        working.field_errors["app"] = APP_REQUIRED
    return text


def _refuse(working: WorkingPlan, name: str, text: str, allowed: str) -> None:
    """``text`` in field ``name`` is not allowed: say so at the field, keep what was typed."""
    shown = text if len(text) <= MAX_SHOWN_CHARS else text[:MAX_SHOWN_CHARS] + "..."
    working.field_errors[name] = f"{shown!r} is not allowed; {allowed}"
    working.typed[name] = text


def whole(text: str, low: int, high: int) -> int | None:
    """``text`` as a whole number from ``low`` to ``high`` (ASCII digits), else None."""
    text = text.strip()
    if not (text.isascii() and text.isdigit() and len(text) <= MAX_DIGITS):
        return None
    return int(text) if low <= int(text) <= high else None


def _answers(form: FormData, definition: Definition, working: WorkingPlan) -> dict[str, Any]:
    """The payload of each answered step (null, the default, is left out)."""
    answers: dict[str, Any] = {}
    for step in answered_steps(definition):
        value = _field_json(form, f"answer.{step}", working)
        if value is not None:
            answers[step] = value
    return answers


def _loaded(text: str) -> tuple[Any, bool]:
    """``text`` as JSON of at most ``MAX_INPUT_CHARS`` characters, and whether it was."""
    if len(text) > MAX_INPUT_CHARS:
        return None, False
    try:
        return json.loads(text), True
    except ValueError:
        return None, False


def _pin_shaped(text: str) -> bool:
    return bool(plans.PIN_PATTERN.match(text.strip()))


def _field_json(form: FormData, name: str, working: WorkingPlan) -> Any:
    """Field ``name`` as JSON (empty: null), or None refused at the field."""
    text = form.one(name, "null") or "null"
    value, loaded = _loaded(text)
    if not loaded:
        _refuse(working, name, text, JSON_ALLOWED)
    return value


def _seconds(form: FormData, name: str, working: WorkingPlan) -> float:
    """Field ``name`` as a slow stub's seconds (empty: 0), or 0 refused at the field
    (``nan``, ``inf`` and ``1e999`` included, which ``float`` reads)."""
    text = form.one(name, "0") or "0"
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= plans.MAX_SLOW_SECONDS:
        _refuse(working, name, text, SECONDS_ALLOWED)
        return 0.0
    return seconds


def _stubs(form: FormData, definition: Definition, working: WorkingPlan) -> dict[str, Any]:
    """Each activity's stub from its fields; a plain ``succeed`` with no result is the
    default and is left out, as a hand-written plan would."""
    stubs: dict[str, Any] = {}
    for step in stubbed_steps(definition):
        behaviour = form.one(f"stub.{step}.behaviour", "succeed")
        result = _field_json(form, f"stub.{step}.result", working)
        seconds = _seconds(form, f"stub.{step}.seconds", working)
        idempotent = form.one(f"stub.{step}.ignores_keys") != "on"
        times_text = form.one(f"stub.{step}.times", "0") or "0"
        times = whole(times_text, 0, plans.MAX_FAIL_TIMES)
        if times is None:
            _refuse(working, f"stub.{step}.times", times_text, TIMES_ALLOWED)
        raw = {"behaviour": behaviour, "result": result, "seconds": seconds}
        if times:
            raw["times"] = times
        if (behaviour, result, seconds, idempotent) != ("succeed", None, 0.0, True):
            stubs[step] = {**raw, "idempotent": idempotent}
    return stubs


def pin_step(form: FormData, definition: Definition, picked: str) -> tuple[str, dict[str, str]]:
    """The step a pin on the ``picked`` node names, or '' and why not by field: the node
    itself, or on a code-first outline the picked step's call (field ``call``, its first
    by default) or the signal picked among those the picked wait awaits (``signal``)."""
    if definition.mode is not Mode.CODE or not picked:
        return picked, {}
    node = outline_nodes.pinnable(definition, picked)
    if node is None:
        return "", {"": f"{picked} has no work a code plan can fault; pick a step or a wait"}
    call_text = form.one("call", "1") or "1"
    call = whole(call_text, 1, plan_code.MAX_OCCURRENCE)
    if call is None:
        return "", {"call": f"{call_text[:MAX_SHOWN_CHARS]!r} is not allowed; {CALL_ALLOWED}"}
    signal = form.one("signal")
    if signal and node.signals and signal not in node.signals:
        awaited = ", ".join(node.signals)
        shown = signal[:MAX_SHOWN_CHARS]
        return "", {"signal": f"{shown!r} is not allowed; this wait awaits {awaited}"}
    return node.key(call, signal), {}


def with_pin(form: FormData, definition: Definition) -> tuple[FormData, dict[str, str]]:
    """The form with the picked ``step``/``boundary``/``fault`` (at its ``hit``) added
    as a pin, or the form unchanged and why that pin cannot be added: by the field at
    fault (``hit``), or '' for the pin as a whole."""
    hit_text = form.one("hit", "1") or "1"
    hit = whole(hit_text, 1, plans.MAX_HIT)
    if hit is None:
        return form, {"hit": f"{hit_text[:MAX_SHOWN_CHARS]!r} is not allowed; {HIT_ALLOWED}"}
    pin = plans.Pin(form.one("step"), form.one("boundary"), form.one("fault"), hit)
    if not pin.step:
        return form, {"": "pick a step: click its node on the graph"}
    current = from_form(form, definition)
    plan = plans.parse({**current.document, "pins": []}) if current.valid else None
    problem = plans.pin_problem(plan or plans.Plan(definition=ref(definition)), definition, pin)
    if problem:
        return form, {"": f"{pin.label}: {problem}"}
    if pin.label in form.get("pin", []):
        return form, {"": f"{pin.label} is pinned already"}
    return FormData({**dict(form), "pin": [*form.get("pin", []), pin.label]}), {}


def without_pin(form: FormData, label: str) -> FormData:
    """The form without the pin ``label``."""
    return FormData({**dict(form), "pin": [p for p in form.get("pin", []) if p != label]})
