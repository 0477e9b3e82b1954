"""The mappings of replayed state, and the one way the fold adds an entry to any of them
(``with_entry``): an event costs about the square root of the entries, not all of them.

The fold never changes a state; each event gives a new one. Copying a mapping to set
one entry (``{**mapping, key: value}``) costs every entry it holds, so a long instance
(thousands of steps) paid for all of its finished steps on every event: folding its
whole history grew with the square of its length. A ``LayeredMap`` instead shares
what has not changed: a base mapping it never copies, the entries changed since in two
tiers beside it (``older``, merged now and then, and ``recent``, copied on each update
and kept short), so an update copies ``recent`` and, once in a while, ``older``.
Small mappings stay plain dicts (``SMALL``): copying a few entries costs less than a
layer.

A snapshot's mappings are layered maps over ``Encoded`` bases: the keys in their order
and each entry's text, decoded the first time that entry is read and kept decoded from
then on. Opening a long instance thus costs the entries the reader touches, not every
entry the state holds, and folding the events after the snapshot does not decode them.

Iteration order is the order a plain dict would have after the same updates (a key
keeps its place, a new key comes last): the state's order is part of what it means
(compensation reverses completion order, and the digest lists entries in order).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from math import isqrt
from typing import Any, TypeVar

K = TypeVar("K")
V = TypeVar("V")

SMALL = 64
"""A plain dict of fewer entries than this is copied to set one (see the module)."""
MIN_RECENT = 16
"""The fewest changes ``recent`` holds before it is merged into ``older``."""
_ABSENT = object()


def _found(value: Any, key: str) -> Any:
    """``value`` as ``get`` gave it for ``key``; KeyError when it was absent."""
    if value is _ABSENT:
        raise KeyError(key)
    return value


class Encoded(Mapping[str, V]):
    """A snapshot's entries as texts, each decoded the first time it is read.

    The decoded entries are a cache shared by every map layered on this one: decoding is
    a pure function of the text, so sharing it changes no value."""

    __slots__ = ("_decode", "_decoded", "_texts")

    def __init__(self, texts: Mapping[str, str], decode: Callable[[str], V]) -> None:
        self._texts = texts
        self._decode = decode
        self._decoded: dict[str, V] = {}

    def __getitem__(self, key: str) -> V:
        return _found(self.get(key, _ABSENT), key)

    def get(self, key: str, default: Any = None) -> Any:
        """``Mapping.get`` without its exception: a decision looks up every step."""
        decoded = self._decoded
        if key in decoded:
            return decoded[key]
        text = self._texts.get(key)
        if text is None:
            return default
        value = decoded[key] = self._decode(text)
        return value

    def __contains__(self, key: object) -> bool:
        return key in self._texts

    def __iter__(self) -> Iterator[str]:
        return iter(self._texts)

    def __len__(self) -> int:
        return len(self._texts)

    def text(self, key: str) -> str | None:
        """The text ``key``'s entry is decoded from."""
        return self._texts.get(key)


class LayeredMap(Mapping[str, V]):
    """An immutable mapping: a shared base and the entries changed since (see the module)."""

    __slots__ = ("_base", "_length", "_older", "_recent")

    def __init__(
        self,
        base: Mapping[str, V],
        older: dict[str, V] | None = None,
        recent: dict[str, V] | None = None,
        length: int | None = None,
    ) -> None:
        self._base = base
        self._older = {} if older is None else older
        self._recent = {} if recent is None else recent
        self._length = len(base) if length is None else length

    def __getitem__(self, key: str) -> V:
        return _found(self.get(key, _ABSENT), key)

    def get(self, key: str, default: Any = None) -> Any:
        """The newest entry of ``key``: changed recently, changed earlier, or the base's."""
        recent = self._recent
        if key in recent:
            return recent[key]
        older = self._older
        if key in older:
            return older[key]
        return self._base.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._recent or key in self._older or key in self._base

    def __iter__(self) -> Iterator[str]:
        base, older = self._base, self._older
        yield from base
        for key in older:
            if key not in base:
                yield key
        for key in self._recent:
            if key not in base and key not in older:
                yield key

    def __len__(self) -> int:
        return self._length

    def __repr__(self) -> str:
        return f"LayeredMap({dict(self.items())!r})"

    def encoded(self, key: str) -> str | None:
        """The text ``key``'s entry was restored from, when it has not changed since:
        what encoding it again would give, so a snapshot of a restored state copies it."""
        if key in self._recent or key in self._older or type(self._base) is not Encoded:
            return None
        return self._base.text(key)

    def with_entry(self, key: str, value: V) -> LayeredMap[V]:
        """This map with ``key`` set to ``value``, sharing every unchanged entry."""
        grows = key not in self
        older, recent = self._older, {**self._recent, key: value}
        if len(recent) > max(MIN_RECENT, isqrt(len(older))):
            older, recent = {**older, **recent}, {}
        return LayeredMap(self._base, older, recent, self._length + grows)


def restored(texts: Mapping[str, str], decode: Callable[[str], V]) -> LayeredMap[V]:
    """A snapshot's mapping: ``texts`` by key, each decoded by ``decode`` when read."""
    return LayeredMap(Encoded(texts, decode))


def with_entry(mapping: Mapping[K, V], key: K, value: V) -> Mapping[K, V]:
    """``mapping`` with ``key`` set to ``value``, as ``{**mapping, key: value}`` orders it,
    sharing its unchanged entries once it is not small (see the module). Its type is
    compared, not checked with ``isinstance``: an ABC's check costs more, on every event
    the fold applies."""
    if type(mapping) is LayeredMap:
        return mapping.with_entry(key, value)  # type: ignore[arg-type, return-value]
    if len(mapping) < SMALL:
        return {**mapping, key: value}
    return LayeredMap(mapping).with_entry(key, value)  # type: ignore[arg-type, return-value]
