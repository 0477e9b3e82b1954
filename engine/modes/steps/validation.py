"""Validating a step list: the ``steps`` of a definition document, the step list's part
of ``engine.model.validation.parse_definition``.

``read`` checks each field of each step for its kind; ``check_structure`` then checks
the structure (branches, joins, races, ownership and order). Every problem is recorded
with its JSON path, so the document's errors are reported all at once.

Rules beyond the reference model, chosen so every definition has one clear meaning:
a branch step comes after its parallel or race, every parallel has exactly one join
placed after it, and race branches may also be timers (a signal raced against a
timeout is the common case).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from engine.model.definitions import (
    CompensationSpec,
    Definition,
    DefinitionRef,
    RetryPolicy,
    Step,
    StepKind,
    UnknownPolicy,
)
from engine.model.durations import format_duration
from engine.model.identifiers import name_problem
from engine.model.limits import (
    KIB,
    MAX_FAN_OUT,
    MAX_PAYLOAD_BYTES,
    MAX_RETRY_ATTEMPTS,
    MAX_RETRY_DELAY,
    MAX_STEP_TIMEOUT,
    MAX_STEPS,
)
from engine.model.spec_reader import SpecReader, join
from engine.model.words import with_article

FIELDS = frozenset({"steps"})
"""The fields a step list's document has beside the ones every mode's has."""
RETRY_FIELDS = frozenset({"max_attempts", "initial_delay", "max_delay"})
COMPENSATION_FIELDS = frozenset({"target", "timeout", "result_limit", "retry"})
CHILD_FIELDS = frozenset({"name", "version", "fingerprint"})

KIND_FIELDS: dict[StepKind, frozenset[str]] = {
    StepKind.ACTIVITY: frozenset(
        {"target", "timeout", "input_limit", "result_limit", "retry", "compensation", "on_unknown"}
    ),
    StepKind.SIGNAL: frozenset({"target", "timeout", "input_limit"}),
    StepKind.APPROVAL: frozenset({"target", "timeout", "input_limit"}),
    StepKind.TIMER: frozenset({"timeout"}),
    StepKind.CHILD: frozenset(
        {"target", "timeout", "input_limit", "result_limit", "retry", "child_definition"}
    ),
    StepKind.PARALLEL: frozenset({"branches", "fan_out_limit"}),
    StepKind.RACE: frozenset({"branches", "fan_out_limit"}),
    StepKind.JOIN: frozenset({"branches"}),
}
ALL_STEP_FIELDS = frozenset({"name", "kind"}).union(*KIND_FIELDS.values())
RACE_BRANCH_KINDS = (StepKind.SIGNAL, StepKind.APPROVAL, StepKind.TIMER)


def read(reader: SpecReader, top: dict[str, Any]) -> dict[str, Any] | None:
    """The steps of the document; None when any of them is unusable."""
    raw_steps = top.get("steps")
    if not isinstance(raw_steps, list) or not 1 <= len(raw_steps) <= MAX_STEPS:
        reader.error("steps", f"must be a list of 1 to {MAX_STEPS} steps")
        return None
    steps = [read_step(reader, raw, join("steps", i)) for i, raw in enumerate(raw_steps)]
    if None in steps:
        check_names(reader, raw_steps)
        return None
    return {"steps": tuple(s for s in steps if s)}


def check_names(reader: SpecReader, raw_steps: list[Any]) -> None:
    """Duplicate names and branches that name no step, in steps not all readable yet.

    The structure check needs every step read; these two need only names, so they are
    reported together with the field errors and a document's problems come in one pass.
    """
    named = [
        (i, raw["name"])
        for i, raw in enumerate(raw_steps)
        if isinstance(raw, dict) and isinstance(raw.get("name"), str)
    ]
    _unique_names(reader, named)
    names = {name for _, name in named}
    for i, raw in enumerate(raw_steps):
        forks = (StepKind.PARALLEL.value, StepKind.RACE.value)
        if not isinstance(raw, dict) or raw.get("kind") not in forks:
            continue
        branches = raw.get("branches")
        for b, branch in enumerate(branches if isinstance(branches, list) else ()):
            if isinstance(branch, str) and branch not in names:
                reader.error(join(join(join("steps", i), "branches"), b), _names_no_step(branch))


def _unique_names(reader: SpecReader, named: list[tuple[int, str]]) -> dict[str, int]:
    """Each name's first position; a later step of the same name is an error."""
    positions: dict[str, int] = {}
    for i, name in named:
        if name in positions:
            reader.error(join(join("steps", i), "name"), f"duplicates step {positions[name]}")
        positions.setdefault(name, i)
    return positions


