"""Drill plans: a team's own definition, how its activities behave, and faults pinned on
its steps.

A plan is JSON (see the README's "Drill plans"). It names the definition to drill
(``definition``: ``NAME@VERSION`` published on the server, or ``definition_file``: a
definition's JSON file, relative to the plan's), the instance ``input``, per step how
its activity behaves as a recorded stub (``stubs``; succeed with a result unless told
otherwise) and the ``pins``: ``{"step", "boundary", "fault"}`` (and ``hit``, the n-th
time that step reaches that boundary, 1 by default), the boundaries and fault kinds
the engine's fault points (``engine.worker.faults``) and the harness already name.
``answers`` give the payload the harness sends to a signal or approval step when the
instance waits there (``null`` by default); ``app`` runs the team's real handlers
(``MODULE:APP``) instead of stubs.

A plan drills a step list (orchestration), a state machine or a code-first workflow. A
machine's steps are its states that advance, the stubs say what each state's advance
does and the pins hit the advance of the state they name (``verification.
plan_machines``); it has no signal or approval to answer, and its timers are passed by
the drill's clock. A code-first workflow's steps are its journaled calls (``charge.1``)
and the signals it waits for; its bodies are the team's code, run from ``app``
(``verification.plan_code``).

Reading a plan is pure: ``parse`` checks its shape and collects every problem with its
JSON path and what is allowed; ``check_against`` then checks it against the definition
(the steps exist, each pin's boundary and fault apply to that step's kind). Both raise
``PlanInvalid`` listing every problem, never only the first. ``read`` and ``checked``
list both kinds at once: the shape's problems, then the well-shaped parts' against the
definition (a plan with a misshapen pin may name a step the definition lacks too).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Any

from engine.model.definitions import Definition, Mode, StepKind, UnknownPolicy
from engine.model.durations import format_duration
from engine.model.words import with_article
from engine.modes.machines.field_types import FIELD_TYPES, value_problem
from engine.worker.faults import Action, Boundary
from verification import plan_code as code
from verification import plan_machines as machines

MAX_PINS = 400
"""Pins in one plan, so also the drills of one ``--for-each-pin`` run and the size of
the full matrix ``wayline drill plan generate`` writes."""
MAX_STUBS = 200
MAX_HIT = 100
MAX_FAIL_TIMES = 100
MAX_SLOW_SECONDS = 30.0
MAX_NAME_CHARS = 200
MAX_TIMER_WAIT = timedelta(seconds=30)
"""The longest timer a drill waits for (timers are not fast-forwarded in a drill)."""
RENEWAL_EVERY_SECONDS = 0.5
RENEWAL_SLOW_SECONDS = 1.0
"""How slow a stub must be for its lease to be renewed at least once under drill
timings (a 1.5 s lease renewed every ``RENEWAL_EVERY_SECONDS``): ``in_lease_renewal``
needs it. A team's own handler (``app``) takes the time it takes: its pin is not
refused, and fails its drill, saying why, when it never fired."""

BEHAVIOURS = ("succeed", "fail", "slow", "unknown")
DUPLICATE_SIGNAL = "duplicate_signal"
RESTART_DATABASE = "restart_database"
FAULTS = (*(a.value for a in Action), DUPLICATE_SIGNAL)
"""The faults a drill can make on any server: what the full matrix and the coverage
heatmap cross with every boundary."""
PIN_FAULTS = (*FAULTS, RESTART_DATABASE)
"""Every fault a pin may name: ``FAULTS``, and ``restart_database``, which crashes the
server (the worker that reached the boundary is held there meanwhile) and so runs only
on a private cluster the drill started (``OWNED_SERVER_NEEDED``)."""
OWNED_SERVER_NEEDED = (
    "restart_database crashes and restarts the PostgreSQL server, which a drill does only "
    "to a private cluster it started itself, never to a server it was given"
)
SEVERS = frozenset({Action.SEVER_BEFORE_COMMIT.value, Action.SEVER_AFTER_COMMIT.value})
WORKER_FAULTS = frozenset(a.value for a in Action)
ACTIVITY_BOUNDARIES = (
    Boundary.AFTER_CLAIM,
    Boundary.AFTER_ATTEMPT_START,
    Boundary.AFTER_HANDLER,
    Boundary.BEFORE_COMMIT,
    Boundary.AFTER_COMMIT,
    Boundary.IN_LEASE_RENEWAL,
)
BOUNDARIES_OF = {
    StepKind.ACTIVITY: ACTIVITY_BOUNDARIES,
    StepKind.TIMER: (
        Boundary.AFTER_CLAIM,
        Boundary.BEFORE_COMMIT,
        Boundary.AFTER_COMMIT,
        Boundary.AFTER_TIMER_FIRE,
    ),
    StepKind.SIGNAL: (Boundary.BEFORE_SIGNAL_ACK,),
}
"""Which boundaries a step of each kind reaches with its own work; other kinds
(parallel, join, race, approval, child) have none a pin can name."""
NO_COMMIT_LEFT = frozenset(
    {Boundary.AFTER_COMMIT, Boundary.AFTER_TIMER_FIRE, Boundary.BEFORE_SIGNAL_ACK}
)
"""Where a cut COMMIT has nothing of this step's left to cut: its commit was answered."""
PIN_PATTERN = re.compile(r"^([^:]+):([^:]+):([^:#]+)(?:#([0-9]{1,9}))?$")
"""``STEP:BOUNDARY:FAULT``, with ``#HIT`` past the first hit (as ``Pin.label`` writes it)."""
PLAN_MODES = frozenset({Mode.ORCHESTRATION, Mode.MACHINE, Mode.CODE})
"""The definition modes a plan drills."""
PIN_PARTS = ("step", "boundary", "fault")
PIN_FIELDS = ("boundary", "fault", "hit", "step")
"""A pin object's fields: any other (``"hitt": 2``) is refused, not run as hit 1."""
PLAN_FIELDS = ("answers", "app", "definition", "definition_file", "input", "name", "pins", "stubs")


