"""The API as a stranger uses it: a request that would have been half-taken, or
answered in the engine's own words, is refused saying what was wrong and what is
allowed, at the field it concerns, and nothing is changed or lost."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from studio.roles import Role
from tests.studio.live import LiveStudio, SignedInClient


@pytest.fixture(scope="module")
def api(studio: LiveStudio, team: str) -> SignedInClient:
    """An admin: the drafts need an author, the instances an operator."""
    admin = studio.client(studio.user(team, Role.ADMIN))
    admin.headers["X-CSRF-Token"] = admin.csrf
    return admin


@pytest.fixture(scope="module")
def named(studio: LiveStudio, team: str) -> str:
    return studio.publish_new(team, "refusals")


@pytest.fixture
def draft(api: SignedInClient, named: str) -> str:
    created = api.post("/api/drafts", json={"from_name": named, "from_version": "1"})
    assert created.status_code == 201, created.text
    return f"/api/drafts/{created.json()['id']}"


def edit(api: SignedInClient, draft: str, **body: Any) -> httpx.Response:
    revision = api.get(draft).json()["revision"]
    return api.post(f"{draft}/edits", json={"revision": revision, **body})


def refused_edit(api: SignedInClient, draft: str, **body: Any) -> dict[str, Any]:
    """The error answer of an edit that must be refused (422) with the draft unchanged."""
    before = api.get(draft).json()
    refused = edit(api, draft, **body)
    assert refused.status_code == 422, refused.text
    assert api.get(draft).json() == before
    return refused.json()


def test_a_header_edit_naming_only_the_version_keeps_the_name(
    api: SignedInClient, draft: str, named: str
) -> None:
    """It used to clear the name (and an empty header edit cleared both)."""
    assert edit(api, draft, op="header", version="7").status_code == 200
    document = api.get(draft).json()["document"]
    assert (document["name"], document["version"]) == (named, "7")
    empty = refused_edit(api, draft, op="header")
    assert empty["error"] == "the header operation needs name, version or both"


def test_a_move_without_a_direction_is_refused_not_taken_as_down(
    api: SignedInClient, draft: str
) -> None:
    refused = refused_edit(api, draft, op="move", index=0)
    assert refused["error"] == "the move operation needs direction"


def test_an_update_with_a_field_the_step_does_not_have_changes_nothing(
    api: SignedInClient, draft: str
) -> None:
    """``timout`` used to be ignored and the edit answered as done."""
    refused = refused_edit(api, draft, op="update", index=0, fields={"timout": "5s", "name": "x"})
    [problem] = refused["problems"]
    assert problem["path"] == "fields.timout"
    assert problem["message"].startswith("not a field of an activity step; it takes ")
    assert ", timeout" in problem["message"]


def test_a_bad_filter_is_said_at_its_field_in_the_list_and_in_a_bulk_filter(
    api: SignedInClient,
) -> None:
    said = "started before must be a date like 2026-11-29 or 2026-11-29T10:30"
    listed = api.get("/api/instances", params={"started_before": "last week"})
    assert listed.status_code == 422
    assert listed.json()["problems"] == [{"path": "started_before", "message": said}]
    preview = {"action": "pause", "filter": {"started_before": "last week"}}
    bulk = api.post("/api/instances/bulk/preview", json=preview)
    assert bulk.status_code == 422
    assert bulk.json()["problems"] == [{"path": "filter.started_before", "message": said}]


def test_a_status_filter_that_is_none_names_the_statuses(api: SignedInClient) -> None:
    """``status=all`` was answered "'all' is not an instance status", naming none."""
    listed = api.get("/api/instances", params={"status": "all"})
    assert listed.status_code == 422
    (problem,) = listed.json()["problems"]
    assert problem["path"] == "status"
    assert problem["message"].startswith("status is one of running, paused, ")
    assert problem["message"].endswith(", or left out for every status")


def test_resolving_an_activity_that_is_not_in_doubt_says_so(
    studio: LiveStudio, api: SignedInClient, team: str, named: str
) -> None:
    """It was a 422 in the history's words: ``activity_resolved event 4: needs attempt``."""
    instance = studio.start(team, named)
    command = {"action": "resolve_activity", "reason": "r", "step": "reserve"}
    refused = api.post(
        f"/api/instances/{instance}/actions", json={**command, "resolution": "failed"}
    )
    assert refused.status_code == 409
    error = refused.json()["error"]
    assert error.startswith("the instance does not allow this now: activity 'reserve' is ")
    assert error.endswith(
        "only an outcome in doubt (unknown) is resolved by hand; nothing was done"
    )
    assert "event" not in error


