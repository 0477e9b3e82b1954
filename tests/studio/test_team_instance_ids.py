"""Two teams probing each other's instance ids over the API: each team's ids are its
own (``engine.model.identifiers.team_instance_id``), so another team's id can be neither
taken nor observed, and a child's id cannot be taken before its parent starts it."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from engine.model.limits import MAX_IDENTIFIER_LENGTH
from engine.worker.activities import ActivityRegistry
from studio.formats import breakable
from studio.instance_urls import instance_url
from studio.roles import Role
from tests.studio.live import LiveStudio, SignedInClient, serve_studio

CHILD_WAIT_SECONDS = 20.0
"""Generous: these machines are shared, and a loaded one is slow, not broken."""


@pytest.fixture(scope="module")
def working(pg_dsn: str) -> Iterator[LiveStudio]:
    """A studio whose own worker starts children (they need no activity to start)."""
    with serve_studio(pg_dsn, worker_activities=ActivityRegistry()) as live:
        yield live


def operator(studio: LiveStudio, team: str) -> SignedInClient:
    client = studio.client(studio.user(team, Role.OPERATOR))
    client.headers["X-CSRF-Token"] = client.csrf
    return client


def start(client: SignedInClient, name: str, instance_id: str, value: Any = None) -> httpx.Response:
    body = {"definition": name, "version": "1", "instance_id": instance_id, "input": value}
    return client.post("/api/instances", json=body)


def seen(client: SignedInClient, instance_id: str) -> httpx.Response:
    return client.get(f"/api{instance_url(instance_id)}")


def published(studio: LiveStudio, team: str) -> str:
    name = studio.publish_new(team, "flow")
    return name


def test_two_teams_each_run_their_own_instance_of_one_id(studio: LiveStudio) -> None:
    red, blue = studio.team("red"), studio.team("blue")
    reds, blues = operator(studio, red), operator(studio, blue)
    red_flow, blue_flow = published(studio, red), published(studio, blue)
    shared = f"order-{uuid.uuid4().hex[:6]}"

    assert start(reds, red_flow, shared, {"n": 1}).status_code == 201
    theirs = start(blues, blue_flow, shared, {"n": 2})

    assert theirs.status_code == 201, theirs.text  # not 409: red's id is not blue's
    assert (theirs.json()["id"], theirs.json()["definition"]["name"]) == (shared, blue_flow)
    assert seen(reds, shared).json()["definition"]["name"] == red_flow
    assert seen(blues, shared).json()["input"] == {"n": 2}
    assert [i["id"] for i in blues.get(f"/api/instances?instance={shared}").json()["items"]] == [
        shared
    ]
    clash = start(blues, blue_flow, shared, {"n": 3})  # a conflict is only ever one's own
    assert clash.status_code == 409
    assert clash.json()["error"].startswith(f"instance {shared} already exists")
    assert blue not in clash.json()["error"]


def test_another_teams_ids_answer_exactly_as_free_ones(studio: LiveStudio) -> None:
    red, blue = studio.team("red"), studio.team("blue")
    reds, blues = operator(studio, red), operator(studio, blue)
    red_flow, blue_flow = published(studio, red), published(studio, blue)
    used = f"used-{uuid.uuid4().hex[:6]}"
    assert start(reds, red_flow, used).status_code == 201
    before = seen(reds, used).json()
    free = f"free-{uuid.uuid4().hex[:6]}"

    for probe in (used, f"{red}:{used}"):  # the id red uses, and the form it is stored in
        missing, taken = seen(blues, free), seen(blues, probe)
        assert (taken.status_code, taken.json()) == (missing.status_code, missing.json())
        assert taken.status_code == 404
        assert start(blues, blue_flow, probe).status_code == 201
        assert seen(blues, probe).json()["id"] == probe

    assert seen(reds, used).json() == before  # red's instance never moved


def child_definitions(studio: LiveStudio, team: str) -> str:
    """A parent whose first step starts a child that waits an hour; the parent's name."""
    suffix = uuid.uuid4().hex[:6]
    kid = {"name": f"kid.{suffix}", "version": "1", "mode": "orchestration"}
    kid["steps"] = [{"name": "wait", "kind": "timer", "timeout": "1h"}]
    fingerprint = studio.publish(team, kid)
    step = {"name": "kid", "kind": "child", "target": kid["name"], "timeout": "2h"}
    step |= {"input_limit": 1024, "result_limit": 1024}
    step |= {"retry": {"max_attempts": 1, "initial_delay": "1s", "max_delay": "1s"}}
    step["child_definition"] = {"name": kid["name"], "version": "1", "fingerprint": fingerprint}
    parent = {"name": f"parent.{suffix}", "version": "1", "mode": "orchestration"}
    parent["steps"] = [step, {"name": "after", "kind": "timer", "timeout": "1h"}]
    studio.publish(team, parent)
    return parent["name"]


