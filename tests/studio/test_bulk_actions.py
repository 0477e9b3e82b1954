"""Bulk operator actions over HTTP: the preview page and API, confirming once, results.

The studio here runs no worker, so instances wait at their first activity; the tests
set their states apart with single commands (one paused, one terminated) and check
what the preview says for each, that confirming needs a reason, acts once per bulk id,
and that the results stay reachable. A bulk migration's preview says per instance
whether the compatibility judge lets it move and to which version and fingerprint; an
incompatible one is refused, and each migrated one's audit trail names who, why and
from which fingerprint to which, under the bulk's id.
"""

from __future__ import annotations

import re
from html import unescape
from urllib.parse import unquote

import pytest

from engine.api.client import Client
from engine.decide.operator_actions import Action
from studio.instance_urls import instance_url
from studio.instances import bulk
from studio.instances import service as instances
from studio.roles import Role
from tests.studio.live import LiveStudio, SignedInClient, definition


@pytest.fixture
def flow(studio: LiveStudio, team: str) -> tuple[str, list[str]]:
    """A fresh definition with three instances: running, paused, terminated."""
    name = studio.publish_new(team, "bulk")
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
    back = re.search(r'name="back" value="([^"]*)"', shown.text).group(1)
    assert 'name="chosen" value="filter"' in shown.text
    fields = {"bulk_id": bulk_id, "action": "cancel", "pick": ids}
    carried = {**fields, "chosen": "filter", "back": unescape(back)}

    no_reason = operator.form("/instances/bulk", {**carried, "reason": " "})
    assert no_reason.status_code == 422 and "a reason of 1 to 500" in no_reason.text
    # said as it was chosen (it read "chosen by hand"), "Not now" back to the filtered list
    assert "3 instances chosen by the filter" in no_reason.text
    not_now = re.search(r'href="(/instances\?[^"]*)">Not now<', no_reason.text).group(1)
    assert unescape(not_now) == f"/instances?view=all&definition={name}"
    # beside the reason field, which it marks and focuses, not above the preview
    assert 'aria-invalid="true" aria-describedby="bulk-reason-error" autofocus' in no_reason.text
    assert 'id="bulk-error"' not in no_reason.text
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


# Migration along a declared edge -------------------------------------------------------


@pytest.fixture
def moving(
    studio: LiveStudio, team: str, flow: tuple[str, list[str]]
) -> tuple[str, list[str], str]:
    """``flow`` and its version 2 (compatible where the instances wait): the name, the
    ids and version 2's fingerprint."""
    name, ids = flow
    return name, ids, studio.publish_judged(team, definition(name, "2", timeout="45s"))


def test_the_api_previews_and_migrates_only_compatible_instances_once(
    studio: LiveStudio, moving: tuple[str, list[str], str], operator: SignedInClient
) -> None:
    name, ids, v2_fingerprint = moving
    headers = {"X-CSRF-Token": operator.csrf}
    body = {"action": "migrate", "version": "2", "instances": ids}
    no_edge = operator.post("/api/instances/bulk/preview", json=body, headers=headers)
    assert no_edge.status_code == 422  # at the field, not once per instance
    assert no_edge.json()["problems"] == [
        {
            "path": "version",
            "message": "no migration to version 2 is declared; no migration is declared from "
            "the chosen instances' versions yet: declare one on the page of the version to "
            "move to (Compatibility and migration)",
        }
    ]
    same = operator.post(
        "/api/instances/bulk/preview", json={**body, "version": "1"}, headers=headers
    )
    assert same.status_code == 200, "the version they run: each previewed, as unchanged"
    unversioned = {"action": "migrate", "instances": ids}
    refused = operator.post("/api/instances/bulk/preview", json=unversioned, headers=headers)
    assert refused.status_code == 422 and "choose the version to migrate to" in refused.text

    studio.declare_migration(name, "v2")
    found = operator.post("/api/instances/bulk/preview", json=body, headers=headers).json()
    verdicts = {i["id"]: (i["verdict"], i["reason"]) for i in found["instances"]}
    assert verdicts[ids[0]] == verdicts[ids[1]] == ("applies", "")
    assert verdicts[ids[2]] == (
        "refused",
        "incompatible: it is terminated: only a running or paused instance can move",
    )
    moves = {i["id"]: i["moves_to"] for i in found["instances"]}
    assert moves[ids[0]] == {"definition": name, "version": "2", "fingerprint": v2_fingerprint}
    [skew] = found["versions"]
    assert (skew["version"], skew["instances"]) == ("1", 3)

    act = {**body, "bulk_id": found["bulk_id"], "reason": "ship v2"}
    first = operator.post("/api/instances/bulk", json=act, headers=headers).json()
    again = operator.post("/api/instances/bulk", json=act, headers=headers).json()
    assert [r["outcome"] for r in first["results"]] == ["done", "done", "refused"]
    assert [r["status_after"] for r in first["results"]] == ["running", "paused", "terminated"]
    assert again["replayed"] and again["results"] == first["results"]

    running = operator.get(f"/api{instance_url(ids[0])}").json()
    assert (running["definition"]["version"], running["status"]) == ("2", "running")
    trail = [(a["action"], a["actor"], a["command_id"], a["reason"]) for a in running["audit"]]
    assert [t[0] for t in trail] == ["pause", "migrate", "resume"]
    assert all(t[2].startswith(found["bulk_id"] + ".") for t in trail)
    assert all(t[3].startswith("ship v2 (") and v2_fingerprint[:12] in t[3] for t in trail)
    paused = operator.get(f"/api{instance_url(ids[1])}").json()
    assert [a["action"] for a in paused["audit"]] == ["pause", "migrate"], "it stays paused"
    terminated = studio.run(lambda store: Client(store).inspect(ids[2]))
    assert terminated.definition.version == "1"


