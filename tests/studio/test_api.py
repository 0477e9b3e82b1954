"""The JSON API: what scripts and CI see, with an API token and with a session."""

from __future__ import annotations

import uuid

from engine.api.client import Client
from studio.roles import Role
from tests.studio.live import LiveStudio, SignedInClient, definition


def api_client(studio: LiveStudio, role: Role = Role.AUTHOR) -> tuple[SignedInClient, str]:
    """A session client of a fresh team (CSRF header preset) and the team id."""
    team = studio.team("api")
    client = studio.client(studio.user(team, role))
    client.headers["X-CSRF-Token"] = client.csrf
    return client, team


def test_publishing_is_idempotent_and_a_clash_is_a_clear_conflict(studio: LiveStudio) -> None:
    client, _ = api_client(studio)
    name = f"api.{uuid.uuid4().hex[:6]}"
    first = client.post("/api/definitions", json={"document": definition(name)})
    assert first.status_code == 201
    body = first.json()
    assert body["created"] is True and body["short_fingerprint"] == body["fingerprint"][:12]
    again = client.post("/api/definitions", json={"document": definition(name)})
    assert again.status_code == 200 and again.json() == {**body, "created": False}
    clash = client.post("/api/definitions", json={"document": definition(name, timeout="9s")})
    assert clash.status_code == 409
    assert "already published with other content" in clash.json()["error"]
    versions = client.get(f"/api/definitions/{name}").json()
    assert [(v["version"], v["fingerprint"]) for v in versions] == [("1", body["fingerprint"])]


def test_a_deprecation_keeps_who_did_it_and_when(studio: LiveStudio) -> None:
    """A version's publication names who and when, but its deprecation (which makes new
    instances refuse it) was kept as a bare flag: nobody could tell who had done it."""
    client, team = api_client(studio)
    name = f"api.{uuid.uuid4().hex[:6]}"
    assert client.post("/api/definitions", json={"document": definition(name)}).status_code == 201
    active = client.get(f"/api/definitions/{name}").json()[0]
    assert (active["deprecated_at"], active["deprecated_by"]) == (None, "")
    actor = client.get("/api/me").json()["actor"]
    first = client.post(f"/api/definitions/{name}/versions/1/deprecate").json()
    assert first["deprecated"] is True and first["deprecated_by"] == actor
    assert first["deprecated_at"] is not None
    other = studio.client(studio.user(team, Role.AUTHOR))
    again = other.form(f"/definitions/{name}/versions/1/deprecate")
    assert again.status_code == 303
    (kept,) = client.get(f"/api/definitions/{name}").json()
    assert (kept["deprecated_by"], kept["deprecated_at"]) == (actor, first["deprecated_at"])
    page = client.get(f"/definitions/{name}/versions/1").text
    assert f", by {actor})" in page


def test_require_compatible_refuses_a_version_a_running_instance_cannot_take(
    studio: LiveStudio,
) -> None:
    client, team = api_client(studio)
    name = f"gated.{uuid.uuid4().hex[:6]}"
    assert client.post("/api/definitions", json={"document": definition(name)}).status_code == 201
    instance_id = studio.start(team, name)
    without_reserve = definition(name, "2")
    del without_reserve["steps"][0]
    body = {"document": without_reserve, "compatibility": "require"}
    refused = client.post("/api/definitions", json=body)
    assert refused.status_code == 409
    assert f"{instance_id}: step reserve " in refused.json()["error"]
    assert [v["version"] for v in client.get(f"/api/definitions/{name}").json()] == ["1"]
    assert client.post("/api/definitions", json={**body, "compatibility": 1}).status_code == 400
    body["compatibility"] = "report"
    assert client.post("/api/definitions", json=body).status_code == 201


def test_an_invalid_document_is_refused_with_every_problem_located(studio: LiveStudio) -> None:
    client, _ = api_client(studio)
    document = definition("broken")
    document["steps"][5]["timeout"] = "later"
    del document["steps"][0]["target"]
    refused = client.post("/api/definitions", json={"document": document})
    assert refused.status_code == 422
    assert {p["path"] for p in refused.json()["problems"]} == {
        "steps[0].target",
        "steps[5].timeout",
    }
    checked = client.post("/api/definitions/validate", json={"document": document}).json()
    assert checked["valid"] is False and checked["fingerprint"] is None
    assert {(p["step"], p["field"]) for p in checked["problems"] if not p["warning"]} == {
        ("reserve", "target"),
        ("cool_off", "timeout"),
    }
    shape = client.post("/api/definitions", json={"nothing": 1})
    assert shape.status_code == 400