def test_a_start_naming_no_definition_or_version_says_which_field_is_empty(
    api: SignedInClient, named: str
) -> None:
    """It was a 404 about a definition named '' ("name@ is not published")."""
    for body, field in (
        ({"definition": named, "version": " "}, "version"),
        ({"definition": "", "version": "1"}, "definition"),
    ):
        refused = api.post("/api/instances", json=body)
        assert refused.status_code == 422, refused.text
        message = f"{field} is empty: name the published one to start"
        assert refused.json()["problems"] == [{"path": field, "message": message}]


def test_a_name_longer_than_any_id_is_cut_in_the_answer(api: SignedInClient) -> None:
    """A name typed into a URL is repeated in a 404 only up to the longest id's length."""
    long_name = "n" * 3000
    missing = api.get(f"/api/definitions/{long_name}")
    assert missing.status_code == 404
    error = missing.json()["error"]
    assert "n" * 512 + "… (3000 characters)" in error and "n" * 513 not in error


def test_a_repeated_start_answers_200_and_only_a_new_one_201(
    api: SignedInClient, named: str
) -> None:
    """A CI job retrying its start was told 201 Created both times, as if a second
    instance had been made; now, as publishing and machine submits do, 200 says it was
    found started already (and the OpenAPI document declares that answer)."""
    body = {"definition": named, "version": "1", "instance_id": f"again-{named}", "input": {}}
    first = api.post("/api/instances", json=body)
    assert first.status_code == 201, first.text
    again = api.post("/api/instances", json=body)
    assert again.status_code == 200, again.text
    assert again.json()["id"] == first.json()["id"]
    answers = api.get("/schema/openapi.json").json()["paths"]["/api/instances"]["post"]
    assert {"200", "201"} <= set(answers["responses"])


def test_an_empty_instance_id_is_refused_not_replaced_by_a_made_up_one(
    api: SignedInClient, named: str
) -> None:
    """``"instance_id": ""`` (a CI variable left unset) started an instance under a
    made-up id, a new one on every retry; left out or null still makes one."""
    before = api.get("/api/instances", params={"definition": named}).json()["items"]
    for empty in ("", "   "):
        body = {"definition": named, "version": "1", "instance_id": empty, "input": {}}
        refused = api.post("/api/instances", json=body)
        assert refused.status_code == 422, refused.text
        (problem,) = refused.json()["problems"]
        assert problem["path"] == "instance_id"
        assert problem["message"].startswith("the instance id is empty: give the id to start")
    assert api.get("/api/instances", params={"definition": named}).json()["items"] == before
    made = api.post("/api/instances", json={"definition": named, "version": "1", "input": {}})
    assert made.status_code == 201 and made.json()["id"].startswith(f"{named}-")


def test_a_command_without_its_step_names_the_step_field(
    studio: LiveStudio, api: SignedInClient, team: str, named: str
) -> None:
    """The API's problem had the path '' (not at any field); the confirmation form,
    which carries the step hidden, says it above the form."""
    instance = studio.start(team, named)
    refused = api.post(
        f"/api/instances/{instance}/actions", json={"action": "retry_activity", "reason": "r"}
    )
    assert refused.status_code == 422, refused.text
    message = "retry_activity needs the step it acts on"
    assert refused.json()["problems"] == [{"path": "step", "message": message}]
    form = {"_csrf": api.csrf, "reason": "r", "step": ""}
    page = api.post(f"/instances/{instance}/actions/retry_activity", data=form)
    assert page.status_code == 422 and message in page.text