def test_the_list_form_previews_a_migration_and_confirms_it(
    studio: LiveStudio, moving: tuple[str, list[str], str], operator: SignedInClient
) -> None:
    name, ids, _ = moving
    studio.declare_migration(name, "v2")
    query = f"action=migrate&select=hand&pick={ids[0]}&pick={ids[2]}&to_version=2"
    shown = operator.get(f"/instances/bulk?{query}")
    assert shown.status_code == 200
    text = re.sub(r"\s+", " ", shown.text)
    assert 'id="bulk-applies">1<' in text and 'id="bulk-refused">1<' in text
    assert f"→ {name}@2" in text and "incompatible: it is terminated" in text
    assert 'name="version" value="2"' in text
    bulk_id = re.search(r'name="bulk_id" value="(\w+)"', shown.text).group(1)
    fields = {"bulk_id": bulk_id, "action": "migrate", "version": "2", "pick": ids[:1]}
    done = operator.form("/instances/bulk", {**fields, "reason": "ship v2"})
    assert done.status_code == 303
    results = re.sub(r"\s+", " ", operator.get(done.headers["location"]).text)
    assert f"migrated from {name}@1 to {name}@2" in results
    state = studio.run(lambda store: Client(store).inspect(ids[0]))
    assert state.definition.version == "2" and state.status.label == "running"


# A refused preview or request says what to change, beside the field it concerns -------

NOTHING_TICKED = (
    "no instance was ticked: tick 1 to 100 in the list below, or preview for all matching "
    "the filters"
)


def said(html: str, element_id: str) -> str:
    """The text of the element ``element_id`` (a field's message)."""
    found = re.search(rf'id="{element_id}"[^>]*>([^<]*)<', html)
    return found.group(1) if found else ""


