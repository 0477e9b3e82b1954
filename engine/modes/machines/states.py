"""The Python form of a state space: a sealed family of frozen-dataclass variants.

The seed declares a machine's states as an enum whose variants may carry fields
(``Completed(message: Text)``); Python has no such enum, so a family is a direct
subclass of ``MachineState`` and each of its variants a direct subclass of the family
decorated with ``@variant``, which makes it a frozen dataclass and records it in
declaration order::

    class Approval(MachineState): ...

    @variant
    class InReview(Approval):
        reminders: int

The family is sealed: a variant cannot be subclassed, and once a machine is declared
from a family (``engine.modes.machines.declaration``) no variant can be added to it,
so the manifest's state space is the whole state space the code can produce.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, ClassVar, TypeVar

from engine.modes.machines.field_types import type_name

S = TypeVar("S", bound=type)


class MachineState:
    """The base of every state family (see the module's docstring)."""

    _variants: ClassVar[list[type[MachineState]]]
    _sealed_by: ClassVar[str]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__bases__ == (MachineState,):
            cls._variants = []
            cls._sealed_by = ""
        elif len(cls.__bases__) != 1 or not is_family(cls.__bases__[0]):
            raise TypeError(
                f"{cls.__name__}: a state variant is a direct subclass of one state family "
                "(a direct subclass of MachineState), and is not subclassed itself"
            )


def is_family(cls: object) -> bool:
    """True for a state family: a direct subclass of ``MachineState``."""
    return isinstance(cls, type) and cls.__bases__ == (MachineState,)


def variant(cls: S) -> S:
    """Make ``cls`` a frozen dataclass and a variant of its family (a decorator)."""
    family = cls.__bases__[0]
    if not is_family(family):
        raise TypeError(f"{cls.__name__} is not a subclass of a state family")
    if family._sealed_by:
        raise TypeError(
            f"{family.__name__} is sealed: machine {family._sealed_by} was declared from it"
        )
    made = dataclasses.dataclass(frozen=True)(cls)
    family._variants.append(made)
    return made


def seal(family: type[MachineState], by: str) -> None:
    """Refuse new variants of ``family`` from now on; ``by`` names the machine."""
    family._sealed_by = family._sealed_by or by


def family_document(family: type[MachineState]) -> dict[str, Any]:
    """The manifest's ``state``: the family's name and its variants with their fields.

    TypeError when a subclass of the family was not made a variant: the code could
    produce a state the manifest does not know."""
    if missing := [c.__name__ for c in family.__subclasses__() if c not in family._variants]:
        raise TypeError(f"{', '.join(missing)} of {family.__name__} must be declared @variant")
    return {
        "name": family.__name__,
        "variants": [{"name": v.__name__, "fields": _fields(v)} for v in family._variants],
    }


def _fields(cls: type) -> dict[str, str]:
    hints = typing.get_type_hints(cls)
    return {f.name: type_name(hints[f.name]) for f in dataclasses.fields(cls)}