def test_a_reused_command_id_is_refused_naming_the_instance_as_the_team_knows_it(
    studio: LiveStudio, api: SignedInClient, team: str, named: str
) -> None:
    """The conflict named the stored id, ``<team>:<id>``, which the API never shows."""
    body = {"definition": named, "version": "1", "input": {}}
    instance = api.post("/api/instances", json=body).json()["id"]
    actions = f"/api/instances/{instance}/actions"
    pause = {"action": "pause", "reason": "hold on", "command_id": "c-1"}
    assert api.post(actions, json=pause).status_code == 200
    clash = api.post(actions, json={**pause, "action": "resume"})
    assert clash.status_code == 409, clash.text
    error = clash.json()["error"]
    assert f" on {instance}: a new command needs a new id" in error
    assert f"{team}:" not in error


def answers(name: str) -> dict[str, Any]:
    wait = {"timeout": "1h", "input_limit": 1024}
    return {
        "name": name,
        "version": "1",
        "steps": [
            {"name": "paid", "kind": "signal", "target": "paid", **wait},
            {"name": "packed", "kind": "signal", "target": "packed", **wait},
            {"name": "ok", "kind": "approval", "target": "manager", **wait},
        ],
    }


def test_a_signal_or_approval_id_sent_again_with_other_content_is_a_conflict(
    studio: LiveStudio, api: SignedInClient, team: str
) -> None:
    """The same signal id (or approval command id) and reason with another payload or
    step answered 200 as if delivered, and what it carried was dropped."""
    instance = studio.start(team, studio.publish_new(team, "answers", answers))
    signals = f"/api/instances/{instance}/signals"
    sent = {"step": "paid", "reason": "bank", "payload": {"amount": 5}, "signal_id": "s-1"}
    assert api.post(signals, json=sent).status_code == 200
    assert api.post(signals, json=sent).status_code == 200  # a retry acts once
    other = api.post(signals, json={**sent, "payload": {"amount": 6}})
    assert other.status_code == 409, other.text
    assert other.json()["error"] == (
        "signal s-1 already answered paid with another payload: a new signal needs a new id"
    )
    elsewhere = api.post(signals, json={**sent, "step": "packed"})
    assert elsewhere.status_code == 409, elsewhere.text
    assert "signal s-1 was already used for another step than packed" in elsewhere.json()["error"]
    assert api.post(signals, json={**sent, "step": "packed", "signal_id": "s-2"}).status_code == 200
    actions = f"/api/instances/{instance}/actions"
    approve = {"action": "approve", "step": "ok", "reason": "fine", "payload": 1, "command_id": "a"}
    assert api.post(actions, json=approve).status_code == 200
    assert api.post(actions, json=approve).status_code == 200
    again = api.post(actions, json={**approve, "payload": 2})
    assert again.status_code == 409, again.text
    assert again.json()["error"].startswith("command id a already answered ok with another")
    shown = api.get(f"/api/instances/{instance}").json()
    assert [(s["step"], s["signal_id"]) for s in shown["signals"]][:2] == [
        ("paid", "s-1"),
        ("packed", "s-2"),
    ]


def test_a_bad_signal_or_command_id_or_step_is_refused_at_the_field_sent(
    studio: LiveStudio, api: SignedInClient, team: str
) -> None:
    """A signal's bad ``signal_id`` was refused as a "command id" at no field, and a step
    no definition can name with no field either: a script could not tell which to mend."""
    instance = studio.start(team, studio.publish_new(team, "answers", answers))
    signals = f"/api/instances/{instance}/signals"
    sent = {"step": "paid", "reason": "bank", "payload": {"amount": 5}}
    actions = f"/api/instances/{instance}/actions"
    approve = {"action": "approve", "step": "ok", "reason": "fine", "payload": 1}
    for url, body, field in (
        (signals, {**sent, "signal_id": "bad id!"}, "signal_id"),
        (signals, {**sent, "step": "no such step!"}, "step"),
        (actions, {**approve, "command_id": "bad id!"}, "command_id"),
        (actions, {**approve, "step": "no such step!"}, "step"),
    ):
        refused = api.post(url, json=body)
        assert refused.status_code == 422, refused.text
        (problem,) = refused.json()["problems"]
        assert problem["path"] == field
        assert problem["message"].startswith(f"the {field} must be 1 to")
    shown = api.get(f"/api/instances/{instance}").json()
    assert shown["signals"] == [] and shown["audit"] == []  # nothing was recorded
