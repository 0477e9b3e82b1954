"""Hypothesis strategies for valid workflow definition documents.

``valid_definition_documents()`` draws exchange-format documents (plain JSON values)
that ``engine.model.validation.parse_definition`` accepts: every step kind,
activities with and without compensation, parallels with their join, and races of
signal, approval and timer branches. Steps are placed in a random order that keeps
the structural rules (a branch after its owner, a join after its parallel), and
optional fields are sometimes left out so defaults are exercised too. Shrinking goes
towards few, small blocks in definition order, which keeps failures readable.
"""

from __future__ import annotations

import string
from typing import Any

from hypothesis import strategies as st

from engine.model.definitions import Mode, UnknownPolicy
from engine.model.durations import parse_duration
from engine.model.limits import MAX_FAN_OUT, MAX_PAYLOAD_BYTES, MAX_RETRY_ATTEMPTS

Document = dict[str, Any]
Placed = tuple[Document, str | None]
"""A step and the name of the step it must come after (its owner), if any."""

_FIRST = string.ascii_letters + string.digits
_REST = _FIRST + "._-"

# (unit, largest amount) pairs that keep a duration within the engine's bounds.
_TIMEOUT_UNITS = (("ms", 999_999), ("s", 86_400), ("m", 10_000), ("h", 8_760), ("d", 365))
_DELAY_UNITS = (("ms", 999_999), ("s", 86_400), ("m", 43_200), ("h", 720), ("d", 30))

_SINGLE_KINDS = ("activity", "signal", "approval", "timer", "child")
_RACE_BRANCH_KINDS = st.sampled_from(("signal", "approval", "timer"))
_MODES = st.sampled_from([Mode.ORCHESTRATION.value, Mode.CHOREOGRAPHY.value])
"""The step-list modes (a machine's document has no steps: ``tests/unit/machines.py``)."""
_CHOICES = st.integers(0, 255)
_BLOCK_SHAPES = st.one_of(
    st.sampled_from(_SINGLE_KINDS).map(lambda kind: (kind, 1)),
    st.integers(1, 3).map(lambda n: ("parallel", n + 2)),  # parallel, n branches, join
    st.integers(1, 3).map(lambda n: ("race", n + 1)),  # race, n branches
)


def json_values() -> st.SearchStrategy[Any]:
    """Any JSON value: what a handler may return or a signal may carry."""
    return st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
        max_leaves=12,
    )


def identifiers(max_size: int = 12) -> st.SearchStrategy[str]:
    """Valid names: definition names and versions, step names, targets."""
    return st.builds(
        str.__add__,
        st.sampled_from(_FIRST),
        st.text(alphabet=_REST, max_size=max_size - 1),
    )


def durations(units: tuple[tuple[str, int], ...] = _TIMEOUT_UNITS) -> st.SearchStrategy[str]:
    """Duration strings such as ``250ms`` or ``3d`` within the given unit bounds."""
    return st.one_of(
        *(st.integers(1, most).map(lambda n, unit=unit: f"{n}{unit}") for unit, most in units)
    )


def limits() -> st.SearchStrategy[int]:
    """Input or result limits in bytes."""
    return st.integers(1, MAX_PAYLOAD_BYTES)


_DELAYS = durations(_DELAY_UNITS)
_ATTEMPTS = st.integers(1, MAX_RETRY_ATTEMPTS)


@st.composite
def retry_policies(draw: st.DrawFn) -> Document:
    """A retry policy whose max_delay is at least its initial_delay."""
    initial, maximum = sorted((draw(_DELAYS), draw(_DELAYS)), key=parse_duration)
    return {
        "max_attempts": draw(_ATTEMPTS),
        "initial_delay": initial,
        "max_delay": maximum,
    }


def fingerprints() -> st.SearchStrategy[str]:
    """Complete 64-hex pins (they need not name a registered definition)."""
    return st.text(alphabet="0123456789abcdef", min_size=64, max_size=64)


_IDENTIFIERS = identifiers()
_TIMEOUTS = durations()
_LIMITS = limits()
_RETRIES = retry_policies()
_FINGERPRINTS = fingerprints()

_COMPENSATION = st.fixed_dictionaries(
    {"target": _IDENTIFIERS, "timeout": _TIMEOUTS, "result_limit": _LIMITS, "retry": _RETRIES}
)


@st.composite
def _child_fields(draw: st.DrawFn) -> Document:
    """A child step's fields: its target is the name of the definition it pins."""
    child_name = draw(_IDENTIFIERS)
    pin = {"name": child_name, "version": draw(_IDENTIFIERS), "fingerprint": draw(_FINGERPRINTS)}
    return {
        "kind": "child",
        "target": child_name,
        "timeout": draw(_TIMEOUTS),
        "input_limit": draw(_LIMITS),
        "result_limit": draw(_LIMITS),
        "retry": draw(_RETRIES),
        "child_definition": pin,
    }


