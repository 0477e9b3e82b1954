"""Arguments checked against their function's annotations, before any query sends them.

A read of the store takes ids, counts, instants and enum members; given an int where an
id is expected, PostgreSQL answers with driver text (``operator does not exist: text =
smallint``), and a datetime without a time zone is read as if it were in the server's.
``check_arguments`` refuses both in words, with InputRefused, as the client refuses its
own arguments (``check_text``): which argument, what it must be, what it was.

The annotations it reads are the function's own (``typing.get_type_hints``), so a
signature is written once and its checks cannot drift from it. It knows the shapes the
engine's read functions use: ``str``, ``int``, ``bool``, ``datetime``, classes, enums
(a member or a value naming one), ``X | None``, ``Any`` (a datetime must still be
aware), ``tuple[A, B]``, ``list[X]``, ``Sequence[X]`` and ``Collection[X]``; an
annotation of any other shape is not checked.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Collection, Sequence
from datetime import datetime
from enum import Enum
from functools import cache
from typing import Any

from engine.model.errors import InputRefused
from engine.model.inputs import check_text
from engine.model.words import with_article

CONTAINERS: dict[Any, tuple[type, str]] = {
    list: (list, "a list"),
    Sequence: (Sequence, "a sequence (a list or a tuple)"),
    Collection: (Collection, "a collection (a list, a tuple or a set)"),
}
"""Per generic origin, the class its values must be and how a message names it."""
MAX_LISTED_MEMBERS = 8
"""An enum of at most this many members has its values listed in a refusal."""


def check_arguments(function: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    """Refuse (InputRefused) an argument of ``function`` that is not what its annotation
    says; arguments that do not bind are left to the call, which raises TypeError."""
    signature, hints = _annotations(function)
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError:
        return
    for name, value in bound.arguments.items():
        if name in hints:
            check_typed(value, hints[name], f"the {name.replace('_', ' ')}")


@cache
def _annotations(function: Callable[..., Any]) -> tuple[inspect.Signature, dict[str, Any]]:
    """The signature and resolved annotations of ``function``, read once."""
    hints = typing.get_type_hints(function)
    hints.pop("return", None)
    return inspect.signature(function), hints


def check_typed(value: Any, annotation: Any, what: str) -> None:
    """Refuse ``value`` (named ``what``) when it is not of ``annotation``'s type."""
    options = typing.get_args(annotation) if _is_union(annotation) else (annotation,)
    if value is None and type(None) in options:
        return
    kinds = [option for option in options if option is not type(None)]
    if len(kinds) != 1:  # a union of several types: not a shape the reads use
        return
    (kind,) = kinds
    alternative = " or None" if len(options) > len(kinds) else ""
    origin = typing.get_origin(kind)
    if kind is str:
        check_text(value, what)
    elif kind is datetime or (kind is Any and isinstance(value, datetime)):
        _check_instant(value, what, alternative)
    elif origin is tuple:
        _check_tuple(value, typing.get_args(kind), what, alternative)
    elif origin in CONTAINERS:
        _check_items(value, origin, typing.get_args(kind), what, alternative)
    elif kind is Any:
        return
    elif isinstance(kind, type) and issubclass(kind, Enum):
        _check_member(value, kind, what, alternative)
    elif isinstance(kind, type) and not _is_instance(value, kind):
        raise InputRefused(
            f"{what} must be {with_article(kind.__name__)}{alternative}, not {type(value).__name__}"
        )


def _is_union(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType)


def _is_instance(value: Any, kind: type) -> bool:
    """``isinstance``, except that a bool is not taken for an int (``True`` as a limit
    is a mistake, not 1)."""
    return isinstance(value, kind) and not (isinstance(value, bool) and kind is not bool)


def _check_member(value: Any, kind: type[Enum], what: str, alternative: str) -> None:
    """An enum's member, or a value that names one (``"active"`` for
    ``InstanceView.ACTIVE``), as the reads convert it."""
    try:
        kind(value)
    except (ValueError, TypeError):
        members = list(kind)
        listed = ", ".join(repr(member.value) for member in members)
        allowed = f" ({listed})" if len(members) <= MAX_LISTED_MEMBERS else ""
        raise InputRefused(
            f"{what} must be {with_article(kind.__name__)}{alternative} or one of its values"
            f"{allowed}"
        ) from None


def _check_instant(value: Any, what: str, alternative: str) -> None:
    if not isinstance(value, datetime):
        raise InputRefused(f"{what} must be a datetime{alternative}, not {type(value).__name__}")
    if value.utcoffset() is None:
        raise InputRefused(
            f"{what} must be a timezone-aware datetime (e.g. datetime.now(UTC)), not a naive one"
        )


def _check_tuple(value: Any, parts: tuple[Any, ...], what: str, alternative: str) -> None:
    if not isinstance(value, tuple) or len(value) != len(parts):
        raise InputRefused(
            f"{what} must be a tuple of {len(parts)} ({', '.join(map(_named, parts))})"
            f"{alternative}, not {type(value).__name__}"
        )
    for number, (item, part) in enumerate(zip(value, parts, strict=True), 1):
        check_typed(item, part, f"item {number} of {what}")


def _check_items(value: Any, origin: Any, parts: tuple[Any, ...], what: str, alt: str) -> None:
    container, named = CONTAINERS[origin]
    if not isinstance(value, container) or isinstance(value, str | bytes):
        raise InputRefused(f"{what} must be {named}{alt}, not {type(value).__name__}")
    for item in value:
        check_typed(item, parts[0], f"each of {what}")


def _named(annotation: Any) -> str:
    return "any value" if annotation is Any else getattr(annotation, "__name__", str(annotation))