def test_a_refused_preview_is_the_list_again_as_it_was_left(studio: LiveStudio) -> None:
    """Not a bare message: the list, 422, the action and version as chosen, the boxes
    still ticked, and each reason beside its field saying what can be chosen."""
    team = studio.team("bulkform")
    name = studio.publish_new(team, "bulkform")
    ids = [studio.start(team, name, f"{name}-{n}") for n in range(3)]
    client = studio.client(studio.user(team, Role.OPERATOR))
    listed = f"view=all&definition={name}"
    box = {
        i: re.compile(rf'name="pick" form="bulk-form" value="{re.escape(i)}"[^>]*>') for i in ids
    }

    nothing = client.get(f"/instances/bulk?{listed}&action=migrate&select=hand&to_version=")
    assert nothing.status_code == 422 and 'id="bulk-form"' in nothing.text
    assert '<option value="migrate" selected>' in nothing.text
    assert f'<input type="hidden" name="definition" value="{name}">' in nothing.text
    assert said(nothing.text, "bulk-chosen-error") == NOTHING_TICKED
    assert said(nothing.text, "bulk-version-error") == (
        "choose the version to migrate to; no migration is declared from this team&#39;s "
        "versions yet: declare one on the page of the version to move to (Compatibility "
        "and migration)"
    )
    assert 'id="bulk-error"' not in nothing.text, "each reason beside its field, not above"

    studio.publish_judged(team, definition(name, "2"))
    studio.declare_migration(name, "v2")
    ticked = f"{listed}&action=migrate&select=hand&pick={ids[0]}&pick={ids[2]}&to_version=+"
    unversioned = client.get(f"/instances/bulk?{ticked}")
    assert unversioned.status_code == 422
    assert [("checked" in box[i].search(unversioned.text).group(0)) for i in ids] == [
        True,
        False,
        True,
    ], "what was ticked stays ticked"
    assert said(unversioned.text, "bulk-chosen-error") == ""
    assert said(unversioned.text, "bulk-version-error") == (
        "choose the version to migrate to; a migration is declared from the chosen "
        f"instances&#39; versions to 2 (from {name}@1)"
    )
    assert 'aria-describedby="bulk-version-error"' in unversioned.text
    undeclared = client.get(f"/instances/bulk?{ticked[:-1]}3")
    assert undeclared.status_code == 422
    assert said(undeclared.text, "bulk-version-error") == (
        "no migration to version 3 is declared; a migration is declared from the chosen "
        f"instances&#39; versions to 2 (from {name}@1)"
    )
    assert 'name="to_version" size="6" spellcheck="false" value="3"' in undeclared.text

    paused = client.get(f"/instances/bulk?{listed}&action=pause&select=filter&to_version=2")
    assert paused.status_code == 422 and '<option value="pause" selected>' in paused.text
    assert said(paused.text, "bulk-version-error") == "pause takes no version"
    assert 'name="to_version" size="6" spellcheck="false" value="2"' in paused.text
    assert [a["action"] for i in ids for a in audit(client, i)] == [], "nothing happened"


def test_the_api_says_what_an_empty_selection_or_a_missing_version_needs(
    studio: LiveStudio,
) -> None:
    """422, every field to change at once in ``problems``, each saying what is allowed."""
    team, name, instance_id = studio.one_running("bulkapi")
    studio.publish_judged(team, definition(name, "2"))
    studio.declare_migration(name, "v2")
    client = studio.client(studio.user(team, Role.OPERATOR))
    headers = {"X-CSRF-Token": client.csrf}
    empty = "instances is empty: list 1 to 100 instance ids (a preview takes a filter instead)"
    declared = f"versions to 2 (from {name}@1)"
    choose = "choose the version to migrate to; a migration is declared from"
    version = f"{choose} this team's {declared}"
    take = {"bulk_id": "b1", "reason": "ship v2"}
    for path, body in (
        ("/api/instances/bulk/preview", {"action": "migrate", "instances": []}),
        ("/api/instances/bulk", {"action": "migrate", "instances": [], **take}),
    ):
        refused = client.post(path, json=body, headers=headers)
        assert refused.status_code == 422, refused.text
        assert refused.json()["problems"] == [
            {"path": "instances", "message": empty},
            {"path": "version", "message": version},
        ]
    one = {"action": "migrate", "instances": [instance_id]}
    refused = client.post("/api/instances/bulk/preview", json=one, headers=headers)
    assert refused.status_code == 422
    assert refused.json()["error"] == f"{choose} the chosen instances' {declared}"
    state = studio.run(lambda store: Client(store).inspect(instance_id))
    assert state.definition.version == "1" and state.audit == ()


def test_a_refused_preview_keeps_the_page_and_the_ticks_of_other_pages(
    flow: tuple[str, list[str]], operator: SignedInClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ticked on the list's second page: that page again, not the first; a box ticked
    that the page does not show (the list moved on) is kept, ticked, beside the form."""
    name, ids = flow
    monkeypatch.setattr(instances, "PAGE_SIZE", 2)
    first = operator.get(f"/instances?view=all&definition={name}").text
    after = re.search(r"after=([^\"&]+)", first).group(1)
    second = operator.get(f"/instances?view=all&definition={name}&after={after}").text
    assert f'<input type="hidden" name="after" value="{unquote(after)}">' in second
    query = f"view=all&definition={name}&after={after}&action=migrate&select=hand"
    refused = operator.get(f"/instances/bulk?{query}&pick={ids[0]}&pick={ids[2]}")
    assert refused.status_code == 422
    text = re.sub(r"\s+", " ", refused.text)
    assert re.search(rf'value="{ids[0]}" aria-label="Choose {ids[0]}" checked', text)
    assert f"Choose {ids[2]}" not in text, "the first page's rows are not shown"
    kept = re.search(r'id="bulk-elsewhere">(.*?)</p>', text).group(1)
    assert f'name="pick" value="{ids[2]}" checked' in kept and ids[0] not in kept