class PlanInvalid(ValueError):
    """A plan that cannot run; ``problems`` names each, with its path and what is allowed."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("the drill plan is not valid:\n  " + "\n  ".join(problems))
        self.problems = problems


PROBLEM_PATH = re.compile(
    r"([A-Za-z_]\w*(?:\[\d+\]|\.[\w.-]+)*)(?:: |(?<=\]) (?=\S+: ))(.*)", re.DOTALL
)
"""A problem as this module writes it: its path in the plan, then ": " and what is
wrong, or a space and a pin's label first (``pins[0] charge:after_handler:kill: ...``)."""


def located(problem: str) -> tuple[str, str]:
    """``problem``'s path in the plan and what it says there (the label of a pin kept
    with it): an API answer locates each problem as it does a body's fields."""
    found = PROBLEM_PATH.fullmatch(problem)
    if found is None:
        return "", problem
    return found[1], found[2]


@dataclass(frozen=True)
class Stub:
    """How a step's activity behaves in the drill: ``succeed`` with ``result``; ``fail``
    its first ``times`` attempts (all when 0) before any effect; ``slow`` by
    ``seconds`` then succeed; ``unknown``: the handler returns an unknown outcome after
    its effect. ``idempotent`` false makes the effect happen on every call, not once
    per idempotency key, as a gateway that ignores keys would."""

    behaviour: str = "succeed"
    result: Any = None
    times: int = 0
    seconds: float = 0.0
    idempotent: bool = True

    def as_json(self) -> dict[str, Any]:
        """Every field, as the plan document names it."""
        return asdict(self)


@dataclass(frozen=True)
class Pin:
    step: str
    boundary: str
    fault: str
    hit: int = 1

    @property
    def label(self) -> str:
        """``STEP:BOUNDARY:FAULT`` (with ``#HIT`` past the first), as the command line
        and the scorecard name it."""
        suffix = f"#{self.hit}" if self.hit != 1 else ""
        return f"{self.step}:{self.boundary}:{self.fault}{suffix}"

    def as_json(self) -> dict[str, Any]:
        """Every field, as the plan document names it."""
        return asdict(self)


@dataclass(frozen=True)
class Plan:
    definition: str = ""
    """``NAME@VERSION`` of a published version ('' when ``definition_file`` is given)."""
    definition_file: str = ""
    input: Any = None
    stubs: dict[str, Stub] = field(default_factory=dict)
    pins: tuple[Pin, ...] = ()
    answers: dict[str, Any] = field(default_factory=dict)
    app: str = ""
    name: str = ""

    def stub(self, step: str) -> Stub:
        return self.stubs.get(step, Stub())

    def as_json(self) -> dict[str, Any]:
        """The plan as a document ``parse`` reads back to an equal plan."""
        document: dict[str, Any] = {"name": self.name} if self.name else {}
        if self.definition:
            document["definition"] = self.definition
        if self.definition_file:
            document["definition_file"] = self.definition_file
        document.update(
            input=self.input,
            stubs={s: stub.as_json() for s, stub in self.stubs.items()},
            pins=[p.as_json() for p in self.pins],
            answers=self.answers,
        )
        return {**document, "app": self.app} if self.app else document


