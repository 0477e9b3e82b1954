"""Instances over HTTP: start, list, the instance page, operator actions, history.

The studio here runs no worker, so an instance waits at its first activity: exactly
what operator actions and the page's own reads need, without timing.
"""

from __future__ import annotations

import json
import re
import uuid

import pytest

from engine import Queries
from engine.decide.operator_actions import Action
from engine.store import reads
from studio.instance_urls import instance_url
from studio.roles import Role
from tests.studio.live import LiveStudio, SignedInClient, definition

HTMX = {"HX-Request": "true"}


@pytest.fixture(scope="module")
def flow(studio: LiveStudio, team: str) -> str:
    """A published definition of the team (activity, parallel of two, join, timer)."""
    name = studio.publish_new(team, "flow")
    return name


def audit(client: SignedInClient, instance_id: str) -> list[dict]:
    return client.get(f"/api{instance_url(instance_id)}").json()["audit"]


def test_the_start_form_checks_the_input_and_starts_once_per_id(
    studio: LiveStudio, team: str, flow: str, operator: SignedInClient
) -> None:
    form = operator.get(f"/instances/new?definition={flow}&version=1")
    assert form.status_code == 200 and "at most 1024 bytes" in form.text
    chosen = f"{flow}@1"
    broken = operator.form("/instances", {"definition": chosen, "input": "{"})
    assert broken.status_code == 422 and "not valid JSON" in broken.text
    big = json.dumps({"blob": "x" * 2000})
    too_big = operator.form("/instances", {"definition": chosen, "input": big})
    assert too_big.status_code == 422
    assert re.search(r"the input is \d+ bytes; step \w+ accepts at most 1024", too_big.text)

    instance_id = f"once-{uuid.uuid4().hex[:6]}"
    fields = {"definition": chosen, "instance_id": instance_id, "input": '{"n": 1}'}
    first = operator.form("/instances", fields)
    assert first.status_code == 303 and first.headers["location"] == instance_url(instance_id)
    again = operator.form("/instances", fields)  # posted twice: still one instance
    assert again.status_code == 303
    listed = operator.get(f"/api/instances?instance={instance_id}").json()["items"]
    assert [i["id"] for i in listed] == [instance_id]
    other = operator.form("/instances", {**fields, "input": '{"n": 2}'})
    assert other.status_code == 409 and "choose another instance id" in other.text
    assert 'id="start-form"' in other.text, "the form again, not an error page"
    assert f'value="{instance_id}"' in other.text and "&#34;n&#34;: 2" in other.text

    elsewhere = studio.team("elsewhere")
    studio.publish(elsewhere, definition(f"their.{uuid.uuid4().hex[:6]}"))
    taken = f"taken-{uuid.uuid4().hex[:6]}"
    studio.start(elsewhere, definition_name(studio, elsewhere), taken)
    ours = operator.form("/instances", {"definition": chosen, "instance_id": taken})  # per team
    assert ours.status_code == 303 and ours.headers["location"] == instance_url(taken)


def definition_name(studio: LiveStudio, team: str) -> str:
    versions = studio.run(lambda store: Queries(store).versions(team))
    return versions[0].definition.name


def test_the_list_keeps_filters_in_the_url_and_pages_by_keyset(
    studio: LiveStudio, team: str, flow: str, viewer: SignedInClient
) -> None:
    ids = [studio.start(team, flow, f"{flow}-list-{n}") for n in range(3)]
    studio.command(ids[1], Action.TERMINATE)
    running = viewer.get(f"/api/instances?definition={flow}").json()["items"]
    assert [i["id"] for i in running if i["id"] in ids] == [ids[2], ids[0]]  # newest first
    oldest = viewer.get(f"/api/instances?definition={flow}&sort=started").json()["items"]
    assert [i["id"] for i in oldest if i["id"] in ids] == [ids[0], ids[2]]
    archived = viewer.get(f"/api/instances?view=archived&definition={flow}").json()["items"]
    assert [i["id"] for i in archived] == [ids[1]]
    page = viewer.get(f"/instances?view=all&definition={flow}&status=terminated")
    assert page.status_code == 200 and ids[1] in page.text and ids[0] not in page.text
    tabs = re.search(r'<nav class="tabs".*?</nav>', page.text, re.S).group(0)
    assert tabs.count('name="status" value="terminated"') == 3  # the tabs keep the filters
    empty = viewer.get(f"/instances?definition={flow}&started_before=2000-01-01")
    assert "match these filters" in empty.text
    assert viewer.get("/instances?status=sleeping").status_code == 422
    refused = viewer.get("/api/instances?status=sleeping")  # the same filters, the same rule
    assert refused.status_code == 422 and "status is one of running, " in refused.text


