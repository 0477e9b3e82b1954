"""Validating a machine's manifest: the ``machine`` mode's part of ``parse_definition``.

Every rule of the seed (000) is a required declaration, never a permissive default,
and every problem of a manifest is recorded with its JSON path and what is allowed,
all at once: each field is read on its own, and the rules across fields (variants
named by ``initial``, ``terminal``, ``timers`` and ``transitions``; the edges' shape)
are checked with whatever could be read. So everything is done while reading, and
``check`` has nothing left to do.

The seed's rules: the initial variant has no fields; terminal and timer names are
real variants; a terminal state is not a timer state; timers wait 1 to 86,400 s;
``max_attempts`` is 1 to 8 and ``max_transitions`` 1 to 256; ``retry`` is
``transactional`` and ``concurrency`` ``parent`` (the only profiles); the grants and
the resource are named, and the grants name that resource (an advance acts as one
database role, its resource's: ``grants``), whose name is short enough to name that
role. Wayline's, for the edges it draws and enforces: every edge joins real variants,
a terminal state has none leaving it, the initial state is not terminal, every state
is reachable from the initial one, and from every state a terminal one is reachable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from engine.model.definitions import Definition
from engine.model.identifiers import name_problem
from engine.model.limits import (
    MAX_MACHINE_ATTEMPTS,
    MAX_MACHINE_GRANTS,
    MAX_MACHINE_STATES,
    MAX_MACHINE_TIMER_SECONDS,
    MAX_MACHINE_TRANSITIONS,
    MAX_STATE_FIELDS,
)
from engine.model.spec_reader import SpecReader, join
from engine.modes.machines import grants as grants_rules
from engine.modes.machines import graph
from engine.modes.machines.field_types import FIELD_TYPES
from engine.modes.machines.manifest import MachineManifest, Variant
from engine.modes.machines.names import grant_problem, type_name_problem

FIELDS = frozenset(
    {
        "function",
        "resource",
        "state",
        "input",
        "initial",
        "terminal",
        "timers",
        "transitions",
        "compensation",
        "grants",
        "max_attempts",
        "max_transitions",
        "retry",
        "concurrency",
    }
)
"""The fields a machine's document has beside the ones every mode's has."""
STATE_FIELDS = frozenset({"name", "variants"})
VARIANT_FIELDS = frozenset({"name", "fields"})
RETRY_PROFILES = ("transactional",)
CONCURRENCY_PROFILES = ("parent",)
UNREAD_TYPE = ""
"""The type of a field whose declared type is none (its error recorded): the variant is
still named, so ``initial``, ``terminal``, the timers and the edges are checked against
the family too, all at once; the manifest itself is never built with it. A variant
whose name is text but no type name, or a name written twice, keeps the family
readable the same way (by the name as written; a repeat counts once)."""


def read(reader: SpecReader, top: dict[str, Any]) -> dict[str, Any] | None:
    """The manifest of the document; None when anything in it is wrong."""
    before = len(reader.errors)
    function = _named(reader, top, "function", name_problem, "the name of the advance")
    resource = _named(
        reader, top, "resource", _resource_problem, "the resource whose rows are the parents"
    )
    family, variants = _state(reader, top.get("state"))
    states = _States(reader, family, variants)
    input_type = reader.choice(top, "input", "", {name: name for name in FIELD_TYPES})
    initial = states.initial(top.get("initial"))
    terminal, every_terminal = states.terminal(top.get("terminal"))
    if initial in terminal:
        reader.error("initial", f"{initial} is terminal: an execution starts in a state it leaves")
    timers = states.timers(top.get("timers"), terminal)
    transitions = states.transitions(top.get("transitions"), terminal)
    if initial is not None and every_terminal and transitions is not None:
        _check_walks(reader, variants, initial, terminal, transitions)
    compensation = _compensation(reader, top)
    grants = _grants(reader, top.get("grants"), resource)
    max_attempts = reader.integer(top, "max_attempts", "", 1, MAX_MACHINE_ATTEMPTS)
    max_transitions = reader.integer(top, "max_transitions", "", 1, MAX_MACHINE_TRANSITIONS)
    retry = _profile(reader, top, "retry", RETRY_PROFILES)
    concurrency = _profile(reader, top, "concurrency", CONCURRENCY_PROFILES)
    if len(reader.errors) > before:
        return None
    in_order = _in_variant_order(variants)
    manifest = MachineManifest(
        function=function,
        resource=resource,
        state=family,
        variants=tuple(variants),
        input=input_type,
        initial=initial,
        terminal=in_order(terminal),
        timers=tuple((state, timers[state]) for state in in_order(timers)),
        transitions=tuple(
            (state, in_order(transitions[state]))
            for state in in_order(transitions)
            if transitions[state]
        ),
        compensation=compensation,
        grants=tuple(sorted(grants)),
        max_attempts=max_attempts,
        max_transitions=max_transitions,
        retry=retry,
        concurrency=concurrency,
    )
    return {"manifest": manifest}


def _in_variant_order(variants: list[Variant]) -> Callable[[Iterable[str]], tuple[str, ...]]:
    """Sorts variant names as the family declares them: the one order of the sets of
    states a manifest holds, so writing them in another order is the same manifest."""
    position = {v.name: i for i, v in enumerate(variants)}
    return lambda names: tuple(sorted(names, key=position.__getitem__))


def check(reader: SpecReader, definition: Definition) -> None:
    """Nothing: a manifest's rules across fields are checked while it is read, so that
    a wrong bound never hides a wrong edge."""


def _state(reader: SpecReader, raw: Any) -> tuple[str | None, list[Variant] | None]:
    """The family's name and its variants (None for a part that cannot be used)."""
    obj = reader.required_object(raw, "state", STATE_FIELDS, "{name, variants} of the states")
    if obj is None:
        return None, None
    family = reader.string(obj, "name", "state", type_name_problem)
    raw_variants = obj.get("variants")
    where = "state.variants"
    if not isinstance(raw_variants, list) or not 1 <= len(raw_variants) <= MAX_MACHINE_STATES:
        reader.error(where, f"must be a list of 1 to {MAX_MACHINE_STATES} variants")
        return family, None
    variants = [_variant(reader, raw, join(where, i)) for i, raw in enumerate(raw_variants)]
    positions: dict[str, int] = {}
    for i, variant in enumerate(variants):
        if variant is None:
            continue
        if variant.name in positions:
            reader.error(
                join(join(where, i), "name"), f"duplicates variant {positions[variant.name]}"
            )
        positions.setdefault(variant.name, i)
    if None in variants:
        return family, None
    return family, [variants[i] for i in positions.values()]


