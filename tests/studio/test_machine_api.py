"""``/api/machines/{name}/executions``: submit (201 new, 200 repeat, 409 conflict),
state, status and cancel, each for the submitter only."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from engine import Client
from studio.instance_urls import instance_ref
from studio.roles import Role
from tests.studio.live import LiveStudio, SignedInClient

FIXTURE = Path(__file__).resolve().parents[2] / "examples" / "document_approval.json"


def machine_team(studio: LiveStudio) -> tuple[str, str]:
    """A fresh team with its own copy of the approval machine; (team, machine name)."""
    team = studio.team("machines")
    name = f"approval_{uuid.uuid4().hex[:8]}"
    studio.publish(team, {**json.loads(FIXTURE.read_text()), "name": name})
    return team, name


def operator(studio: LiveStudio, team: str) -> SignedInClient:
    client = studio.client(studio.user(team, Role.OPERATOR))
    client.headers["X-CSRF-Token"] = client.csrf
    return client


def submit(client: SignedInClient, name: str, **change: object):
    body = {"parent": "doc-7", "key": "r1", "input": "v1", **change}
    return client.post(f"/api/machines/{name}/executions", json=body)


def test_submit_is_idempotent_and_conflicts_say_why(studio: LiveStudio) -> None:
    team, name = machine_team(studio)
    client = operator(studio, team)
    first = submit(client, name)
    assert first.status_code == 201, first.text
    body = first.json()
    assert body["created"] is True and body["machine"] == name and body["version"] == "1"
    assert body["status"] == "running" and body["id"].startswith(f"{name}/")
    again = submit(client, name)
    assert again.status_code == 200 and again.json() == {**body, "created": False}

    other = submit(client, name, input="v2")
    assert other.status_code == 409
    assert other.json()["error"] == (
        f"key r1 was already used with another input (execution {body['id']})"
    )
    busy = submit(client, name, key="r2")
    assert busy.status_code == 409
    assert busy.json()["error"] == (
        f"{name} already has an active execution for parent doc-7: {body['id']}"
    )


def test_bad_submits_are_refused_in_words(studio: LiveStudio) -> None:
    team, name = machine_team(studio)
    client = operator(studio, team)
    wrong_type = submit(client, name, input=7)
    assert wrong_type.status_code == 422
    said = "the input must be text (the machine's input is text)"
    assert wrong_type.json()["error"] == said
    assert wrong_type.json()["problems"] == [{"path": "input", "message": said}]
    for field in ("key", "parent"):  # each refusal names the field a script sent
        refused = submit(client, name, **{field: ""})
        assert refused.status_code == 422
        assert [p["path"] for p in refused.json()["problems"]] == [field], refused.text
    assert submit(client, "no_such_machine").status_code == 404
    assert submit(client, name, version="9").status_code == 404
    _, theirs = machine_team(studio)
    assert submit(client, theirs).status_code == 404  # another team's machine


def test_state_status_and_cancel_are_the_submitters(studio: LiveStudio) -> None:
    team, name = machine_team(studio)
    client = operator(studio, team)
    execution = submit(client, name).json()["id"]
    at = f"/api/machines/{name}/executions/{instance_ref(execution)}"
    assert client.get(at + "/state").json() == {"variant": "Submitted", "fields": {}}
    assert client.get(at + "/status").json() == {"status": "running"}

    colleague = operator(studio, team)
    refused = colleague.get(at + "/status")
    assert refused.status_code == 403 and "only the actor who submitted it" in refused.text
    assert colleague.post(at + "/cancel", json={"reason": "mine now"}).status_code == 403
    stranger = operator(studio, studio.team("other"))
    assert stranger.get(at + "/state").status_code == 404
    elsewhere = f"/api/machines/other/executions/{instance_ref(execution)}/status"
    assert client.get(elsewhere).status_code == 404

    assert client.post(at + "/cancel", json={"reason": " "}).status_code == 422
    cancelled = client.post(at + "/cancel", json={"reason": "withdrawn", "command_id": "c1"})
    assert cancelled.status_code == 200 and cancelled.json() == {"status": "cancelling"}
    state = studio.run(lambda store: Client(store).inspect(execution))
    me = client.get("/api/me").json()["actor"]
    assert [(a.action, a.actor, a.reason) for a in state.audit] == [("cancel", me, "withdrawn")]


def test_a_cancel_the_execution_cannot_take_is_refused_in_words(studio: LiveStudio) -> None:
    """Each of these was a 500: a cancel once one is under way (the engine's refusal),
    a command id reused for another reason, a reason over the audit's limit and a
    command id the audit cannot carry. Nothing is recorded for any of them."""
    team, name = machine_team(studio)
    client = operator(studio, team)
    execution = submit(client, name).json()["id"]
    cancel = f"/api/machines/{name}/executions/{instance_ref(execution)}/cancel"
    assert client.post(cancel, json={"reason": "withdrawn", "command_id": "c1"}).status_code == 200

    again = client.post(cancel, json={"reason": "withdrawn twice", "command_id": "c2"})
    assert again.status_code == 409
    assert again.json()["error"] == (
        "the instance does not allow this now: the execution is already being cancelled; "
        "nothing was done"
    )
    reused = client.post(cancel, json={"reason": "another reason", "command_id": "c1"})
    assert reused.status_code == 409 and "a new command needs a new id" in reused.json()["error"]
    long = client.post(cancel, json={"reason": "r" * 501, "command_id": "c3"})
    assert long.status_code == 422
    assert long.json()["error"] == "a reason of 1 to 500 characters is required"
    bad_id = client.post(cancel, json={"reason": "x", "command_id": "bad id!"})
    assert bad_id.status_code == 422 and bad_id.json()["error"].startswith("command id must be")
    state = studio.run(lambda store: Client(store).inspect(execution))
    assert [a.command_id for a in state.audit] == ["c1"]