def parse_pin(text: str) -> Pin:
    """``STEP:BOUNDARY:FAULT[#HIT]`` from the command line (its shape only)."""
    match = PIN_PATTERN.match(text.strip())
    if not match:
        raise PlanInvalid([f"--pin {text!r}: must be STEP:BOUNDARY:FAULT[#HIT]"])
    step, boundary, fault, hit = match.groups()
    return Pin(step, boundary, fault, int(hit or 1))


@dataclass(frozen=True)
class Shaped:
    """A plan document read as far as its shape allows: the plan of its parts whose
    shape was fine, every problem of its shape, and where each of the plan's pins is in
    the document (a malformed pin is left out, so the n-th pin is not always
    ``pins[n]``)."""

    plan: Plan
    problems: list[str]
    pin_at: tuple[int, ...]

    @property
    def definable(self) -> bool:
        """Whether the fields that name the definition (and a code-first workflow's
        app, which declares it) are well shaped, so it can be found and the rest of the
        plan checked against it."""
        roots = {re.split(r"[.\[]", located(p)[0])[0] for p in self.problems}
        return not roots & {"", *DEFINING_FIELDS}


DEFINING_FIELDS = ("definition", "definition_file", "app")


def parse(document: Any) -> Plan:
    """A plan from its JSON document; PlanInvalid listing every problem of its shape."""
    return whole(read(document))


def whole(shaped: Shaped) -> Plan:
    """``shaped``'s plan; PlanInvalid listing its problems if it has any."""
    if shaped.problems:
        raise PlanInvalid(shaped.problems)
    return shaped.plan


def read(document: Any) -> Shaped:
    """The well-shaped parts of a plan document and every problem of its shape, so a
    plan can also be checked against its definition before its shape is fixed."""
    problems: list[str] = []
    if not isinstance(document, dict):
        return Shaped(Plan(), ["the plan must be a JSON object"], ())
    problems += [
        f"{k}: not a plan field; allowed: {', '.join(PLAN_FIELDS)}"
        for k in document
        if k not in PLAN_FIELDS
    ]
    definition = _text(document, "definition", problems)
    definition_file = _text(document, "definition_file", problems)
    if bool(definition) == bool(definition_file):
        problems.append(
            "definition: give exactly one of definition (NAME@VERSION) or definition_file"
        )
    elif definition and "@" not in definition:
        problems.append(f"definition: {definition!r} must be NAME@VERSION")
    stubs = _stubs(document.get("stubs", {}), problems)
    placed = _placed_pins(document.get("pins", []), problems)
    answers = document.get("answers", {})
    if not isinstance(answers, dict):
        problems.append("answers: must be an object of step name to payload")
        answers = {}
    app = _text(document, "app", problems)
    if app and ":" not in app:
        problems.append(f"app: {app!r} must be MODULE:APP")
    if app and stubs:
        problems.append("stubs: not used when app names your handlers; give one or the other")
    name = _text(document, "name", problems)
    pins = tuple(pin for _, pin in placed)
    plan = Plan(definition, definition_file, document.get("input"), stubs, pins, answers, app, name)
    return Shaped(plan, problems, tuple(n for n, _ in placed))


def _text(document: dict[str, Any], key: str, problems: list[str]) -> str:
    value = document.get(key, "")
    if not isinstance(value, str) or len(value) > MAX_NAME_CHARS:
        problems.append(f"{key}: must be text of at most {MAX_NAME_CHARS} characters")
        return ""
    return value


def _stubs(value: Any, problems: list[str]) -> dict[str, Stub]:
    if not isinstance(value, dict) or len(value) > MAX_STUBS:
        problems.append(f"stubs: must be an object of at most {MAX_STUBS} step names to stubs")
        return {}
    return {step: _stub(f"stubs.{step}", raw, problems) for step, raw in value.items()}