def test_only_a_chosen_view_is_saved_never_one_a_link_opens(
    studio: LiveStudio, team: str, flow: str
) -> None:
    """A plain GET of the list with a query (a link from another site, say) changed the
    view the person's list opens with. Only a view chosen on the list is saved: a POST
    (the Filter form, a tab, a heading, Clear) carrying the session's CSRF token."""
    person = studio.client(studio.user(team, Role.VIEWER))
    linked = "/instances?view=archived&status=failed"
    shown = person.get(linked)
    assert shown.status_code == 200 and 'value="failed" selected' in shown.text
    assert person.get("/instances").status_code == 200, "the link saved nothing"
    chosen = person.form("/instances/view", {"definition": flow, "sort": "id", "after": "x"})
    assert chosen.headers["location"] == f"/instances?view=active&definition={flow}&sort=id"
    assert person.get(linked).status_code == 200
    assert person.get("/instances").headers["location"] == chosen.headers["location"]
    forged = person.post("/instances/view", data={"view": "all"})  # no CSRF token
    refused = person.form("/instances/view", {"view": "all", "status": "sleeping"})
    assert (forged.status_code, refused.status_code) == (403, 422)
    assert "status is one of running, " in refused.text
    assert person.get("/instances").headers["location"] == chosen.headers["location"]
    assert person.form("/instances/view", {"view": "all"}).status_code == 303  # a tab
    assert person.get("/instances").headers["location"] == "/instances?view=all"


def test_an_instance_page_shows_the_replayed_state_and_other_teams_get_404(
    studio: LiveStudio, team: str, flow: str, viewer: SignedInClient
) -> None:
    instance_id = studio.start(team, flow, f"{flow}/child-like")  # a '/' in the id
    url = instance_url(instance_id)
    page = viewer.get(url)
    assert page.status_code == 200
    assert re.search(r'id="step-reserve" class="node kind-activity state-scheduled"', page.text)
    assert f'href="/definitions/{flow}/versions/1"' in page.text
    assert 'data-offer="pause"' not in page.text  # a viewer gets no action buttons
    assert "need the operator role" in page.text
    detail = viewer.get(f"/api{url}").json()
    assert detail["steps"][0] == {
        "step": "reserve",
        "kind": "activity",
        "state": "scheduled",
        "note": "waiting for a worker to start it",
    }
    assert {a["action"] for a in detail["actions"]} >= {"pause", "cancel", "terminate"}

    stranger = studio.client(studio.user(studio.team("strangers"), Role.ADMIN))
    for path in (url, url + "/history", url + "/history.json", url + "/live", f"/api{url}"):
        assert stranger.get(path).status_code == 404, path


def test_an_action_needs_the_role_a_reason_and_lands_in_the_audit_once(
    studio: LiveStudio, team: str, flow: str, operator: SignedInClient, viewer: SignedInClient
) -> None:
    instance_id = studio.start(team, flow)
    url = instance_url(instance_id)
    assert viewer.get(url + "/actions/pause").status_code == 403
    forged = viewer.form(url + "/actions/pause", {"reason": "sneaky"})
    assert forged.status_code == 403 and audit(operator, instance_id) == []

    confirm = operator.get(url + "/actions/cancel")
    assert confirm.status_code == 200
    assert "Nothing needs compensating" in confirm.text and "Stops waiting" not in confirm.text
    command_id = re.search(r'name="command_id" value="(\w+)"', confirm.text).group(1)
    no_reason = operator.form(url + "/actions/pause", {"reason": " ", "command_id": command_id})
    assert no_reason.status_code == 422 and "a reason of 1 to 500" in no_reason.text
    # beside the reason, which it marks, rather than above the form
    assert re.search(r'aria-invalid="true" aria-describedby="confirm-reason-error"', no_reason.text)
    assert 'id="confirm-error"' not in no_reason.text
    # the whole page (no panel to answer into) posts natively, not with htmx
    assert "hx-post" not in re.search(r'<form[^>]*id="confirm-form"', no_reason.text).group(0)

    fields = {"reason": "hold for the audit", "command_id": command_id}
    done = operator.form(url + "/actions/pause", fields)
    assert done.status_code == 303 and done.headers["location"] == url + "#instance-audit"
    assert operator.form(url + "/actions/pause", fields).status_code == 303  # same command
    [entry] = audit(operator, instance_id)
    assert (entry["action"], entry["reason"], entry["command_id"]) == (
        "pause",
        "hold for the audit",
        command_id,
    )
    stale = operator.form(url + "/actions/pause", {"reason": "again"})
    assert stale.status_code == 409 and "not allow" in stale.text

    answer = operator.post(
        url + "/actions/resume",
        data={"_csrf": operator.csrf, "reason": "go on"},
        headers={**HTMX, "X-CSRF-Token": operator.csrf},
    )
    assert answer.status_code == 200
    assert 'id="instance-audit"' in answer.text and 'hx-swap-oob="true"' in answer.text
    assert "go on" in answer.text  # the audit row is in the answer itself
    assert "data-nodes=" in answer.text
    assert [a["action"] for a in audit(operator, instance_id)] == ["pause", "resume"]


