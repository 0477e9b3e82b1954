"""The draft editor's publish form and its "only if every running instance is
compatible" box: ticked, a version a running instance could not move to is refused
with the instance named, and the draft stays; unticked, it is published with its report."""

from __future__ import annotations

import json
import re

from engine.model.identifiers import team_instance_id
from studio.definitions import drafts
from studio.roles import Role
from tests.studio.live import LiveStudio, SignedInClient, definition

TICKED = r'id="require-compatible" checked'


def test_the_import_page_keeps_the_box_ticked_after_a_refusal(studio: LiveStudio) -> None:
    """The import page came back with the box unticked after refusing a version: a
    second "Publish" then published the incompatible version."""
    name, _, _, client = incompatible_draft(studio)
    v2 = definition(name, "2")
    del v2["steps"][0]
    text = json.dumps(v2)
    form = {"document": text, "action": "publish", "require_compatible": "1"}
    refused = client.form("/definitions/import/save", form)
    assert refused.status_code == 409 and re.search(TICKED, refused.text)
    previewed = client.form("/definitions/import", {"document": text})
    assert previewed.status_code == 200 and not re.search(TICKED, previewed.text)


def incompatible_draft(studio: LiveStudio) -> tuple[str, str, str, SignedInClient]:
    """A fresh team's name with a running instance, a draft of version 2 without the
    step it is in, and an author of the team: the name, instance, draft and client."""
    team, name, instance_id = studio.one_running("edited")
    v2 = definition(name, "2")
    del v2["steps"][0]  # reserve: the instance has progress in it
    draft = studio.run(lambda store: drafts.create_draft(store, team, v2, "", "x"))
    return name, instance_id, draft.draft_id, studio.client(studio.user(team, Role.AUTHOR))


def test_the_editor_box_refuses_an_incompatible_version_and_keeps_the_draft(
    studio: LiveStudio,
) -> None:
    name, instance_id, draft_id, client = incompatible_draft(studio)
    url = f"/drafts/{draft_id}/publish"

    refused = client.form(url, {"require_compatible": "1"})
    assert refused.status_code == 409
    assert f"{instance_id}: step reserve " in refused.text
    # ticked still: unticked, a second click published what was just refused
    assert re.search(TICKED, refused.text)
    assert not re.search(TICKED, client.get(f"/drafts/{draft_id}").text)
    assert client.get(f"/definitions/{name}/versions/2").status_code == 404
    published = client.form(url)
    assert published.status_code == 303
    page = client.get(published.headers["location"])
    assert "0 compatible, 1 incompatible" in page.text


def test_the_drafts_api_takes_the_same_compatibility_field_as_the_definitions_api(
    studio: LiveStudio,
) -> None:
    name, instance_id, draft_id, client = incompatible_draft(studio)
    client.headers["X-CSRF-Token"] = client.csrf
    url = f"/api/drafts/{draft_id}/publish"

    refused = client.post(url, json={"compatibility": "require"})
    assert refused.status_code == 409
    assert f"{instance_id}: step reserve " in refused.text
    assert client.get(f"/api/definitions/{name}/versions/2").status_code == 404
    assert client.post(url, json={"compatibility": "yes"}).status_code == 400
    reported = client.post(url, json={"compatibility": "report"})
    assert reported.status_code == 201 and reported.json()["version"] == "2"
    assert client.post(url).status_code == 200, "no body: reported, already published"


def test_a_refusal_names_the_instances_as_the_team_knows_them(studio: LiveStudio) -> None:
    """A team's instance is stored as ``team:id``; the refusal said so (``team-1:order-7:
    step reserve …``), where every other page of the studio says ``order-7``."""
    team = studio.team("teamed")
    name = studio.publish_new(team, "teamed")
    studio.start(team, name, team_instance_id(team, "order-7"))
    v2 = definition(name, "2")
    del v2["steps"][0]
    draft = studio.run(lambda store: drafts.create_draft(store, team, v2, "", "x"))
    client = studio.client(studio.user(team, Role.AUTHOR))

    refused = client.form(f"/drafts/{draft.draft_id}/publish", {"require_compatible": "1"})
    assert refused.status_code == 409
    assert "cannot move to it: order-7: step reserve " in refused.text
    assert f"{team}:order-7" not in refused.text
    client.headers["X-CSRF-Token"] = client.csrf
    api = client.post("/api/definitions", json={"document": v2, "compatibility": "require"})
    assert api.status_code == 409 and "cannot move to it: order-7: step reserve " in api.text