def _stub(path: str, raw: Any, problems: list[str]) -> Stub:
    if not isinstance(raw, dict):
        problems.append(
            f"{path}: must be an object with behaviour (one of {', '.join(BEHAVIOURS)})"
        )
        return Stub()
    allowed = {"behaviour", "result", "times", "seconds", "idempotent"}
    problems += [f"{path}.{k}: not a stub field; allowed: {', '.join(sorted(allowed))}"
                 for k in raw if k not in allowed]  # fmt: skip
    behaviour = raw.get("behaviour", "succeed")
    if behaviour not in BEHAVIOURS:
        problems.append(f"{path}.behaviour: {behaviour!r} is not one of {', '.join(BEHAVIOURS)}")
        behaviour = "succeed"  # said once, here: not again against the definition
    times = raw.get("times", 0)
    if not _whole(times, 0, MAX_FAIL_TIMES):
        problems.append(f"{path}.times: must be a whole number from 0 to {MAX_FAIL_TIMES}")
        times = 0
    seconds = raw.get("seconds", 0.0)
    if not _number(seconds, MAX_SLOW_SECONDS):
        problems.append(f"{path}.seconds: must be a number from 0 to {MAX_SLOW_SECONDS:g}")
        seconds = 0.0
    elif behaviour == "slow" and not seconds:
        problems.append(f"{path}.seconds: a slow stub needs seconds above 0")
    idempotent = raw.get("idempotent", True)
    if not isinstance(idempotent, bool):
        problems.append(f"{path}.idempotent: must be true or false")
        idempotent = True
    return Stub(str(behaviour), raw.get("result"), times, float(seconds), idempotent)


def pins_of(value: Any) -> tuple[Pin, ...]:
    """The pins of a plan document's ``pins``, in either shape a plan keeps them
    (``STEP:BOUNDARY:FAULT[#HIT]`` text or an object); a malformed one is left out
    (``parse`` says what is wrong with it)."""
    return _pins(value, [])


def _pins(value: Any, problems: list[str]) -> tuple[Pin, ...]:
    return tuple(pin for _, pin in _placed_pins(value, problems))


def _placed_pins(value: Any, problems: list[str]) -> list[tuple[int, Pin]]:
    """The well-shaped pins of ``value``, each with its index in it."""
    if not isinstance(value, list) or len(value) > MAX_PINS:
        problems.append(f"pins: must be a list of at most {MAX_PINS} pins")
        return []
    pins = []
    for n, raw in enumerate(value):
        path = f"pins[{n}]"
        if isinstance(raw, str):
            match = PIN_PATTERN.match(raw)
            raw = _pin_fields(*match.groups()) if match else None
        if not isinstance(raw, dict):
            problems.append(
                f"{path}: must be STEP:BOUNDARY:FAULT[#HIT] or an object with step, boundary, "
                "fault (and hit)"
            )
            continue
        problems += [f"{path}.{k}: not a pin field; allowed: {', '.join(PIN_FIELDS)}"
                     for k in raw if k not in PIN_FIELDS]  # fmt: skip
        missing = [k for k in PIN_PARTS if not isinstance(raw.get(k), str)]
        if missing:
            problems.append(f"{path}: needs {', '.join(missing)} as text")
            continue
        hit = raw.get("hit", 1)
        if not _whole(hit, 1, MAX_HIT):
            problems.append(f"{path}.hit: must be a whole number from 1 to {MAX_HIT}")
            continue
        pin = Pin(raw["step"], raw["boundary"], raw["fault"], hit)
        first = next((m for m, seen in pins if seen == pin), None)
        if first is not None:
            problems.append(
                f"{path} {pin.label}: the same pin as pins[{first}], and a pin fires once: "
                f"to fault the step again, pin another hit ({pin.step}:{pin.boundary}:"
                f"{pin.fault}#N, N up to {MAX_HIT})"
            )
            continue
        pins.append((n, pin))
    return pins


def _pin_fields(step: str, boundary: str, fault: str, hit: str | None) -> dict[str, Any]:
    found: dict[str, Any] = {"step": step, "boundary": boundary, "fault": fault}
    return {**found, "hit": int(hit)} if hit else found