def _names_no_step(branch: str) -> str:
    return f"names no step: {branch!r}"


def read_step(reader: SpecReader, raw: Any, path: str) -> Step | None:
    """Read one step, checking only the fields its kind allows."""
    obj = reader.object(raw, path, ALL_STEP_FIELDS)
    if obj is None:
        return None
    name = reader.string(obj, "name", path, name_problem)
    kind = _enum(reader, obj, "kind", path, StepKind)
    if kind is None:
        return None
    allowed = KIND_FIELDS[kind] | {"name", "kind"}
    # Fields no kind has were already reported as unknown by reader.object.
    for key in sorted((set(obj) & ALL_STEP_FIELDS) - allowed):
        reader.error(
            join(path, key),
            f"is not allowed on {with_article(kind.value)} step; "
            f"allowed: {', '.join(sorted(allowed))}",
        )
    fields = _KIND_READERS[kind](reader, obj, path)
    if name is None or fields is None:
        return None
    return Step(name=name, kind=kind, **fields)


def _read_activity(reader: SpecReader, obj: dict[str, Any], path: str) -> dict | None:
    fields = {
        "target": reader.string(obj, "target", path, name_problem),
        "timeout": reader.duration(obj, "timeout", path, MAX_STEP_TIMEOUT),
        "input_limit": _limit(reader, obj, "input_limit", path),
        "result_limit": _limit(reader, obj, "result_limit", path),
        "retry": _retry(reader, obj, path),
        "compensation": None,
        "on_unknown": UnknownPolicy.HOLD,
    }
    if "compensation" in obj:
        fields["compensation"] = _compensation(reader, obj["compensation"], path)
    if "on_unknown" in obj:
        fields["on_unknown"] = _enum(reader, obj, "on_unknown", path, UnknownPolicy)
    optional = ("compensation",) if "compensation" not in obj else ()
    return _complete(fields, optional)


def _read_wait(reader: SpecReader, obj: dict[str, Any], path: str) -> dict | None:
    return _complete(
        {
            "target": reader.string(obj, "target", path, name_problem),
            "timeout": reader.duration(obj, "timeout", path, MAX_STEP_TIMEOUT),
            "input_limit": _limit(reader, obj, "input_limit", path),
        }
    )


def _read_timer(reader: SpecReader, obj: dict[str, Any], path: str) -> dict | None:
    return _complete({"timeout": reader.duration(obj, "timeout", path, MAX_STEP_TIMEOUT)})


def _read_child(reader: SpecReader, obj: dict[str, Any], path: str) -> dict | None:
    return _complete(
        {
            "target": reader.string(obj, "target", path, name_problem),
            "timeout": reader.duration(obj, "timeout", path, MAX_STEP_TIMEOUT),
            "input_limit": _limit(reader, obj, "input_limit", path),
            "result_limit": _limit(reader, obj, "result_limit", path),
            "retry": _retry(reader, obj, path),
            "child_definition": _child_ref(reader, obj.get("child_definition"), path),
        }
    )


def _read_fan_out(reader: SpecReader, obj: dict[str, Any], path: str) -> dict | None:
    """The branches and the limit, checked against each other here (at the limit, the
    field to change) so the mismatch is reported with the other field errors."""
    branches = _branches(reader, obj, path)
    limit = reader.integer(obj, "fan_out_limit", path, 1, MAX_FAN_OUT)
    if branches is not None and limit is not None and limit < len(branches):
        reader.error(
            join(path, "fan_out_limit"),
            f"must be at least the number of branches ({len(branches)})",
        )
        return None
    return _complete({"branches": branches, "fan_out_limit": limit})


def _read_join(reader: SpecReader, obj: dict[str, Any], path: str) -> dict | None:
    return _complete({"branches": _branches(reader, obj, path)})