def _variant(reader: SpecReader, raw: Any, path: str) -> Variant | None:
    obj = reader.object(raw, path, VARIANT_FIELDS)
    if obj is None:
        return None
    written = obj.get("name")
    name = reader.string(obj, "name", path, type_name_problem)
    if name is None and isinstance(written, str) and written:
        name = written
    where = join(path, "fields")
    shape = f"an object of up to {MAX_STATE_FIELDS} field names and their types"
    fields = obj.get("fields", {})
    if not isinstance(fields, dict) or len(fields) > MAX_STATE_FIELDS:
        reader.error(where, f"must be {shape}")
        return None
    types = {name: name for name in FIELD_TYPES}
    read = []
    for key in fields:
        if problem := type_name_problem(key):
            reader.error(join(where, key), f"field name {problem}")
        read.append((key, reader.choice(fields, key, where, types) or UNREAD_TYPE))
    return None if name is None else Variant(name, tuple(read))


@dataclass
class _States:
    """The reads that name variants: each name is checked against the family, when
    the family could be read (otherwise only the shape of the field is checked)."""

    reader: SpecReader
    family: str | None
    variants: list[Variant] | None

    def known(self, value: Any, path: str) -> str | None:
        """``value`` when it names a variant; else None, with the error recorded."""
        if not isinstance(value, str):
            self.reader.error(path, "must be the name of a variant")
            return None
        if self.variants is not None and value not in {v.name for v in self.variants}:
            self.reader.error(path, f"{value} is not a variant of {self.family or 'the state'}")
            return None
        return value

    def initial(self, value: Any) -> str | None:
        if value is None:
            self.reader.error("initial", "is required: the variant an execution starts in")
            return None
        name = self.known(value, "initial")
        if name is None or self.variants is None:
            return None
        if next(v for v in self.variants if v.name == name).fields:
            self.reader.error("initial", f"{name} must have no fields")
            return None
        return name

    def names(self, value: Any, path: str, low: int, shape: str) -> tuple[list[str], bool]:
        """The distinct variant names of a list of at least ``low`` (``shape`` says so)
        that could be read, and whether that is all of them."""
        if value is None:
            self.reader.error(path, f"is required: {shape}")
            return [], False
        if not isinstance(value, list) or len(value) < low:
            self.reader.error(path, f"must be {shape}")
            return [], False
        names: list[str] = []
        for i, item in enumerate(value):
            name = self.known(item, join(path, i))
            if name is not None and name in names:
                self.reader.error(join(path, i), f"names {name} twice")
            elif name is not None:
                names.append(name)
        return names, len(names) == len(value)

    def terminal(self, value: Any) -> tuple[list[str], bool]:
        return self.names(value, "terminal", 1, "a list of 1 or more variant names")

    def timers(self, value: Any, terminal: list[str]) -> dict[str, int] | None:
        obj = _mapping(
            self.reader,
            value,
            "timers",
            "an object of timer states and their seconds ({} for none)",
        )
        if obj is None:
            return None
        timers: dict[str, int] = {}
        for key in obj:
            where = join("timers", key)
            seconds = self.reader.integer(obj, key, "timers", 1, MAX_MACHINE_TIMER_SECONDS)
            if self.known(key, where) is None:
                continue
            if key in terminal:
                self.reader.error(where, "a terminal state cannot have a timer")
            elif seconds is not None:
                timers[key] = seconds
        return timers if len(timers) == len(obj) else None

    def transitions(self, value: Any, terminal: list[str]) -> dict[str, list[str]] | None:
        obj = _mapping(self.reader, value, "transitions", "an object of each state's next states")
        if obj is None:
            return None
        edges: dict[str, list[str]] = {}
        for key, targets in obj.items():
            where = join("transitions", key)
            source = self.known(key, where)
            names, complete = self.names(targets, where, 0, "a list of variant names")
            if source is None or not complete:
                continue
            if names and source in terminal:
                self.reader.error(where, "a terminal state cannot have outgoing edges")
                continue
            edges[source] = names
        return edges if len(edges) == len(obj) else None