def test_the_api_runs_commands_and_signals_with_the_same_rules(
    studio: LiveStudio, team: str, flow: str, operator: SignedInClient, viewer: SignedInClient
) -> None:
    instance_id = studio.start(team, flow)
    api = f"/api{instance_url(instance_id)}"
    headers = {"X-CSRF-Token": operator.csrf}
    refused = viewer.post(api + "/actions", json={"action": "pause", "reason": "x"})
    assert refused.status_code == 403
    missing = operator.post(
        api + "/actions", json={"action": "pause", "reason": ""}, headers=headers
    )
    assert missing.status_code == 422
    both = operator.post(
        api + "/actions",
        json={"action": "resolve_activity", "step": "reserve", "reason": " "},
        headers=headers,
    )
    assert both.status_code == 422  # each problem named by its field, both at once
    assert [p["path"] for p in both.json()["problems"]] == ["reason", "resolution"]
    done = operator.post(
        api + "/actions", json={"action": "terminate", "reason": "by script"}, headers=headers
    )
    assert done.status_code == 200 and done.json()["status"] == "terminated"
    assert done.json()["actions"] == []
    late = operator.post(
        api + "/signals", json={"step": "reserve", "reason": "r", "payload": {}}, headers=headers
    )
    assert late.status_code == 404  # reserve is no signal step


def test_history_pages_filter_deep_link_and_export(
    studio: LiveStudio, team: str, flow: str, viewer: SignedInClient
) -> None:
    instance_id = studio.start(team, flow)
    for n in range(3):
        studio.command(instance_id, Action.PAUSE, f"pause {n}")
        studio.command(instance_id, Action.RESUME, f"resume {n}")
    url = instance_url(instance_id)
    everything = viewer.get(f"/api{url}/history").json()["events"]
    assert len(everything) == 2 + 3 * 4

    paused = viewer.get(url + "/history?kind=paused")
    assert paused.text.count('class="event kind-paused"') == 3
    assert 'class="event kind-resumed"' not in paused.text
    by_step = viewer.get(url + "/history?step=reserve").text
    assert by_step.count('class="event kind-') == 1
    later = viewer.get(url + "/history?after=10&limit=2", headers=HTMX)
    assert re.findall(r'id="event-(\d+)"', later.text) == ["11", "12"]
    assert "history-next" in later.text and "<html" not in later.text  # a fragment
    assert f'href="{url}/history?after=10#event-11"' in later.text  # deep link per event

    export = viewer.get(url + "/history.json")
    assert export.headers["content-type"].startswith("application/json")
    assert json.loads(export.text) == everything


def test_a_long_history_opens_with_its_first_page_without_reading_the_rest(
    studio: LiveStudio, team: str, flow: str, viewer: SignedInClient, monkeypatch
) -> None:
    instance_id = f"long-{uuid.uuid4().hex[:6]}"
    studio.start(team, flow, instance_id)
    total = studio.run(lambda store: pad_history(store, instance_id, 10_000))
    assert total >= 10_000
    reads_made: list[tuple[int, int, int]] = []
    original = reads.history_page

    async def counting(store, instance, after=0, limit=1000, kinds=None, step=None):
        page = await original(store, instance, after, limit, kinds, step)
        if instance == instance_id:
            reads_made.append((after, limit, len(page.events)))
        return page

    monkeypatch.setattr(reads, "history_page", counting)
    url = instance_url(instance_id)
    page = viewer.get(url)
    assert page.status_code == 200
    assert reads_made == [(0, 50, 50)]  # one keyset page; nothing else of the history
    assert page.text.count('class="event kind-') == 50 and "history-next" in page.text
    assert 'id="state-loading"' in page.text  # the replayed state comes after

    reads_made.clear()
    state = viewer.get(url + "/state", headers=HTMX)
    assert state.status_code == 200 and 'id="step-reserve"' in state.text
    assert sum(n for _, _, n in reads_made) == total  # the replay, once

    reads_made.clear()
    again = viewer.get(url)
    assert reads_made == [(0, 50, 50)] and 'id="state-loading"' not in again.text


