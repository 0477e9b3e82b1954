"""Offers: a new instance's first step handed to an idle worker with the start's NOTIFY.

Without an offer, a worker that hears of new work claims it (one round trip that reads
the instance's short history with the lease), then records the attempt's start under
the lease (a second, durable one), and only then runs the handler. An offer saves the
claim: a start whose only work is an activity's first attempt sends, as its NOTIFY's
payload, the rows it wrote (the instance's first events and that work row), so an idle
worker can build the attempt's start on them at once and send it as a write that leases
the work as it records the start (``statements.leases.TAKING_WRITE``): one durable
round trip from hearing of the instance to running its first handler.

A payload is a hint, never the truth: the write takes the work only if it is still
unleased (the worker judges it due) and the instance still where the payload left it,
and writes nothing otherwise (another worker took it, an operator acted first, an
incident hold parked it), after which the worker claims as it would have. Every idle
worker that hears an offer tries it and one wins; a worker with work in hand leaves
offers to the claim, so the losers' statements are spent only while workers have
nothing else to do. A start whose rows do not fit a NOTIFY payload (``MAX_OFFER_BYTES``)
offers nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from engine.model.events import Event
from engine.model.transitions import Transition, WorkKind
from engine.store.errors import CorruptStore
from engine.store.rows import HISTORY_FIELDS, event_from_row

MAX_OFFER_BYTES = 7000
"""The longest payload a start offers (PostgreSQL refuses a NOTIFY payload of 8,000
bytes or more, and would fail the start with it)."""
_INSTANTS = frozenset({"occurred_at", "due_at", "available_at", "deadline"})
"""Columns sent as RFC 3339 text in the rows (``commits.to_json``)."""


def payload(transition: Transition, tenant: str, history: str, work: str) -> str:
    """The NOTIFY payload of a start written with the rows ``history`` and ``work`` (the
    JSON its statement reads): an offer when its only work is an activity's, else ''."""
    if transition.expected_sequence != 0 or len(transition.work) != 1:
        return ""
    if transition.work[0].kind is not WorkKind.ACTIVITY:
        return ""
    text = f'{{"tenant": {json.dumps(tenant)}, "history": {history}, "work": {work}}}'
    return text if len(text.encode()) <= MAX_OFFER_BYTES else ""


@dataclass(frozen=True)
class Offered:
    """What an offer says: the instance's team and first events, and its work row (a
    due activity's first attempt, decoded: ``WORK_FIELDS`` by name)."""

    tenant: str
    events: tuple[Event, ...]
    work: dict[str, Any]


def read(text: str, now: datetime) -> Offered | None:
    """The offer a NOTIFY payload makes, if it makes one whose work is due ``now``."""
    if not text.startswith("{"):
        return None
    try:
        offer = json.loads(text)
        (work,) = (_decoded(row) for row in offer["work"])
        rows = (_in_order(HISTORY_FIELDS, _decoded(row)) for row in offer["history"])
        offered = Offered(offer["tenant"], tuple(event_from_row(row) for row in rows), work)
        due = work["available_at"] <= now < work["deadline"]
    except (ValueError, KeyError, TypeError, AttributeError, CorruptStore):
        return None  # not an offer of this build's making: a claim finds the work
    return offered if due and work["kind"] == WorkKind.ACTIVITY else None


def _decoded(row: dict[str, Any]) -> dict[str, Any]:
    """A row as the JSON sent to the server has it, with its instants and bytes decoded."""
    out = dict(row)
    for name in _INSTANTS & row.keys():
        if row[name] is not None:
            out[name] = datetime.fromisoformat(row[name])
    for name in ("data", "payload"):
        if isinstance(row.get(name), str):
            out[name] = bytes.fromhex(row[name].removeprefix("\\x"))
    return out


def _in_order(fields: tuple[str, ...], row: dict[str, Any]) -> tuple[Any, ...]:
    """The values of ``row`` in the order of ``fields`` (a table's columns)."""
    return tuple(row[name] for name in fields)
