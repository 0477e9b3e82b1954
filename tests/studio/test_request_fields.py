"""An API body holds the fields its route takes, and nothing else.

Litestar used to drop a key the request class does not declare, so a misspelt field
was silently replaced by its default: ``"cuont"`` released a whole hold instead of 1
instance, ``"id"`` started a new instance on every retry. Each such request is now
refused with 400 naming the key and the fields allowed there, before anything is
written; an empty body says what to send, a refused value of a closed set says the set.
A query parameter the route does not take (``stauts``) is refused the same way, where
it used to be ignored and the list answered unfiltered.
"""

from __future__ import annotations

import uuid

import httpx
import pytest

from studio.query_params import NAME_SHOWN
from studio.roles import Role
from tests.studio.live import LiveStudio, SignedInClient, definition

SHAPE = "the request is not in the expected shape"


@pytest.fixture(scope="module")
def named(studio: LiveStudio, team: str) -> str:
    name = f"fields.{uuid.uuid4().hex[:6]}"
    studio.publish(team, definition(name))
    return name


@pytest.fixture(scope="module")
def api(operator: SignedInClient) -> SignedInClient:
    operator.headers["X-CSRF-Token"] = operator.csrf
    return operator


def test_a_misspelt_count_is_refused_and_the_hold_stays_in_force(
    api: SignedInClient, named: str
) -> None:
    placed = api.post(
        "/api/holds", json={"scope": "definition", "reason": "x", "definition": named}
    )
    assert placed.status_code == 201, placed.text
    release = f"/api/holds/{placed.json()['id']}/release"
    refused = api.post(release, json={"reason": "one at a time", "cuont": 1})
    assert refused.status_code == 400
    assert refused.json() == {
        "error": SHAPE,
        "problems": [
            {
                "path": "cuont",
                "message": "not a field here; it takes reason, count, rate (reason required)",
            }
        ],
    }
    [hold] = [h for h in api.get("/api/holds").json() if h["id"] == placed.json()["id"]]
    assert hold["active"] is True
    assert api.post(release, json={"reason": "done"}).status_code == 200


def test_a_start_with_a_field_it_does_not_take_starts_nothing(
    api: SignedInClient, named: str
) -> None:
    body = {"definition": named, "version": "1", "id": "typo-1", "input": {}}
    refused = api.post("/api/instances", json=body)
    assert refused.status_code == 400
    [problem] = refused.json()["problems"]
    assert problem["path"] == "id" and "instance_id" in problem["message"]
    listed = api.get("/api/instances", params={"definition": named}).json()
    assert listed["items"] == []


def test_a_nested_request_class_is_held_to_its_fields_but_free_form_values_are_not(
    api: SignedInClient, named: str
) -> None:
    preview = {"action": "pause", "filter": {"definition": named, "stauts": "running"}}
    refused = api.post("/api/instances/bulk/preview", json=preview)
    assert refused.status_code == 400
    assert [p["path"] for p in refused.json()["problems"]] == ["filter.stauts"]
    items = [{"instance_id": "a", "work_id": "w", "token": 1, "tokn": 2}]
    resolve = {"action": "retry", "reason": "x", "items": items}
    refused = api.post("/api/dead-letters/resolve", json=resolve)
    assert [p["path"] for p in refused.json()["problems"]] == ["items[0].tokn"]
    free = {"definition": named, "version": "1", "input": {"anything": {"goes": 1}}}
    assert api.post("/api/instances", json=free).status_code == 201


def test_an_empty_or_form_body_says_what_the_route_takes(api: SignedInClient) -> None:
    empty = api.post("/api/holds", content=b"", headers={"Content-Type": "application/json"})
    assert empty.status_code == 400
    assert empty.json()["error"] == (
        "the request body is empty; send a JSON object with scope, reason, definition "
        "(scope, reason required)"
    )
    form = api.post("/api/holds", data={"scope": "team", "reason": "x"})
    assert form.status_code == 400
    assert form.json()["error"].startswith("the request body is not valid JSON")


def test_a_value_outside_a_closed_set_names_the_set(api: SignedInClient) -> None:
    refused = api.post("/api/holds", json={"scope": "galaxy", "reason": "x"})
    assert refused.status_code == 400
    assert refused.json()["problems"] == [
        {"path": "scope", "message": "Invalid enum value 'galaxy'; it is one of definition, team"}
    ]