def _check_walks(
    reader: SpecReader,
    variants: list[Variant] | None,
    initial: str,
    terminal: list[str],
    edges: dict[str, list[str]],
) -> None:
    """Every state is reachable from the initial one, and a terminal one from each."""
    assert variants is not None  # the initial state was found among them
    reached = graph.reachable(initial, edges)
    order = [v.name for v in variants]
    for name in order:
        if name not in reached:
            reader.error("transitions", f"{name} is unreachable from {initial}")
    for name in graph.stuck([n for n in order if n in reached], edges, terminal):
        reader.error("transitions", f"no terminal state is reachable from {name}")


def _mapping(reader: SpecReader, value: Any, path: str, shape: str) -> dict[str, Any] | None:
    """A required object whose keys are the document's own (variant names)."""
    if value is None:
        reader.error(path, f"is required: {shape}")
        return None
    if not isinstance(value, dict):
        reader.error(path, f"must be {shape}")
        return None
    return value


def _named(
    reader: SpecReader, top: dict[str, Any], key: str, check: Callable[[Any], str | None], what: str
) -> str | None:
    """A required name; when it is missing the error says what it names."""
    if top.get(key) is None:
        reader.error(key, f"is required: {what}")
        return None
    return reader.string(top, key, "", check)


def _compensation(reader: SpecReader, top: dict[str, Any]) -> str | None:
    """The optional compensation's name (absent or null: the machine has none)."""
    if top.get("compensation") is None:
        return None
    return reader.string(top, "compensation", "", name_problem)


def _resource_problem(value: Any) -> str | None:
    return type_name_problem(value) or grants_rules.resource_problem(value)


def _grants(reader: SpecReader, value: Any, resource: str | None) -> list[str] | None:
    """The grants, each on the machine's own ``resource`` (when it could be read)."""
    shape = f"a list of up to {MAX_MACHINE_GRANTS} grants ([] for none)"
    if value is None:
        reader.error("grants", f"is required: {shape}")
        return None
    if not isinstance(value, list) or len(value) > MAX_MACHINE_GRANTS:
        reader.error("grants", f"must be {shape}")
        return None
    grants: list[str] = []
    for i, grant in enumerate(value):
        if problem := grant_problem(grant) or (
            resource and grants_rules.foreign_grant_problem(grant, resource)
        ):
            reader.error(join("grants", i), problem)
        elif grant in grants:
            reader.error(join("grants", i), f"names {grant} twice")
        else:
            grants.append(grant)
    return grants if len(grants) == len(value) else None


def _profile(
    reader: SpecReader, top: dict[str, Any], key: str, profiles: tuple[str, ...]
) -> str | None:
    """A profile field; today each has one profile, which must still be declared."""
    value = top.get(key)
    if value in profiles:
        return value
    allowed = " or ".join(f'"{p}"' for p in profiles)
    only = f"(the only {key} profile)" if len(profiles) == 1 else f"({key} profiles)"
    reader.error(key, f"{'is required:' if value is None else 'must be'} {allowed} {only}")
    return None