def child_of(client: SignedInClient, parent: str) -> dict[str, Any]:
    """The parent's child once its start is settled (the studio's worker starts it)."""
    deadline = time.monotonic() + CHILD_WAIT_SECONDS
    while True:
        [child] = seen(client, parent).json()["children"]
        if child["status"] not in ("scheduled", "start_running"):
            return child
        assert time.monotonic() < deadline, f"the child of {parent} was never started"
        time.sleep(0.05)  # polling the API a user would poll: no event to await over HTTP


def test_a_child_id_cannot_be_taken_before_its_parent_starts_it(working: LiveStudio) -> None:
    red, blue = working.team("red"), working.team("blue")
    reds, blues = operator(working, red), operator(working, blue)
    parent_flow, blue_flow = child_definitions(working, red), published(working, blue)
    parent = f"par-{uuid.uuid4().hex[:6]}"
    kid = f"{parent}/kid"
    assert start(blues, blue_flow, kid).status_code == 201  # blue takes the child's id first

    assert start(reds, parent_flow, parent).status_code == 201
    child = child_of(reds, parent)

    assert (child["status"], child["code"], child["child_id"]) == ("active", "", kid)
    assert seen(reds, kid).json()["parent_id"] == parent
    assert seen(blues, kid).json()["definition"]["name"] == blue_flow
    assert seen(blues, kid).json()["parent_id"] is None
    shown = reds.get(instance_url(parent)).text  # ids as the team knows them, linked so
    assert f"<h1><code>{parent}</code>" in shown
    assert f'<a href="{instance_url(kid)}"><code>{kid}</code></a>' in shown
    assert f"successor_id</span> <code>{breakable(kid)}</code>" in shown
    step_row = shown[shown.index('<tr id="step-row-kid"') :].partition("</tr>")[0]
    assert f'child <a href="{instance_url(kid)}"><code>{kid}</code></a>: active' in step_row
    assert f"{red}:" not in step_row  # the stored form, which says the team's id
    [step] = [s for s in seen(reds, parent).json()["steps"] if s["step"] == "kid"]
    assert step["note"] == f"child {kid}: active"
    assert (
        f'<a href="{instance_url(parent)}"><code>{parent}</code></a>' in reds.get("/instances").text
    )
    for events in (
        reds.get(f"/api{instance_url(parent)}/history").json()["events"],
        reds.get(instance_url(parent, "/history.json")).json(),
    ):
        assert {e["instance_id"] for e in events} == {parent}
        assert kid in {e.get("successor_id") for e in events}


def test_an_id_too_long_with_the_teams_prefix_is_refused_with_the_limit(
    studio: LiveStudio,
) -> None:
    team = studio.team("red")
    client = operator(studio, team)
    flow = published(studio, team)
    limit = MAX_IDENTIFIER_LENGTH - len(team) - 1

    refused = start(client, flow, "x" * (limit + 1))

    assert refused.status_code == 422
    assert refused.json()["error"] == (
        f"the instance id is {limit + 1} characters; this team's ids have at most {limit}"
    )
    assert start(client, flow, "x" * limit).status_code == 201


def listed(instance_id: str) -> str:
    """An instance's id as the list shows it (breakable after its separators)."""
    return f'<code class="ident">{breakable(instance_id)}</code>'


def test_the_list_shows_children_under_their_parents(working: LiveStudio) -> None:
    team = working.team("family")
    client = operator(working, team)
    parent = f"fam-{uuid.uuid4().hex[:6]}"
    assert start(client, child_definitions(working, team), parent).status_code == 201
    kid = child_of(client, parent)["child_id"]

    flat = client.get("/instances?view=all").text  # newest first: the child above
    assert flat.index(listed(kid)) < flat.index(f"{listed(parent)}</a></td>")
    assert f'child of <a href="{instance_url(parent)}"><code>{parent}</code></a>' in flat

    nested = client.get("/instances?view=all&nest=1").text
    choose = r"(?:<td><input[^>]*></td>\s*)?"  # the bulk selection's box, for an operator
    row = rf'<tr( data-parent="[^"]*")?>\s*{choose}<td( class="child-row[^"]*")?>'
    rows = re.findall(row, nested)
    assert rows[:2] == [("", ""), (f' data-parent="{parent}"', ' class="child-row depth-1"')]
    assert nested.index(listed(parent)) < nested.index(listed(kid))
    assert client.get("/instances?nest=yes").status_code == 422
