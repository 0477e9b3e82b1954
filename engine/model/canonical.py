"""Canonical JSON, digests and instants: what makes fingerprints portable.

Canonical JSON is ``json.dumps`` with sorted keys, no insignificant white space,
UTF-8 output and no NaN/Infinity. Every fingerprint in the engine is the SHA-256 hex
digest of such bytes, so the same value gives the same fingerprint in any process on
any machine. Instants are normalised to UTC with microsecond precision (what
PostgreSQL stores) before they take part in anything fingerprinted.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import msgspec


def canonical_json(value: Any) -> str:
    """The canonical JSON text of a JSON-compatible value."""
    return _CANONICAL(value)


def _as_dict(value: object) -> dict[Any, Any]:
    """A Mapping that is not a dict (``ActivityRequest.results``, a ``MappingProxyType``)
    as a dict: every value check takes a Mapping as JSON (``engine.model.inputs``), and a
    handler that returned ``{"before": request.results}`` had its attempt recorded
    unknown as not JSON. Anything else is not JSON: the encoder's TypeError."""
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=_as_dict
).encode
"""One encoder for every call: ``json.dumps`` with options builds a new one each time,
and every event, fingerprint and digest is encoded here. ``default`` is asked only of
values no JSON type is, so it costs nothing to the others."""


def digest(value: Any) -> str:
    """SHA-256 hex of the canonical JSON of ``value``."""
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()


def spliced(text: str) -> msgspec.Raw:
    """Canonical JSON text (an event's data, say) to stand as itself in a value given to
    ``spliced_digest``, instead of being parsed only to be written again."""
    return msgspec.Raw(text)


def spliced_digest(value: Any) -> str:
    """``digest(value)`` for a value whose parts are ``spliced`` canonical text: the same
    bytes, because msgspec writes sorted keys, text, whole numbers, booleans and null
    exactly as ``canonical_json`` does (tests/unit/test_transitions.py). Floats are
    written differently, so they may appear only inside spliced text. It spares every
    transition's fingerprint a parse and a slower encoding of each event's data."""
    return hashlib.sha256(_SORTED.encode(value)).hexdigest()


_SORTED = msgspec.json.Encoder(order="sorted")


def utc(instant: datetime) -> datetime:
    """The same instant in UTC; naive datetimes are refused, not guessed."""
    if instant.tzinfo is UTC:  # most are already: every instant the engine makes
        return instant
    if instant.tzinfo is None or instant.utcoffset() is None:
        raise ValueError("instants must carry a time zone")
    return instant.astimezone(UTC)


def format_instant(instant: datetime) -> str:
    """ISO 8601 in UTC with exactly six fractional digits, e.g. 2026-01-02T03:04:05.000006Z.

    ``isoformat``, not ``strftime``: it is faster (every event of every fingerprint is
    formatted here), and it pads every year to four digits on every platform, which
    ``strftime``'s ``%Y`` does not (years before 1000)."""
    return utc(instant).isoformat(timespec="microseconds")[:-6] + "Z"


def parse_instant(text: str) -> datetime:
    """Parse an ISO 8601 instant with a zone (``Z`` or an offset) into UTC."""
    return utc(datetime.fromisoformat(text))
