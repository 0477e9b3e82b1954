"""An offer's payload says exactly what its start wrote, or nothing (``engine.store.offers``):
a worker builds its first write on it, so a payload that read back differently would
have it record an attempt on a state that never was (the write's checks would refuse
it, and the offer would be wasted)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from engine.decide.lifecycle import start_draft
from engine.model.registry import Registry
from engine.model.transitions import Transition
from engine.model.validation import parse_definition
from engine.modes import decide
from engine.store import offers
from engine.store.commits import json_rows
from engine.store.rows import HISTORY_FIELDS, WORK_FIELDS, event_row, work_row
from tests.unit.strategies import identifiers, json_values

FIRST = parse_definition(
    {
        "name": "offers.first",
        "version": "1",
        "mode": "orchestration",
        "steps": [
            {"name": "a", "kind": "activity", "target": "t.a", "timeout": "10s"}
            | {"input_limit": 1_000_000, "result_limit": 1000}
        ],
    }
)
REGISTRY = Registry([FIRST])
NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


def start(instance_id: str, value: Any) -> Transition:
    draft = start_draft(REGISTRY, FIRST, instance_id, NOW, value)
    decide(draft)
    return draft.build("start")


def payload(transition: Transition, tenant: str) -> str:
    """The payload as the start's statement is given it (``commits._start``)."""
    history = json_rows(HISTORY_FIELDS, map(event_row, transition.events))
    work = json_rows(WORK_FIELDS, map(work_row, transition.work))
    return offers.payload(transition, tenant, history, work)


@given(identifiers(), json_values(), st.sampled_from(["", "acme"]))
def test_an_offer_reads_back_as_the_rows_its_start_wrote(
    instance_id: str, value: Any, tenant: str
) -> None:
    transition = start(instance_id, value)
    text = payload(transition, tenant)
    if not text:  # too long for a NOTIFY: the wrapper around the rows is under 64 bytes
        rows = [json_rows(HISTORY_FIELDS, map(event_row, transition.events))]
        rows.append(json_rows(WORK_FIELDS, map(work_row, transition.work)))
        assert sum(len(r.encode()) for r in rows) > offers.MAX_OFFER_BYTES - 64
        return
    assert len(text.encode()) <= offers.MAX_OFFER_BYTES
    offer = offers.read(text, NOW)
    assert offer is not None
    [item] = transition.work
    assert (offer.tenant, offer.events) == (tenant, transition.events)
    sent = {name: offer.work[name] for name in ("work_id", "instance_id", "sequence", "target")}
    assert sent == {n: getattr(item, n) for n in sent}
    assert (offer.work["available_at"], offer.work["deadline"]) == (
        item.available_at,
        item.deadline,
    )
    assert offer.work["payload"].decode() == item.payload


def test_an_offer_of_work_not_yet_due_is_no_offer() -> None:
    text = payload(start("early-1", None), "")
    assert offers.read(text, NOW) is not None
    assert offers.read(text, NOW - timedelta(microseconds=1)) is None
