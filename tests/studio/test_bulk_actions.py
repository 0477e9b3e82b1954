"""Bulk operator actions over HTTP: the preview page and API, confirming once, results.

The studio here runs no worker, so instances wait at their first activity; the tests
set their states apart with single commands (one paused, one terminated) and check
what the preview says for each, that confirming needs a reason, acts once per bulk id,
and that the results stay reachable.
"""

from __future__ import annotations

import re
import uuid

import pytest

from engine.decide.operator_actions import Action
from studio.instance_urls import instance_url
from studio.instances import bulk
from tests.studio.live import LiveStudio, SignedInClient, definition


@pytest.fixture(scope="module")
def team(studio: LiveStudio) -> str:
    return studio.team("bulk")


@pytest.fixture
def flow(studio: LiveStudio, team: str) -> tuple[str, list[str]]:
    """A fresh definition with three instances: running, paused, terminated."""
    name = f"bulk.{uuid.uuid4().hex[:6]}"
    studio.publish(team, definition(name))
    ids = [studio.start(team, name, f"{name}-{n}") for n in range(3)]
    studio.command(ids[1], Action.PAUSE)
    studio.command(ids[2], Action.TERMINATE)
    return name, ids


def audit(client: SignedInClient, instance_id: str) -> list[dict]:
    return client.get(f"/api{instance_url(instance_id)}").json()["audit"]


def test_a_bulk_cancel_previews_confirms_once_and_keeps_its_results(
    flow: tuple[str, list[str]], operator: SignedInClient, viewer: SignedInClient
) -> None:
    name, ids = flow
    query = f"action=cancel&select=filter&view=all&definition={name}"
    assert viewer.get(f"/instances/bulk?{query}").status_code == 403
    shown = operator.get(f"/instances/bulk?{query}")
    assert shown.status_code == 200
    text = re.sub(r"\s+", " ", shown.text)
    assert 'id="bulk-applies">2<' in text and 'id="bulk-refused">1<' in text
    assert "refused: " in text and ids[2] in text
    bulk_id = re.search(r'name="bulk_id" value="(\w+)"', shown.text).group(1)
    fields = {"bulk_id": bulk_id, "action": "cancel", "pick": ids}

    no_reason = operator.form("/instances/bulk", {**fields, "reason": " "})
    assert no_reason.status_code == 422 and "a reason of 1 to 500" in no_reason.text
    assert audit(operator, ids[0]) == []

    done = operator.form("/instances/bulk", {**fields, "reason": "incident 7"})
    assert done.status_code == 303 and done.headers["location"] == f"/instances/bulk/{bulk_id}"
    again = operator.form("/instances/bulk", {**fields, "reason": "incident 7"})
    assert again.status_code == 303
    for instance_id in ids[:2]:
        [entry] = [a for a in audit(operator, instance_id) if a["action"] == "cancel"]
        assert entry["command_id"].startswith(bulk_id) and entry["reason"] == "incident 7"

    results = viewer.get(f"/instances/bulk/{bulk_id}")
    assert results.status_code == 200
    text = re.sub(r"\s+", " ", results.text)
    assert 'id="bulk-done">2<' in text and 'id="bulk-refused">1<' in text
    listed = operator.get(f"/instances?view=all&definition={name}")
    assert f"/instances/bulk/{bulk_id}" in listed.text


def test_the_bulk_api_previews_by_filter_and_acts_once_by_bulk_id(
    flow: tuple[str, list[str]], operator: SignedInClient, viewer: SignedInClient
) -> None:
    name, ids = flow
    body = {"action": "pause", "filter": {"view": "all", "definition": name}}
    assert viewer.post("/api/instances/bulk/preview", json=body).status_code == 403
    preview = operator.post(
        "/api/instances/bulk/preview", json=body, headers={"X-CSRF-Token": operator.csrf}
    )
    assert preview.status_code == 200, preview.text
    found = preview.json()
    assert (found["total"], found["applies"], found["unchanged"], found["refused"]) == (3, 1, 1, 1)
    assert {i["id"]: i["verdict"] for i in found["instances"]} == {
        ids[0]: "applies",
        ids[1]: "unchanged",
        ids[2]: "refused",
    }
    assert [v["instances"] for v in found["versions"]] == [3] and not found["more"]
    single = {a["action"]: a for a in operator.get(f"/api{instance_url(ids[0])}").json()["actions"]}
    mine = next(i for i in found["instances"] if i["id"] == ids[0])
    for field in ("reruns", "compensations", "kept", "in_doubt", "records"):
        assert single["pause"][field] == mine[field], "one preview for one and for many"

    act = {"bulk_id": found["bulk_id"], "action": "pause", "reason": "hold", "instances": ids}
    headers = {"X-CSRF-Token": operator.csrf}
    first = operator.post("/api/instances/bulk", json=act, headers=headers).json()
    second = operator.post("/api/instances/bulk", json=act, headers=headers).json()
    assert [r["outcome"] for r in first["results"]] == ["done", "unchanged", "refused"]
    assert second["replayed"] and second["results"] == first["results"]
    clash = operator.post("/api/instances/bulk", json={**act, "reason": "other"}, headers=headers)
    assert clash.status_code == 409
    kept = viewer.get(f"/api/instances/bulk/{found['bulk_id']}").json()
    assert kept["results"] == first["results"] and kept["reason"] == "hold"

    too_many = operator.post(
        "/api/instances/bulk/preview",
        json={"action": "pause", "instances": [f"x-{n}" for n in range(101)]},
        headers=headers,
    )
    assert too_many.status_code == 422 and "at most 100 per request" in too_many.text
    unknown = operator.post(
        "/api/instances/bulk/preview",
        json={"action": "pause", "instances": ["nope"]},
        headers=headers,
    )
    assert unknown.status_code == 422 and "no such instance in this team: nope" in unknown.text


def test_a_filter_matching_more_than_the_limit_says_so_and_covers_the_first(
    flow: tuple[str, list[str]], operator: SignedInClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    name, ids = flow
    monkeypatch.setattr(bulk, "MAX_BULK_INSTANCES", 2)
    shown = operator.get(f"/instances/bulk?action=pause&select=filter&view=all&definition={name}")
    assert shown.status_code == 200 and 'id="bulk-more"' in shown.text
    picked = re.findall(r'name="pick" value="([^"]+)"', shown.text)
    assert picked == ids[:2], "the first of the filter, oldest first"
    at_step = operator.get(
        f"/instances/bulk?action=pause&select=filter&view=all&definition={name}&step=nowhere"
    )
    assert at_step.status_code == 422 and "no instance matches these filters" in at_step.text
    listed = operator.get(f"/instances?view=all&definition={name}&step=reserve")
    assert ids[0] in listed.text and ids[2] not in listed.text, "a terminated one is at no step"
