"""The order example's scripted troubles, which the demo, the studio's worker and a
newcomer trying the studio use: a failure before any effect, and an unknown outcome
after one, which the example's charge holds for an operator and its checks retry with
the same key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.api.client import Client
from engine.model.files import load_definition
from engine.model.instance import AttemptStatus
from engine.store.store import Store
from engine.worker.instance_cache import RegistrySource
from engine.worker.leased_commits import Context
from examples.orders import EFFECTS_ENV, app
from tests.integration.factories import run_due

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "order_fulfillment.json"


def effects(path: Path) -> list[tuple[str, int]]:
    lines = path.read_text().splitlines() if path.exists() else []
    return [(e["step"], e["attempt"]) for e in map(json.loads, lines)]


async def test_a_scripted_unknown_charges_once_and_waits_for_an_operator(
    db_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(EFFECTS_ENV, str(tmp_path / "effects.jsonl"))
    client = Client(db_store)
    await client.publish(load_definition(EXAMPLE))
    await client.start("order.fulfillment", "o-1", {"unknown": {"payments.charge": 1}})
    await run_due(Context(db_store, app, RegistrySource(db_store)))

    charge = (await client.inspect("o-1")).activities["charge"]
    assert (charge.status, charge.code, charge.attempt) == (
        AttemptStatus.UNKNOWN,
        "scripted-unknown",
        1,
    )
    assert effects(tmp_path / "effects.jsonl") == [("reserve", 1), ("charge", 1)]
