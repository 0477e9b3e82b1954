"""Mappings of replayed state that decode their entries when they are read, and the one
way the fold adds an entry to any mapping of the state (``with_entry``).

A long instance's state is mostly finished steps: thousands of progress records that a
cold load need not look at. A snapshot therefore keeps each entry of a mapping as its
own encoded text (``engine.replay.snapshots``), and restoring it builds a
``DeferredMap``: the keys in their order and each entry's text, decoded the first time
that entry is read and kept decoded from then on. Opening a long instance thus costs
the entries the reader touches, not every entry the state holds.

Folding the events after the snapshot must not undo that: ``{**mapping, key: value}``
would decode and copy every entry once per event. ``with_entry`` gives a deferred map
that shares the encoded entries and carries the entries changed since the snapshot
beside them, so an event costs the changes since the snapshot, not the whole state.
Iteration order is the order a plain dict would have after the same updates (a key
keeps its place, a new key comes last): the state's order is part of what it means
(compensation reverses completion order, and the digest lists entries in order).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class DeferredMap(Mapping[str, V]):
    """An immutable mapping whose entries are encoded texts until read (see the module).

    The decoded entries are a cache shared by every map built from the same snapshot:
    decoding is a pure function of the text, so sharing it changes no value."""

    __slots__ = ("_changes", "_decode", "_decoded", "_encoded", "_length")

    def __init__(
        self,
        encoded: Mapping[str, str],
        decode: Callable[[str], V],
        *,
        decoded: dict[str, V] | None = None,
        changes: Mapping[str, V] | None = None,
        length: int | None = None,
    ) -> None:
        self._encoded = encoded
        self._decode = decode
        self._decoded = {} if decoded is None else decoded
        self._changes = {} if changes is None else changes
        self._length = len(encoded) if length is None else length

    def __getitem__(self, key: str) -> V:
        changes = self._changes
        if key in changes:
            return changes[key]
        decoded = self._decoded
        if key in decoded:
            return decoded[key]
        value = decoded[key] = self._decode(self._encoded[key])
        return value

    def get(self, key: str, default: Any = None) -> Any:
        if key in self._changes or key in self._encoded:
            return self[key]
        return default

    def __contains__(self, key: object) -> bool:
        return key in self._changes or key in self._encoded

    def __iter__(self) -> Iterator[str]:
        encoded = self._encoded
        yield from encoded
        for key in self._changes:
            if key not in encoded:
                yield key

    def __len__(self) -> int:
        return self._length

    def __repr__(self) -> str:
        return f"DeferredMap({dict(self.items())!r})"

    def encoded(self, key: str) -> str | None:
        """The text ``key``'s entry was restored from, when it has not changed since:
        what encoding it again would give, so a snapshot of a restored state copies it."""
        return None if key in self._changes else self._encoded.get(key)

    def with_entry(self, key: str, value: V) -> DeferredMap[V]:
        """This map with ``key`` set to ``value``, sharing every unchanged entry."""
        grows = key not in self
        return DeferredMap(
            self._encoded,
            self._decode,
            decoded=self._decoded,
            changes={**self._changes, key: value},
            length=self._length + grows,
        )


def with_entry(mapping: Mapping[K, V], key: K, value: V) -> Mapping[K, V]:
    """``mapping`` with ``key`` set to ``value``, as ``{**mapping, key: value}`` orders it;
    a deferred map stays deferred (see the module). Its type is compared, not checked
    with ``isinstance``: an ABC's check costs more, on every event the fold applies."""
    if type(mapping) is DeferredMap:
        return mapping.with_entry(key, value)  # type: ignore[arg-type, return-value]
    return {**mapping, key: value}