_KIND_READERS = {
    StepKind.ACTIVITY: _read_activity,
    StepKind.SIGNAL: _read_wait,
    StepKind.APPROVAL: _read_wait,
    StepKind.TIMER: _read_timer,
    StepKind.CHILD: _read_child,
    StepKind.PARALLEL: _read_fan_out,
    StepKind.RACE: _read_fan_out,
    StepKind.JOIN: _read_join,
}


def _complete(fields: dict[str, Any], optional: tuple[str, ...] = ()) -> dict | None:
    """The fields when every required one was read, else None (errors are recorded)."""
    missing = [k for k, v in fields.items() if v is None and k not in optional]
    return None if missing else fields


def _enum(reader: SpecReader, obj: dict[str, Any], key: str, path: str, enum: Any) -> Any:
    return reader.choice(obj, key, path, {member.value: member for member in enum})


DEFAULT_PAYLOAD_LIMIT = 64 * KIB
"""``input_limit`` and ``result_limit`` when a step leaves them out: a generous size for
the references and small documents a step usually passes (larger ones say so)."""
DEFAULT_RETRY = RetryPolicy(3, timedelta(seconds=1), timedelta(minutes=1))
"""``retry`` when a step or compensation leaves it out: three attempts, 1 s then 2 s
apart (a transient fault passes, a lasting one is reported within seconds)."""


def _limit(reader: SpecReader, obj: dict[str, Any], key: str, path: str) -> int | None:
    if key not in obj:
        return DEFAULT_PAYLOAD_LIMIT
    return reader.integer(obj, key, path, 1, MAX_PAYLOAD_BYTES)


def _retry(reader: SpecReader, obj: dict[str, Any], path: str) -> RetryPolicy | None:
    """The policy, each field it leaves out taken from ``DEFAULT_RETRY`` (a left-out
    ``max_delay`` is at least the ``initial_delay`` given), as a whole ``retry`` left
    out is: ``{"max_attempts": 5}`` alone says all that most steps need to."""
    if "retry" not in obj:
        return DEFAULT_RETRY
    where = join(path, "retry")
    shape = "{max_attempts, initial_delay, max_delay}"
    retry = reader.required_object(obj.get("retry"), where, RETRY_FIELDS, shape)
    if retry is None:
        return None
    attempts = DEFAULT_RETRY.max_attempts
    if "max_attempts" in retry:
        attempts = reader.integer(retry, "max_attempts", where, 1, MAX_RETRY_ATTEMPTS)
    initial = DEFAULT_RETRY.initial_delay
    if "initial_delay" in retry:
        initial = reader.duration(retry, "initial_delay", where, MAX_RETRY_DELAY)
    maximum = max(DEFAULT_RETRY.max_delay, initial or DEFAULT_RETRY.max_delay)
    if "max_delay" in retry:
        maximum = reader.duration(retry, "max_delay", where, MAX_RETRY_DELAY)
    if initial is not None and maximum is not None and maximum < initial:
        given = "" if "initial_delay" in retry else f" ({format_duration(initial)} when left out)"
        reader.error(join(where, "max_delay"), f"must be at least initial_delay{given}")
        return None
    if attempts is None or initial is None or maximum is None:
        return None
    return RetryPolicy(attempts, initial, maximum)


def _compensation(reader: SpecReader, raw: Any, path: str) -> CompensationSpec | None:
    where = join(path, "compensation")
    obj = reader.object(raw, where, COMPENSATION_FIELDS)
    if obj is None:
        return None
    fields = _complete(
        {
            "target": reader.string(obj, "target", where, name_problem),
            "timeout": reader.duration(obj, "timeout", where, MAX_STEP_TIMEOUT),
            "result_limit": _limit(reader, obj, "result_limit", where),
            "retry": _retry(reader, obj, where),
        }
    )
    return None if fields is None else CompensationSpec(**fields)


def _child_ref(reader: SpecReader, raw: Any, path: str) -> DefinitionRef | None:
    where = join(path, "child_definition")
    shape = "{name, version, fingerprint} of the pinned child"
    obj = reader.required_object(raw, where, CHILD_FIELDS, shape)
    if obj is None:
        return None
    name = reader.string(obj, "name", where, name_problem)
    version = reader.string(obj, "version", where, name_problem)
    fingerprint = reader.string(obj, "fingerprint", where, _fingerprint_problem)
    if name is None or version is None or fingerprint is None:
        return None
    return DefinitionRef(name, version, fingerprint)