async def pad_history(store, instance_id: str, events: int) -> int:
    """Grow an instance's history to ``events`` with pause/resume commands, 100 events
    (25 rounds) per transition, built and checked by the engine like any command."""
    from engine.api.client import Client
    from engine.decide.operator_commands import record_command
    from engine.model.transitions import Draft

    client = Client(store)
    state = await client.inspect(instance_id)
    registry = await client.registries.get()
    count = 0
    while state.sequence < events:
        draft = Draft(registry, state, max(store.now(), state.updated_at))
        for _ in range(25):
            for action in (Action.PAUSE, Action.RESUME):
                count += 1
                record_command(draft, f"pad-{count}", action, "seed", "padding")
        await store.commit(draft.build("pad", str(count)))
        assert draft.state is not None
        state = draft.state
    return state.sequence


def test_an_unknown_outcome_shows_as_such_and_an_operator_settles_it(
    studio: LiveStudio, team: str, operator: SignedInClient
) -> None:
    from engine.store import catalog
    from tests.unit.histories import RICH, Run

    run = Run(RICH, instance_id=f"doubt-{uuid.uuid4().hex[:6]}")
    run.start()
    run.run_activity("a", "unknown")

    async def commit(store) -> None:
        await catalog.publish(store, RICH, "seed", team)
        for transition in run.transitions:
            await store.commit(transition, team)

    studio.run(commit)
    url = instance_url(run.instance_id)
    page = operator.get(url)
    assert re.search(r'id="step-a" class="node kind-activity state-unknown"', page.text)
    assert "UNKNOWN (in doubt)" in page.text
    assert 'data-offer="resolve_activity:a"' in page.text
    assert 'data-offer="retry_activity:a"' in page.text
    detail = operator.get(f"/api{url}").json()
    [attempt] = detail["attempts"]
    assert (attempt["step"], attempt["outcome"]) == ("a", "unknown")
    # the API, too, says what each way of settling it records, not only "failed"
    [offered] = [a for a in detail["actions"] if a["action"] == "resolve_activity"]
    ways = {r["resolution"]: r for r in offered["resolutions"]}
    assert list(ways) == ["succeeded", "failed", "absent"]
    assert "activity_scheduled b" in ways["succeeded"]["records"]
    assert ways["absent"]["reruns"][0]["attempt"] == 2
    assert all(a["resolutions"] == [] for a in detail["actions"] if a is not offered)

    confirm = operator.get(url + "/actions/resolve_activity?step=a")
    assert "has an unknown outcome" in confirm.text and 'value="absent"' in confirm.text
    # the preview says what each resolution would do, not only what "failed" would
    shown = dict(re.findall(r'data-resolution="(\w+)">(.*?)</div>', confirm.text, flags=re.S))
    assert list(shown) == ["succeeded", "failed", "absent"]
    assert "settled as succeeded" in shown["succeeded"]
    assert "<code>activity_scheduled b</code>" in shown["succeeded"]
    assert "failed" not in shown["succeeded"]
    assert "settled as failed" in shown["failed"] and "running → failed" in shown["failed"]
    assert "runs again as attempt 2" in shown["absent"]
    assert "settled as" not in shown["absent"].replace("Settled as", "")
    no_choice = operator.form(url + "/actions/resolve_activity", {"step": "a", "reason": "x"})
    assert no_choice.status_code == 422 and "choose a resolution" in no_choice.text
    done = operator.form(
        url + "/actions/resolve_activity",
        {
            "step": "a",
            "reason": "the payment provider says it never arrived",
            "resolution": "absent",
        },
    )
    assert done.status_code == 303
    after = operator.get(f"/api{url}").json()
    assert after["attempts"][0]["outcome"] == "resolved: absent"
    assert after["audit"][-1]["action"] == "resolve_activity"
    assert {s["step"]: s["state"] for s in after["steps"]}["a"] == "retry-waiting"  # by policy


def test_an_instance_whose_due_work_no_worker_runs_says_so(studio: LiveStudio) -> None:
    """A machine started from the studio, whose code no running worker loads, stood at
    "advance due" with nothing saying that no worker would ever run it."""
    team = studio.team("unserved")
    target = f"unserved.{uuid.uuid4().hex[:6]}"

    def document(name: str) -> dict:
        shaped = definition(name)
        shaped["steps"][0]["target"] = target
        return shaped

    name = studio.publish_new(team, "unserved", document)
    instance_id = studio.start(team, name)
    viewer = studio.client(studio.user(team, Role.VIEWER))
    page = viewer.get(instance_url(instance_id)).text
    said = re.search(r'<dd id="instance-unserved"[^>]*>(.*?)</dd>', page, re.S)
    assert said and said.group(1).startswith(f"no running worker runs <code>{target}</code>")
    studio.advertise([target])
    assert 'id="instance-unserved"' not in viewer.get(instance_url(instance_id)).text