def _wait_fields(kind: str) -> st.SearchStrategy[Document]:
    return st.fixed_dictionaries(
        {
            "kind": st.just(kind),
            "target": _IDENTIFIERS,
            "timeout": _TIMEOUTS,
            "input_limit": _LIMITS,
        }
    )


_STEP_FIELDS: dict[str, st.SearchStrategy[Document]] = {
    "activity": st.fixed_dictionaries(
        {
            "kind": st.just("activity"),
            "target": _IDENTIFIERS,
            "timeout": _TIMEOUTS,
            "input_limit": _LIMITS,
            "result_limit": _LIMITS,
            "retry": _RETRIES,
        },
        optional={
            "compensation": _COMPENSATION,
            "on_unknown": st.sampled_from([p.value for p in UnknownPolicy]),
        },
    ),
    "signal": _wait_fields("signal"),
    "approval": _wait_fields("approval"),
    "timer": st.fixed_dictionaries({"kind": st.just("timer"), "timeout": _TIMEOUTS}),
    "child": _child_fields(),
}
"""Every field of a step of each single kind except its name."""


def _single(draw: st.DrawFn, kind: str, name: str) -> Document:
    return {"name": name, **draw(_STEP_FIELDS[kind])}


def _fan_out(draw: st.DrawFn, kind: str, name: str, branches: list[str]) -> Document:
    fan_out_limit = draw(st.integers(len(branches), MAX_FAN_OUT))
    return {"name": name, "kind": kind, "branches": branches, "fan_out_limit": fan_out_limit}


def _parallel_block(draw: st.DrawFn, names: list[str]) -> list[Placed]:
    """A parallel, its activity branches and its join, each with the step it must follow."""
    owner, join, *branches = names
    steps: list[Placed] = [(_fan_out(draw, "parallel", owner, branches), None)]
    steps += [(_single(draw, "activity", branch), owner) for branch in branches]
    join_step = {"name": join, "kind": "join", "branches": draw(st.permutations(branches))}
    steps.append((join_step, owner))
    return steps


def _race_block(draw: st.DrawFn, names: list[str]) -> list[Placed]:
    """A race and its signal, approval or timer branches."""
    owner, *branches = names
    steps: list[Placed] = [(_fan_out(draw, "race", owner, branches), None)]
    steps += [(_single(draw, draw(_RACE_BRANCH_KINDS), branch), owner) for branch in branches]
    return steps


def _block(draw: st.DrawFn, kind: str, names: list[str]) -> list[Placed]:
    if kind == "parallel":
        return _parallel_block(draw, names)
    if kind == "race":
        return _race_block(draw, names)
    return [(_single(draw, kind, names[0]), None)]


def _ordered(draw: st.DrawFn, steps: list[Placed]) -> list[Document]:
    """A random order in which every step comes after the step it must follow.

    Each pick shrinks to the first ready step, i.e. towards the order blocks were drawn in.
    """
    pending = list(steps)
    placed: set[str] = set()
    ordered: list[Document] = []
    while pending:
        ready = [i for i, (_, after) in enumerate(pending) if after is None or after in placed]
        step, _ = pending.pop(ready[draw(_CHOICES) % len(ready)])
        placed.add(step["name"])
        ordered.append(step)
    return ordered


@st.composite
def valid_definition_documents(draw: st.DrawFn, max_blocks: int = 6) -> Document:
    """An exchange-format definition document that ``parse_definition`` accepts.

    ``max_blocks`` bounds the number of single steps, parallel blocks (parallel,
    branches, join) and race blocks (race, branches); a document has at most
    ``5 * max_blocks`` steps.
    """
    shapes = draw(st.lists(_BLOCK_SHAPES, min_size=1, max_size=max_blocks))
    total = sum(size for _, size in shapes)
    names = draw(st.lists(_IDENTIFIERS, min_size=total, max_size=total, unique=True))
    steps: list[Placed] = []
    for kind, size in shapes:
        steps += _block(draw, kind, names[len(steps) : len(steps) + size])
    document: Document = {
        "name": draw(_IDENTIFIERS),
        "version": draw(_IDENTIFIERS),
        "mode": draw(_MODES),
        "steps": _ordered(draw, steps),
    }
    deprecated = draw(st.none() | st.booleans())
    if deprecated is not None:  # sometimes left out: it defaults to false
        document["deprecated"] = deprecated
    return document