def _fingerprint_problem(value: str) -> str | None:
    if len(value) == 64 and all(c in "0123456789abcdef" for c in value):
        return None
    return "must be 64 lowercase hex characters (a SHA-256 fingerprint)"


def _branches(reader: SpecReader, obj: dict[str, Any], path: str) -> tuple[str, ...] | None:
    where = join(path, "branches")
    raw = obj.get("branches")
    if not isinstance(raw, list) or not raw or not all(isinstance(b, str) for b in raw):
        reader.error(where, "must be a non-empty list of step names")
        return None
    if len(set(raw)) != len(raw):
        reader.error(where, "must not name a step twice")
        return None
    return tuple(raw)


def check_structure(reader: SpecReader, definition: Definition) -> None:
    """Rules across steps: unique names, branches, ownership, joins, child pins."""
    positions = _unique_names(reader, [(i, s.name) for i, s in enumerate(definition.steps)])
    structure = _Structure(reader, definition, positions)
    for i, step in enumerate(definition.steps):
        path = join("steps", i)
        if step.kind is StepKind.CHILD:
            _check_child(reader, step, path)
        if step.kind in (StepKind.PARALLEL, StepKind.RACE):
            structure.check_fan_out(step, i, path)
        if step.kind is StepKind.JOIN:
            structure.check_join(step, i, path)
    for step in definition.steps:
        if step.kind is StepKind.PARALLEL and frozenset(step.branches) not in structure.joined:
            i = positions[step.name]
            reader.error(join(join("steps", i), "branches"), "needs exactly one join after it")


def _check_child(reader: SpecReader, step: Step, path: str) -> None:
    child = step.child_definition
    if child is not None and step.target != child.name:
        reader.error(join(path, "target"), "must equal child_definition.name")


@dataclass
class _Structure:
    """What the fan-out and join checks share while they walk one definition: where each
    step stands, which fan-out owns each branch, and which join took each branch set."""

    reader: SpecReader
    definition: Definition
    positions: dict[str, int]
    owned: dict[str, str] = field(default_factory=dict)
    joined: dict[frozenset[str], str] = field(default_factory=dict)

    def check_fan_out(self, step: Step, index: int, path: str) -> None:
        where = join(path, "branches")
        allowed = (StepKind.ACTIVITY,) if step.kind is StepKind.PARALLEL else RACE_BRANCH_KINDS
        kinds = ", ".join(k.value for k in allowed)
        for b, branch in enumerate(step.branches):
            at = join(where, b)
            target = self.definition.step(branch)
            if branch == step.name:
                self.reader.error(at, "a step cannot be its own branch")
            elif target is None:
                self.reader.error(at, _names_no_step(branch))
            elif target.kind not in allowed:
                self.reader.error(
                    at,
                    f"{branch!r} is {with_article(target.kind.value)} step; {step.kind.value} "
                    f"branches must be: {kinds}",
                )
            elif self.positions[branch] < index:
                self.reader.error(at, f"{branch!r} must come after {step.name!r}")
            elif branch in self.owned:
                self.reader.error(at, f"{branch!r} already belongs to {self.owned[branch]!r}")
            else:
                self.owned[branch] = step.name

    def check_join(self, step: Step, index: int, path: str) -> None:
        where = join(path, "branches")
        branches = frozenset(step.branches)
        parallel = next(
            (
                s
                for s in self.definition.steps
                if s.kind is StepKind.PARALLEL and frozenset(s.branches) == branches
            ),
            None,
        )
        if parallel is None:
            self.reader.error(where, "must list exactly the branches of one parallel step")
        elif branches in self.joined:
            joiner = self.joined[branches]
            self.reader.error(
                where, f"the branches of {parallel.name!r} are already joined by {joiner!r}"
            )
        elif self.positions[parallel.name] > index:
            self.reader.error(where, f"the join must come after {parallel.name!r}")
        else:
            self.joined[branches] = step.name