def _whole(value: Any, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _number(value: Any, high: float) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= high


def check_against(plan: Plan, definition: Definition) -> None:
    """PlanInvalid unless every stub and pin fits ``definition`` (see the module)."""
    problems = problems_against(plan, definition)
    if problems:
        raise PlanInvalid(problems)


def checked(shaped: Shaped, definition: Definition) -> list[str]:
    """Every problem of ``shaped`` as a plan of ``definition``: those of its shape, then
    those of its well-shaped parts against ``definition``."""
    return [*shaped.problems, *problems_against(shaped.plan, definition, shaped.pin_at)]


def problems_against(
    plan: Plan, definition: Definition, pin_at: tuple[int, ...] | None = None
) -> list[str]:
    """What in ``plan`` does not fit ``definition``; ``pin_at``: where each pin is in
    the document (the n-th pin is ``pins[n]`` unless said)."""
    if definition.mode not in PLAN_MODES:
        modes = " and ".join(sorted(m.value for m in PLAN_MODES))
        return [
            f"definition: {definition.name}@{definition.version} is "
            f"{with_article(definition.mode.value)} definition; plans drill {modes} definitions"
        ]
    problems = {Mode.MACHINE: _machine_problems, Mode.CODE: _code_problems}.get(
        definition.mode, _step_list_problems
    )(plan, definition)
    for n, pin in zip(pin_at or range(len(plan.pins)), plan.pins, strict=True):
        problem = pin_problem(plan, definition, pin)
        if problem:
            problems.append(f"pins[{n}] {pin.label}: {problem}")
    cuts = {p.boundary == Boundary.IN_LEASE_RENEWAL.value for p in plan.pins if p.fault in SEVERS}
    if len(cuts) > 1:
        problems.append(
            "pins: a renewal's COMMIT and a transition's cannot both be cut in one drill "
            "(one proxy cuts one kind): use --for-each-pin"
        )
    return problems


def _step_list_problems(plan: Plan, definition: Definition) -> list[str]:
    """What in the stubs and answers does not fit a step list's steps."""
    steps = {s.name: s for s in definition.steps}
    activities = sorted(n for n, s in steps.items() if s.kind is StepKind.ACTIVITY)
    problems = [
        f"stubs.{name}: no activity {name!r}; activities: {', '.join(activities)}"
        for name in plan.stubs
        if name not in activities
    ]
    problems += [
        f"answers.{name}: {name!r} is not a signal or approval step"
        for name in plan.answers
        if name not in steps or steps[name].kind not in (StepKind.SIGNAL, StepKind.APPROVAL)
    ]
    return problems


def _code_problems(plan: Plan, definition: Definition) -> list[str]:
    """What in the app, stubs and answers does not fit a code-first workflow."""
    problems = []
    if not plan.app:
        problems.append(
            f"app: {definition.name}@{definition.version} is a code-first workflow: it runs "
            "its own code, so name the app that declares it (MODULE:APP, --app)"
        )
    if plan.stubs and not plan.app:
        problems.append("stubs: a code-first step's body is your code; stubs do not replace it")
    signals = code.signals(definition)
    problems += [
        f"answers.{name}: the code waits for no signal {name!r}; it waits for "
        f"{', '.join(signals) or 'none'}"
        for name in plan.answers
        if name not in signals
    ]
    return problems


def _machine_problems(plan: Plan, definition: Definition) -> list[str]:
    """What in the stubs, answers and app does not fit a machine (``plan_machines``)."""
    manifest = machines.manifest_of(definition)
    states = machines.advancing(manifest)
    allowed = ", ".join(machines.MACHINE_BEHAVIOURS)
    problems = []
    if plan.answers:
        problems.append(
            f"answers: {definition.name} is a state machine: it waits for no signal or approval"
        )
    if problem := value_problem(manifest.input, plan.input):
        problems.append(f"input: {problem} (the machine's input is {manifest.input})")
    if plan.app:
        problems.append(
            "app: a machine's own code runs its writes in your tables, which a drill's "
            "throwaway schema does not have; drill it with stubs"
        )
    for name, stub in plan.stubs.items():
        path = f"stubs.{name}"
        if name not in states:
            problems.append(f"{path}: no state {name!r} that advances; states: {', '.join(states)}")
            continue
        if stub.behaviour not in machines.MACHINE_BEHAVIOURS:
            problems.append(
                f"{path}.behaviour: a machine's advance commits with its state or not at all, "
                f"so it is never {stub.behaviour}; one of {allowed}"
            )
        if not stub.idempotent:
            problems.append(
                f"{path}.idempotent: a machine's advance has no effect outside its "
                "transaction to repeat; leave it out"
            )
        try:
            machines.entered(manifest, name, stub.result)
        except ValueError as problem:
            problems.append(f"{path}.result: {problem}")
    return problems


def pin_problem(plan: Plan, definition: Definition, pin: Pin) -> str:
    """Why ``pin`` cannot run on ``definition`` ('' when it can)."""
    return cell_problem(plan, definition, pin, reachable=True)


def cell_problem(plan: Plan, definition: Definition, pin: Pin, reachable: bool = False) -> str:
    """Why no plan could pin ``pin`` ('' when one can): ``pin_problem`` without
    asking, unless ``reachable``, whether this plan's stubs lead a machine to the
    pin's state (another plan's may: a coverage heatmap's cell is applicable)."""
    if definition.mode is Mode.MACHINE:
        return _machine_pin_problem(plan, definition, pin, reachable)
    if definition.mode is Mode.CODE:
        return _code_pin_problem(plan, definition, pin)
    step = next((s for s in definition.steps if s.name == pin.step), None)
    if step is None:
        return f"no step {pin.step!r}; steps: {', '.join(s.name for s in definition.steps)}"
    boundaries = BOUNDARIES_OF.get(step.kind, ())
    if pin.fault not in PIN_FAULTS:
        return f"fault {pin.fault!r} is not one of {', '.join(PIN_FAULTS)}"
    kind = with_article(step.kind.value)
    if not boundaries:
        return f"{kind} step has no work of its own to fault; pin another step"
    allowed = ", ".join(b.value for b in boundaries)
    if pin.boundary not in {b.value for b in Boundary}:  # the step's, not every engine point
        return f"boundary {pin.boundary!r} is not one {kind} step reaches: {allowed}"
    if Boundary(pin.boundary) not in boundaries:
        return f"{kind} step does not reach {pin.boundary}; it reaches {allowed}"
    if step.kind is StepKind.TIMER and step.timeout and step.timeout > MAX_TIMER_WAIT:
        return (
            f"{step.name} waits {format_duration(step.timeout)}; a drill waits for timers "
            f"of at most {format_duration(MAX_TIMER_WAIT)} (it does not fast-forward them)"
        )
    return _fault_problem(plan, pin)


def _code_pin_problem(plan: Plan, definition: Definition, pin: Pin) -> str:
    problem = code.step_problem(definition, pin.step)
    if problem:
        return problem
    if pin.fault not in PIN_FAULTS:
        return f"fault {pin.fault!r} is not one of {', '.join(PIN_FAULTS)}"
    reached = code.boundaries(definition, pin.step)
    if pin.boundary not in {b.value for b in reached}:
        what = "a signal" if reached == code.SIGNAL_BOUNDARIES else "a step call"
        allowed = ", ".join(b.value for b in reached)
        return f"{what} does not reach {pin.boundary}; it reaches {allowed}"
    return _fault_problem(plan, pin)


def _machine_pin_problem(plan: Plan, definition: Definition, pin: Pin, reachable: bool) -> str:
    manifest = machines.manifest_of(definition)
    states = machines.advancing(manifest)
    if pin.step not in states:
        what = "is a terminal state: it never advances" if manifest.is_terminal(pin.step) else ""
        return f"{pin.step!r} {what or 'is no state of the machine'}; states: {', '.join(states)}"
    if pin.fault not in WORKER_FAULTS | {RESTART_DATABASE}:
        faults = ", ".join((*(a.value for a in Action), RESTART_DATABASE))
        return f"fault {pin.fault!r} does not apply to a machine's advance; one of {faults}"
    if pin.boundary not in {b.value for b in machines.MACHINE_BOUNDARIES}:
        allowed = ", ".join(b.value for b in machines.MACHINE_BOUNDARIES)
        return f"a machine's advance does not reach {pin.boundary}; it reaches {allowed}"
    problem = _fault_problem(plan, pin)
    path = machines.walk(manifest, plan.stubs) if reachable and not problem else [pin.step]
    if pin.step in path:
        return problem
    return f"{pin.step} never advances with this plan's stubs: the execution goes " + (
        machines.route(path)
    )


def _fault_problem(plan: Plan, pin: Pin) -> str:
    boundary = Boundary(pin.boundary)
    if pin.fault == RESTART_DATABASE and boundary is Boundary.BEFORE_SIGNAL_ACK:
        return (
            "restart_database holds a worker at its boundary while the server restarts; at "
            "before_signal_ack the signal is committed and its sender asks the server "
            "nothing more: pin it on a step's worker boundary"
        )
    if pin.fault == DUPLICATE_SIGNAL and boundary is not Boundary.BEFORE_SIGNAL_ACK:
        return "duplicate_signal goes with before_signal_ack (a lost ack: sent again), only there"
    if pin.fault in SEVERS and boundary in NO_COMMIT_LEFT:
        return f"{pin.fault} cuts a COMMIT, and at {pin.boundary} this step's was answered already"
    if (
        boundary is Boundary.IN_LEASE_RENEWAL
        and not plan.app  # your handler's time is yours: a pin it never reaches fails saying so
        and plan.stub(pin.step).seconds < RENEWAL_SLOW_SECONDS
    ):
        return (
            f"in_lease_renewal is reached only while a handler runs longer than a renewal: give "
            f"stubs.{pin.step} behaviour slow with seconds >= {RENEWAL_SLOW_SECONDS:g}"
        )
    return ""


def restarts(plan: Plan) -> bool:
    """Whether ``plan`` restarts the database (so needs a server the drill owns)."""
    return any(p.fault == RESTART_DATABASE for p in plan.pins)


def steps_of(definition: Definition) -> list[str]:
    """The steps a pin may name: a step list's steps, a machine's states that advance."""
    if definition.mode is Mode.MACHINE:
        return machines.advancing(machines.manifest_of(definition))
    if definition.mode is Mode.CODE:
        return code.steps(definition)
    return [s.name for s in definition.steps]


def boundaries_of(definition: Definition, step: str) -> tuple[Boundary, ...]:
    """The boundaries ``step`` of ``definition`` reaches with its own work (none for a
    step that has none, or that ``definition`` does not have)."""
    if definition.mode is Mode.MACHINE:
        return machines.MACHINE_BOUNDARIES if step in steps_of(definition) else ()
    if definition.mode is Mode.CODE:
        return code.boundaries(definition, step)
    found = next((s for s in definition.steps if s.name == step), None)
    return BOUNDARIES_OF.get(found.kind, ()) if found else ()


def holds_on_unknown(definition: Definition, step: str) -> bool:
    """Whether an unknown outcome of ``step`` waits for an operator (by design)."""
    found = next((s for s in definition.steps if s.name == step), None)
    return found is not None and found.on_unknown is UnknownPolicy.HOLD


def matrix(plan: Plan, definition: Definition, limit: int = MAX_PINS) -> Plan:
    """``plan`` with every applicable boundary x fault pinned on every step (the full
    matrix); PlanInvalid when it would exceed ``limit`` pins. ``after_claim`` is pinned
    on the first step only: the steps after an activity are handed on to its worker
    with its outcome (eager dispatch), so whether they are claimed is up to timing (a
    machine's every advance is claimed)."""
    steps = steps_of(definition)
    eager = definition.mode is Mode.ORCHESTRATION
    pins = [
        Pin(step, boundary.value, fault)
        for step in steps
        for boundary in boundaries_of(definition, step)
        if boundary is not Boundary.AFTER_CLAIM or step == steps[0] or not eager
        if boundary is not Boundary.IN_LEASE_RENEWAL
        or plan.stub(step).seconds >= RENEWAL_SLOW_SECONDS  # an app's handlers: time unknown
        for fault in FAULTS
        if not pin_problem(plan, definition, Pin(step, boundary.value, fault))
    ]
    if len(pins) > limit:
        raise PlanInvalid(
            [f"pins: the full matrix of {definition.name} has {len(pins)} pins, more than {limit}"]
        )
    start = default_input(definition) if plan.input is None else plan.input
    return Plan(**{**plan.__dict__, "pins": tuple(pins), "input": start})


def default_input(definition: Definition) -> Any:
    """The input a new plan of ``definition`` starts with: null, or for a machine (whose
    input has a type) that type's zero."""
    if definition.mode is Mode.MACHINE:
        return FIELD_TYPES[machines.manifest_of(definition).input]()
    return None


def for_each_pin(plan: Plan) -> list[Plan]:
    """One plan per pin (``--for-each-pin``): each drill breaks one thing."""
    return [Plan(**{**plan.__dict__, "pins": (pin,)}) for pin in plan.pins]
