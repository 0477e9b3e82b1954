"""Snapshots of replayed state: what makes opening a long instance cost what a short one does.

Folding a whole history costs time in proportion to its length (and each event a little
more as the state grows). A snapshot is the folded ``Instance`` at one position, as
lines of canonical JSON: opening an instance reads its newest snapshot and folds only
the events after it. A snapshot is taken by the transition that crosses a multiple of
``SNAPSHOT_INTERVAL_EVENTS`` (``due``), so the events after the newest one are always
fewer than the interval; the store writes it in that transition's own PostgreSQL
transaction (``engine.store.commits``), never on its own.

A snapshot is only a cache of what history says, so it is never trusted blindly:
``restore`` gives None (the reader then replays the whole history) unless the snapshot
was written by this fold (``FOLD_VERSION``), its text has the digest written with it
(SHA-256 of the text: damage or a partial write shows), its first line decodes completely
with every value of its declared type and its sections are whole, it is at the position
it says, and its pinned definition resolves in the registry with the same fingerprint.
The entries of its mappings are decoded when first read, not on the way: the digest
says their text is what this engine wrote, and a change to what an entry holds bumps
``FOLD_VERSION``, so one that does not decode is a defect of the engine, raised where it
is read, never a damaged row taken for state. The decoded state's own digest
(``Instance.digest``) is not recomputed on the way: it costs more than the decode on a
large state, and that the codec gives back exactly the state it was given is what the
property tests and the drills (D7, I9: the snapshot path against a full replay, by
``Instance.digest``) check. Every mode's state is folded by the
one ``engine.replay.fold``, and the codec covers every field of ``Instance`` (a machine's
progress, a code-first run's journal, inbox, waits and its declared steps with their
options), so all three modes are snapshotted alike.

The encoding follows the dataclasses' type hints: a dataclass is an object of the fields
that differ from their defaults, a mapping a list of [key, value] pairs (its order is
part of the state: compensation reverses completion order, and the digest lists
progress in insertion order), instants ISO 8601 in UTC, durations integer microseconds,
enums by name. ``Instance.spec`` is not stored: it is the registry's definition of the
pinned reference.

The text is lines, so that restoring a long instance does not decode what the reader
never looks at. The first line is the canonical JSON of the instance's fields but its
mappings (its progress by step); each mapping that is not empty follows as a section:
a line ``[field, [key, ...]]``, then one line per entry, the canonical JSON of that
entry alone (canonical JSON escapes every line break inside it). ``restore`` decodes the
first line and checks the sections' shape; each mapping becomes a ``LayeredMap`` over
its entries' texts, each decoded when it is first read (``engine.model.deferred``), and
a snapshot of a state restored that way copies the text of every entry not changed
since instead of encoding it again. A snapshot written before sections existed is the
first line alone, with its mappings inline as pairs, and restores as it always did.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import types
import typing
from collections.abc import Callable, Collection, Mapping
from datetime import datetime, timedelta
from enum import Enum, IntEnum
from typing import Any

from engine.model.canonical import canonical_json, format_instant
from engine.model.deferred import LayeredMap, restored
from engine.model.durations import to_micros
from engine.model.errors import RegistryError
from engine.model.instance import Instance
from engine.model.registry import Registry
from engine.model.snapshots import Snapshot

SNAPSHOT_INTERVAL_EVENTS = 100
"""A transition that crosses a multiple of this many events writes a snapshot, so a
reader folds fewer than this many events after the newest one (one history page), and
opening any instance costs about what opening one of 100 events does. The trade: each
snapshot is the whole state, sent by the committing worker and written (compressed, and
to the WAL) by PostgreSQL. Measured in CPU time on the W3 instance of 10^4 events (833
steps, each retried 3 times; its snapshot is 180 kB of text): restoring its snapshot
takes about 0.3 ms (its entries decoded as they are read), folding 100 events about 1
ms, and encoding the snapshot 11 ms the first time but 0.4 ms when the previous one's
entry texts are copied (what a worker following the instance does), against 500 ms to
replay the 10^4 whole. Before entries were kept apart and copied, restoring took 14 ms
and encoding 27 ms, which is why the interval was 250; instances shorter than it, the
usual case, never write one."""

FOLD_VERSION = 1
"""Bump whenever a fold rule, or a field of the replayed state, changes meaning: every
snapshot written before is then ignored (and replaced at its instance's next interval)."""

Encode = Callable[[Any], Any]
Decode = Callable[[Any], Any]


def due(expected: int, committed: int) -> bool:
    """Whether a transition from ``expected`` to ``committed`` crosses a multiple of the
    interval, and so writes a snapshot of the state it ends in."""
    return committed // SNAPSHOT_INTERVAL_EVENTS > expected // SNAPSHOT_INTERVAL_EVENTS


def take(state: Instance) -> Snapshot:
    """The snapshot of ``state`` (a paused operator command has none: it cannot end a
    transition, and so is never snapshotted)."""
    text = encode(state)
    return Snapshot(state.instance_id, state.sequence, FOLD_VERSION, _digest(text), text)


def encode(state: Instance) -> str:
    """Every field of ``state`` but its definition: its first line, then a section per
    mapping that is not empty (see the module)."""
    texts = _EntryTexts(_TAKEN.pop(state.instance_id, {}))
    lines = [canonical_json(_HEAD_ENCODE(state))]
    for name, (encode_entry, _) in _SECTIONS.items():
        mapping = getattr(state, name)
        if mapping:
            lines.append(canonical_json([name, list(mapping)]))
            lines.extend(texts.lines(mapping, encode_entry))
    _TAKEN[state.instance_id] = texts.taken
    while len(_TAKEN) > _TAKEN_INSTANCES:
        del _TAKEN[next(iter(_TAKEN))]
    return "\n".join(lines)


def restore(registry: Registry, snapshot: Snapshot) -> Instance | None:
    """The state the snapshot holds, or None when it may not be used (see the module)."""
    if snapshot.fold_version != FOLD_VERSION or _digest(snapshot.state) != snapshot.digest:
        return None
    try:
        head, *sections = snapshot.state.split("\n")
        fields = _INSTANCE_FIELDS[1](json.loads(head))
        fields.update(_deferred(sections, fields.keys()))
        spec = registry.resolve(fields["definition"])
        state = Instance(**fields, spec=spec)
    except (RegistryError, KeyError, TypeError, ValueError, AttributeError):
        return None
    return state if state.sequence == snapshot.sequence else None


_TAKEN: dict[str, dict[int, tuple[Any, str]]] = {}
"""The entry texts of the latest snapshot this process took of an instance (the latest
``_TAKEN_INSTANCES`` instances), by the identity of each entry, which the tuple keeps
alive. The fold never changes an entry in place: an entry the next snapshot finds that
is the same object is the same value, so its text is copied rather than encoded again,
and a worker that follows a long instance encodes, per snapshot, the entries changed
since its previous one (plus the head), not the whole state."""
_TAKEN_INSTANCES = 64


class _EntryTexts:
    """The lines of one snapshot's entries, reusing what is already encoded."""

    def __init__(self, previous: dict[int, tuple[Any, str]]) -> None:
        self.previous = previous
        self.taken: dict[int, tuple[Any, str]] = {}

    def lines(self, mapping: Mapping[str, Any], encode_entry: Encode) -> list[str]:
        """The lines of ``mapping``'s entries, in its order: for each, the text it was
        restored from when it is unchanged since (``LayeredMap.encoded``), the text the
        previous snapshot gave the same entry, or its canonical JSON."""
        if type(mapping) is not LayeredMap:
            return [self._text(entry, encode_entry) for entry in mapping.values()]
        return [mapping.encoded(key) or self._text(mapping[key], encode_entry) for key in mapping]

    def _text(self, entry: Any, encode_entry: Encode) -> str:
        found = self.previous.get(id(entry))
        text = found[1] if found is not None and found[0] is entry else None
        if text is None:
            text = canonical_json(encode_entry(entry))
        self.taken[id(entry)] = (entry, text)
        return text


def _deferred(lines: list[str], inline: Collection[str]) -> dict[str, LayeredMap[Any]]:
    """The mappings the sections of ``lines`` hold, their entries left encoded; refused
    (ValueError) unless every section is whole, of a mapping field, and not given twice."""
    out: dict[str, LayeredMap[Any]] = {}
    position = 0
    while position < len(lines):
        name, keys = json.loads(lines[position])
        if name in out or name in inline:
            raise ValueError(f"mapping {name!r} is given twice")
        entries = lines[position + 1 : position + 1 + len(keys)]
        encoded = dict(zip(keys, entries, strict=True))
        if not entries or len(encoded) != len(keys):
            raise ValueError(f"mapping {name!r} is cut short or repeats a key")
        out[name] = restored(encoded, _SECTIONS[name][1])
        position += 1 + len(keys)
    return out


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# The codec, built once per type from the type hints ---------------------------------------

_CODECS: dict[tuple[Any, bool], tuple[Encode, Decode]] = {}
_SKIPPED = {Instance: frozenset({"spec"})}
"""Fields not stored: an instance's definition is the registry's, by its pinned ref."""


def _identity(value: Any) -> Any:
    return value


def codec(hint: Any, checked: bool = True) -> tuple[Encode, Decode]:
    """The (encode, decode) pair of values of type ``hint``. Unless ``checked``, decoding
    takes the text's strings, numbers and field names as they are (converting only what
    JSON cannot hold: instants, durations, enums, tuples, records): the decode of entries
    the digest vouches for, which is most of the cost of reading one."""
    found = _CODECS.get((hint, checked))
    if found is None:
        found = _CODECS[hint, checked] = _build(hint, checked)
    return found


def _build(hint: Any, checked: bool) -> tuple[Encode, Decode]:
    origin = typing.get_origin(hint)
    if hint in (str, int, bool, type(None)):
        return _identity, _checked(hint) if checked else _identity
    if hint is datetime:
        return format_instant, _instant
    if hint is timedelta:
        return to_micros, lambda n: timedelta(microseconds=n)
    if isinstance(hint, type) and issubclass(hint, IntEnum):
        return lambda e: e.name.lower(), lambda name: hint[name.upper()]
    if isinstance(hint, type) and issubclass(hint, Enum):
        return lambda e: e.value, hint
    if origin in (typing.Union, types.UnionType):
        return _optional(hint, checked)
    if origin is tuple:
        encode, decode = codec(typing.get_args(hint)[0], checked)
        return lambda t: [encode(v) for v in t], lambda items: tuple(decode(v) for v in items)
    if origin is Mapping or origin is dict:
        _, value_hint = typing.get_args(hint)
        encode, decode = codec(value_hint, checked)
        return (
            lambda m: [[k, encode(v)] for k, v in m.items()],
            lambda pairs: {k: decode(v) for k, v in pairs},
        )
    if dataclasses.is_dataclass(hint):
        encode_fields, decode_fields = _fields(hint, checked=checked)
        return encode_fields, _constructor(hint, decode_fields)
    raise TypeError(f"a snapshot cannot hold a value of type {hint!r}")


def _instant(text: str) -> datetime:
    """An instant as ``format_instant`` wrote it (UTC, ``Z``); one without a zone is
    refused rather than guessed."""
    value = datetime.fromisoformat(text)
    if value.tzinfo is None:
        raise ValueError(f"instant {text!r} has no time zone")
    return value


def _checked(kind: type) -> Decode:
    def decode(value: Any) -> Any:
        if type(value) is not kind:
            raise TypeError(f"expected {kind.__name__}, found {type(value).__name__}")
        return value

    return decode


def _optional(hint: Any, checked: bool) -> tuple[Encode, Decode]:
    inner = [a for a in typing.get_args(hint) if a is not type(None)]
    if len(inner) != 1:
        raise TypeError(f"a snapshot cannot hold a value of type {hint!r}")
    encode, decode = codec(inner[0], checked)
    return (
        lambda v: None if v is None else encode(v),
        _identity if decode is _identity else lambda v: None if v is None else decode(v),
    )


def _fields(
    cls: type, skipped: Collection[str] | None = None, checked: bool = True
) -> tuple[Encode, Callable[[Any], dict[str, Any]]]:
    """Encode a dataclass value as the object of its fields that differ from their
    defaults (but the ``skipped``: by default, those never stored); decode such an object
    into the keyword arguments of ``cls`` (see ``codec`` for ``checked``)."""
    hints = typing.get_type_hints(cls)
    if skipped is None:
        skipped = _SKIPPED.get(cls, frozenset())
    plan = []
    for f in dataclasses.fields(cls):
        if f.name in skipped:
            continue
        encode, decode = codec(hints[f.name], checked)
        plan.append((f.name, encode, decode, _default(f)))
    decoders = {name: decode for name, _, decode, _ in plan}
    converted = [(name, decode) for name, decode in decoders.items() if decode is not _identity]

    def encode_fields(value: Any) -> dict[str, Any]:
        out = {}
        for name, encode, _, default in plan:
            item = getattr(value, name)
            if default is _REQUIRED or item != default:
                out[name] = encode(item)
        return out

    def decode_fields(doc: Any) -> dict[str, Any]:
        return {name: decoders[name](item) for name, item in doc.items()}

    def convert_fields(doc: dict[str, Any]) -> dict[str, Any]:
        for name, decode in converted:
            if name in doc:
                doc[name] = decode(doc[name])
        return doc

    return encode_fields, decode_fields if checked else convert_fields


_REQUIRED = object()


def _constructor(cls: type, decode_fields: Callable[[Any], dict[str, Any]]) -> Decode:
    """How a decoded object becomes a ``cls``. A frozen dataclass's ``__init__`` sets
    each field through ``object.__setattr__``, the larger part of decoding a state of
    thousands of records; a plain value class (no ``__post_init__``, no slots) is made
    by filling its ``__dict__`` with its defaults and the decoded fields instead, which
    builds the same value. A field without a default that the object lacks is refused."""
    if hasattr(cls, "__post_init__") or hasattr(cls, "__slots__"):
        return lambda doc: cls(**decode_fields(doc))
    fields = dataclasses.fields(cls)
    required = frozenset(f.name for f in fields if _default(f) is _REQUIRED)
    factories = [(f.name, f.default_factory) for f in fields if _is_factory(f)]
    defaults = {f.name: f.default for f in fields if f.default is not dataclasses.MISSING}
    new = object.__new__

    def construct(doc: Any) -> Any:
        values = decode_fields(doc)
        if not required <= values.keys():
            missing = ", ".join(sorted(required - values.keys()))
            raise TypeError(f"{cls.__name__} lacks {missing}")
        value = new(cls)
        state = value.__dict__
        state.update(defaults)
        for name, factory in factories:
            state[name] = factory()
        state.update(values)
        return value

    return construct


def _is_factory(f: dataclasses.Field) -> bool:
    return f.default_factory is not dataclasses.MISSING


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return _REQUIRED


_INSTANCE_FIELDS = _fields(Instance)


def _section(hint: Any) -> tuple[Encode, Callable[[str], Any]]:
    """How one entry of a mapping of type ``hint`` is encoded, and decoded from its line
    (unchecked: the digest vouches for it, see the module)."""
    encode, decode = codec(typing.get_args(hint)[1], checked=False)
    return encode, lambda text: decode(_parse(text)[0])


_parse = json.JSONDecoder().raw_decode
"""JSON text to its value, without ``json.loads``'s whitespace checks (an entry's line
is canonical JSON, with none)."""


_SECTIONS = {
    name: _section(hint)
    for name, hint in typing.get_type_hints(Instance).items()
    if typing.get_origin(hint) is Mapping
}
"""The instance's mappings, each stored as a section of its own."""
_HEAD_ENCODE = _fields(Instance, _SKIPPED[Instance] | _SECTIONS.keys())[0]