def test_drafts_edit_publish_and_refuse_stale_revisions(studio: LiveStudio) -> None:
    client, _ = api_client(studio)
    name = f"drafted.{uuid.uuid4().hex[:6]}"
    draft = client.post("/api/drafts", json={"document": definition(name)}).json()
    assert draft["valid"] is True and draft["revision"] == 1
    url = f"/api/drafts/{draft['id']}"
    inserted = client.post(
        url + "/edits", json={"op": "insert", "revision": 1, "at": 6, "kind": "signal"}
    ).json()
    assert inserted["revision"] == 2 and inserted["valid"] is False
    errors = [p for p in inserted["problems"] if not p["warning"]]
    assert [(p["step"], p["message"]) for p in errors] == [("signal_1", "is required")]
    warned = {p["step"] for p in inserted["problems"] if p["warning"]}
    assert warned == {"reserve", "fraud", "stock"}  # no worker runs in this test
    stale = client.post(url + "/edits", json={"op": "delete", "revision": 1, "index": 6})
    assert stale.status_code == 409
    assert stale.json()["error"] == (  # an API caller is told the revision to read
        "this draft was changed elsewhere since revision 1 (another window or caller): "
        "it is at revision 2 now; repeat your change on that one"
    )
    fixed = client.post(
        url + "/edits",
        json={"op": "update", "revision": 2, "index": 6, "fields": {"target": "go"}},
    ).json()
    assert fixed["valid"] is True
    published = client.post(url + "/publish")
    assert published.status_code == 201 and published.json()["name"] == name
    replaced = client.put(url, json={"revision": 3, "document": {"name": name, "steps": []}})
    assert replaced.json()["revision"] == 4
    assert client.delete(url).status_code == 204
    assert client.get(url).status_code == 404


def test_a_new_draft_from_a_version_and_the_diff_between_versions(studio: LiveStudio) -> None:
    client, _ = api_client(studio)
    name = f"diffed.{uuid.uuid4().hex[:6]}"
    client.post("/api/definitions", json={"document": definition(name)})
    draft = client.post("/api/drafts", json={"from_name": name, "from_version": "1"}).json()
    assert draft["document"]["version"] == "2"
    url = f"/api/drafts/{draft['id']}"
    client.post(
        url + "/edits",
        json={"op": "update", "revision": 1, "index": 5, "fields": {"timeout": "1h"}},
    )
    assert client.post(url + "/publish").status_code == 201
    diff = client.get(f"/api/definitions/{name}/diff", params={"left": "1", "right": "2"}).json()
    assert diff["steps"] == [
        {
            "step": "cool_off",
            "kind": "timer",
            "change": "changed",
            "fields": [{"field": "timeout", "before": "5m", "after": "1h"}],
        }
    ]


def test_instances_are_listed_for_their_team_only(studio: LiveStudio) -> None:
    client, team = api_client(studio, Role.VIEWER)
    other, other_team = api_client(studio, Role.VIEWER)
    name = studio.publish_new(team, "running")
    instance = f"order-{uuid.uuid4().hex[:8]}"

    async def start(store) -> None:
        await Client(store).start(name, instance, {"amount": 3}, tenant=team)

    studio.run(start)
    listed = client.get("/api/instances").json()
    assert [(i["id"], i["definition"], i["status"]) for i in listed["items"]] == [
        (instance, name, "running")
    ]
    assert instance in client.get("/instances").text
    assert other.get("/api/instances").json()["items"] == []
    assert instance not in other.get("/instances").text
    assert other_team != team


def test_the_editor_says_why_a_publish_clashes(studio: LiveStudio) -> None:
    client, team = api_client(studio)
    name = studio.publish_new(team, "clash")
    draft = client.post("/api/drafts", json={"document": definition(name, timeout="7s")}).json()
    page = client.post(f"/drafts/{draft['id']}/publish", headers={"HX-Request": "true"})
    assert page.status_code == 409
    assert f"{name}@1 is already published with other content" in page.text
    assert 'id="workspace"' in page.text  # the editor stays, with the draft intact