def test_a_caller_without_access_learns_that_first(studio: LiveStudio, team: str) -> None:
    anonymous = httpx.post(f"{studio.url}/api/holds", json={"bogus": 1})
    assert anonymous.status_code == 401
    viewer = studio.client(studio.user(team, Role.VIEWER))
    viewer.headers["X-CSRF-Token"] = viewer.csrf
    assert viewer.post("/api/holds", json={"bogus": 1}).status_code == 403


def test_the_document_says_request_classes_take_no_other_fields(studio: LiveStudio) -> None:
    schemas = httpx.get(f"{studio.url}/schema/openapi.json").json()["components"]["schemas"]
    for name in ("ReleaseIn", "StartIn", "BulkFilterIn", "FenceIn"):
        assert schemas[name]["additionalProperties"] is False, name


def test_a_missing_required_field_is_named_by_its_path(api: SignedInClient, named: str) -> None:
    """Not ``{"path": "data", ...}``: the problem's path is the field to send."""
    refused = api.post("/api/instances", json={"definition": named, "input": {}})
    assert refused.status_code == 400
    assert refused.json() == {
        "error": SHAPE,
        "problems": [{"path": "version", "message": "required, and missing"}],
    }


def test_a_misspelt_query_parameter_is_refused_not_ignored(
    studio: LiveStudio, api: SignedInClient, team: str, named: str
) -> None:
    """``stauts`` used to be dropped, and every instance listed as if unfiltered."""
    studio.start(team, named)
    refused = api.get("/api/instances", params={"definition": named, "stauts": "paused"})
    assert refused.status_code == 400
    body = refused.json()
    assert body["error"].startswith("this route takes no query parameter stauts; it takes after,")
    [problem] = body["problems"]
    assert problem["path"] == "stauts"
    assert ", status, " in problem["message"] and problem["message"].endswith("all optional")
    spelt = api.get("/api/instances", params={"definition": named, "status": "paused"})
    assert spelt.status_code == 200 and spelt.json()["items"] == []


def test_a_query_parameter_says_which_are_required_and_none_is_said_of_routes_without(
    api: SignedInClient, named: str
) -> None:
    diff = api.get(f"/api/definitions/{named}/diff", params={"left": "1", "rihgt": "1"})
    assert diff.status_code == 400
    assert diff.json()["problems"] == [
        {
            "path": "rihgt",
            "message": "not a query parameter here; it takes left, right (left, right required)",
        }
    ]
    holds = api.get("/api/holds", params={"definition": named})
    assert holds.status_code == 400
    assert holds.json()["error"] == (
        "this route takes no query parameter definition; it takes no query parameters"
    )


def test_a_refused_query_parameter_writes_nothing_and_is_said_back_only_by_a_short_name(
    api: SignedInClient, named: str
) -> None:
    hold = {"scope": "definition", "reason": "placed by a refused request", "definition": named}
    long_name = "x" * 5000
    names = {long_name: "secret-value", "a": "1", "b": "1", "c": "1", "d": "1", "e": "1"}
    refused = api.post("/api/holds", params=names, json=hold)
    assert refused.status_code == 400
    assert "secret-value" not in refused.text and long_name not in refused.text
    assert refused.json()["error"].startswith("this route takes no query parameter a, b, c, d, e")
    assert refused.json()["error"].count("and 1 more") == 1
    assert [h for h in api.get("/api/holds").json() if h["reason"] == hold["reason"]] == []
    alone = api.get("/api/holds", params={long_name: "secret-value"})
    [problem] = alone.json()["problems"]
    assert problem["path"] == "x" * NAME_SHOWN + "…"
    assert "secret-value" not in alone.text


def test_a_missing_field_inside_a_nested_object_is_named_by_its_full_path(
    api: SignedInClient,
) -> None:
    """Not ``items[0]`` (the object that lacks it): the field to send, where it goes."""
    item = {"instance_id": "a", "work_id": "w"}
    resolve = {"action": "retry", "reason": "x", "items": [{**item, "token": 1}, item]}
    refused = api.post("/api/dead-letters/resolve", json=resolve)
    assert refused.status_code == 400
    assert refused.json()["problems"] == [
        {"path": "items[1].token", "message": "required, and missing"}
    ]
