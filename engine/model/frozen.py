"""Changing one field of a frozen dataclass, fast: the replayed state's update.

Replay applies every event by copying an immutable state with a few fields changed,
several times per event. ``dataclasses.replace`` re-runs ``__init__`` for that and
costs several times more than a copy; the state classes have no ``__post_init__`` to
re-run, so ``evolve`` copies the fields from the instance dictionary instead and checks
only that the changed names are fields. Whatever else the dictionary holds (a cached
property, such as a state's digest) is not copied: it belongs to the old values.
"""

from __future__ import annotations

from dataclasses import fields
from functools import cache
from typing import Any, TypeVar

T = TypeVar("T")


def evolve(state: T, **changes: Any) -> T:
    """A copy of the frozen dataclass ``state`` with ``changes`` applied."""
    names = _field_names(type(state))
    unknown = changes.keys() - names
    if unknown:
        raise TypeError(f"{type(state).__name__} has no field {', '.join(sorted(unknown))}")
    copy = object.__new__(type(state))
    values = copy.__dict__
    values.update(state.__dict__)
    if len(values) != len(names):
        for cached in values.keys() - names:
            del values[cached]
    values.update(changes)
    return copy


@cache
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in fields(cls))
