"""Dead letters over HTTP: triage groups, bulk resolution with a result per item, audit."""

from __future__ import annotations

import re
import uuid

from engine.decide.operator_actions import Action
from engine.model.durations import ALLOWED, format_duration
from engine.model.identifiers import team_instance_id
from engine.model.limits import MAX_PAGE_ITEMS
from engine.store.reads import MAX_INSTANCE_ROWS
from studio.instance_urls import instance_url
from studio.operations.dead_letters import MAX_DEADLINE_IN, MAX_RETRY_IN
from studio.roles import Role
from tests.studio.live import WHEN_HTML, LiveStudio, definition


def fences(html: str) -> list[str]:
    return re.findall(r'name="item" value="([^"]+)"', html)


def test_dead_letters_are_grouped_and_resolved_item_by_item(studio: LiveStudio) -> None:
    team, other = studio.team("triage"), studio.team("others")
    name, theirs = f"dl.{uuid.uuid4().hex[:6]}", f"dl.{uuid.uuid4().hex[:6]}"
    studio.publish(team, definition(name))
    studio.publish(other, definition(theirs))
    mine = [studio.start(team, name) for _ in range(2)]
    foreign = studio.start(other, theirs)
    assert sum(studio.overdue(i) for i in (*mine, foreign)) == 3

    viewer = studio.client(studio.user(team, Role.VIEWER))
    instance_page = viewer.get(instance_url(mine[0])).text  # the instance says so at its top
    notice = re.search(r'<dd id="instance-dead-letters" class="warn">(.*?)</dd>', instance_page)
    assert notice and "(<code>deadline-exceeded</code>)" in notice.group(1)
    assert notice.group(1).startswith("activity ")  # the kind's name and its step
    assert 'href="/dead-letters?code=deadline-exceeded"' in notice.group(1)
    page = viewer.get("/dead-letters")
    assert page.status_code == 200 and "deadline-exceeded" in page.text
    assert f"{name}@1" in page.text and foreign not in page.text
    assert page.text.count("<tr data-work=") == 2 and "Resolve chosen" not in page.text
    assert fences(page.text) == [] and "data-select-group" not in page.text, "nothing to tick"
    groups = viewer.get("/api/dead-letters").json()["groups"]
    assert [(g["failure_code"], g["definition"], g["count"]) for g in groups] == [
        ("deadline-exceeded", name, 2)
    ]

    operator = studio.client(studio.user(team, Role.OPERATOR))
    page = operator.get("/dead-letters")
    first, second = fences(page.text)
    command_id = re.search(r'name="command_id" value="(\w+)"', page.text).group(1)
    foreign_work_id = studio.run(lambda store: foreign_work(store, foreign))
    foreign_fence = f"1:{foreign} {foreign_work_id}"
    token, _, key = second.partition(":")  # key: "<instance id> <work id>"
    stale = f"{int(token) + 5}:{key}"
    form = {
        "action": "retry",
        "reason": "the worker fleet is back",
        "command_id": command_id,
        "retry_in": "1h",
        "deadline_in": "1d",
    }
    answer = operator.post(
        "/dead-letters/resolve",
        data={**form, "_csrf": operator.csrf, "item": [first, stale, foreign_fence]},
    )
    assert answer.status_code == 200
    outcomes = re.findall(r'<span class="pill (?:ok|error)">(\w+)</span>', answer.text)
    assert outcomes == ["retried", "refused", "refused"]
    assert "no longer a dead letter with this token" in answer.text and "not found" in answer.text
    assert fences(answer.text) == [second]  # the retried one left the list
    assert "the worker fleet is back" in answer.text  # the audit beside the list

    replay = operator.post(
        "/dead-letters/resolve", data={**form, "_csrf": operator.csrf, "item": [first]}
    )
    assert re.findall(r'<span class="pill ok">(\w+)</span>', replay.text) == ["unchanged"]

    no_reason = operator.post(
        "/dead-letters/resolve",
        data={**form, "reason": "", "_csrf": operator.csrf, "item": [second]},
    )
    assert no_reason.status_code == 422 and "a reason of 1 to 500" in no_reason.text

    (listed,) = operator.get("/api/dead-letters").json()["items"]
    assert f"{listed['token']}:" in second and second.endswith(f" {listed['work_id']}")
    item = {k: listed[k] for k in ("instance_id", "work_id", "token")}  # as the list shows it
    discarded = operator.post(
        "/api/dead-letters/resolve",
        json={"action": "discard", "reason": "obsolete order", "items": [item]},
        headers={"X-CSRF-Token": operator.csrf},
    )
    assert discarded.status_code == 200
    assert [(r["ok"], r["outcome"]) for r in discarded.json()] == [(True, "discarded")]
    assert operator.get("/api/dead-letters").json()["items"] == []
    (gone,) = [i for i in mine if listed["instance_id"].endswith(i)]
    resolved_page = viewer.get(instance_url(gone)).text  # not sent to resolve it again
    assert 'id="instance-dead-letters"' not in resolved_page
    assert re.search(r'<dd id="instance-discarded" class="warn">activity ', resolved_page)
    assert "dead-lettered, discarded (token" in resolved_page

    viewer_try = viewer.post(
        "/dead-letters/resolve", data={**form, "_csrf": viewer.csrf, "item": [second]}
    )
    assert viewer_try.status_code == 403


def test_the_api_refuses_more_dead_letters_than_a_page_before_reading_any(
    studio: LiveStudio,
) -> None:
    """Even more than one read of instance rows could take (MAX_INSTANCE_ROWS ids, two
    per item): the count is checked first, so the answer is the limit, not a failure."""
    team = studio.team("too-many")
    operator = studio.client(studio.user(team, Role.OPERATOR))
    items = [
        {"instance_id": f"order-{k}", "work_id": f"order-{k}#2#activity#charge", "token": 1}
        for k in range(MAX_INSTANCE_ROWS // 2 + 1)
    ]
    answer = operator.post(
        "/api/dead-letters/resolve",
        json={"action": "discard", "reason": "clean up", "items": items},
        headers={"X-CSRF-Token": operator.csrf},
    )
    assert answer.status_code == 422
    assert f"at most {MAX_PAGE_ITEMS} dead letters at a time" in answer.text


def test_work_ids_are_shown_as_the_team_knows_them(studio: LiveStudio) -> None:
    """A studio instance is stored as ``<team>:<id>`` and shown without the prefix: so
    are its work ids, in the list's labels and the results."""
    team = studio.team("own-ids")
    name = f"dl.{uuid.uuid4().hex[:6]}"
    studio.publish(team, definition(name))
    assert studio.overdue(studio.start(team, name, team_instance_id(team, "o-1"))) == 1
    operator = studio.client(studio.user(team, Role.OPERATOR))
    page = operator.get("/dead-letters").text
    (fence,) = fences(page)
    command_id = re.search(r'name="command_id" value="(\w+)"', page).group(1)
    assert 'aria-label="Choose o-1#' in page and f"Choose {team}:" not in page
    answer = operator.post(
        "/dead-letters/resolve",
        data={
            "_csrf": operator.csrf,
            "command_id": command_id,
            "item": [fence],
            "action": "discard",
            "reason": "gone",
        },
    )
    assert re.findall(r'<span class="pill ok">(\w+)</span>', answer.text) == ["discarded"]
    assert re.search(r"<td><code>o-1#[^<]*</code> <span", answer.text), "as the team knows it"
    assert f"<code>{team}:" not in answer.text


async def foreign_work(store, instance_id: str) -> str:
    async with store.connection() as conn:
        cur = await conn.execute("SELECT work_id FROM work WHERE instance_id = %s", (instance_id,))
        return (await cur.fetchone())[0]


def test_a_refused_resolution_keeps_every_choice_and_field(studio: LiveStudio) -> None:
    """Not a page that forgot the form: 422, the reason in the form, the dead letters
    still ticked and the action, times and reason as they were posted."""
    team = studio.team("re-resolve")
    name = f"dl.{uuid.uuid4().hex[:6]}"
    studio.publish(team, definition(name))
    assert studio.overdue(studio.start(team, name)) == 1
    operator = studio.client(studio.user(team, Role.OPERATOR))
    page = operator.get("/dead-letters").text
    (fence,) = fences(page)
    command_id = re.search(r'name="command_id" value="(\w+)"', page).group(1)
    form = {"command_id": command_id, "reason": "the fleet is back <b>", "deadline_in": "2h"}

    def refused(**fields: object) -> str:
        answer = operator.post(
            "/dead-letters/resolve", data={**form, "_csrf": operator.csrf, **fields}
        )
        assert answer.status_code == 422 and 'id="resolve-form"' in answer.text
        return answer.text

    late = refused(action="retry", retry_in="45d", item=[fence])
    error = re.search(r'id="resolve-error">([^<]*)<', late).group(1)
    assert error == (
        f"Not resolved: retry after must be a duration of at most "
        f"{format_duration(MAX_RETRY_IN)} ({ALLOWED}), not 45d."
    )
    assert re.search(rf'value="{re.escape(fence)}" checked', late), "still ticked"
    assert 'name="retry_in" value="45d"' in late and 'name="deadline_in" value="2h"' in late
    assert ">the fleet is back &lt;b&gt;</textarea>" in late
    assert 'value="retry" checked' in late
    never = refused(action="retry", retry_in="1h", deadline_in="400d", item=[fence])
    assert f"at most {format_duration(MAX_DEADLINE_IN)}" in never
    none = refused(action="discard")
    assert f"no dead letter was chosen: choose 1 to {MAX_PAGE_ITEMS} to resolve" in none
    assert 'value="discard" checked' in none and 'value="retry" checked' not in none
    assert fences(operator.get("/dead-letters").text) == [fence], "nothing was resolved"


def test_the_api_names_the_field_of_a_refused_resolution(studio: LiveStudio) -> None:
    """A resolution refused for its reason, its retry or deadline durations or its item
    count answered 422 with a message and no ``problems[].path``: a client could not tell
    which field to mend."""
    team = studio.team("field-paths")
    operator = studio.client(studio.user(team, Role.OPERATOR))
    item = {"instance_id": "o-1", "work_id": "o-1#2#activity#charge", "token": 1}
    retry = {"action": "retry", "reason": "provider back", "items": [item]}
    for change, field in (
        ({"reason": "  "}, "reason"),
        ({"retry_in": "soon"}, "retry_in"),
        ({"retry_in": "400d"}, "retry_in"),
        ({"deadline_in": "0s"}, "deadline_in"),
        ({"deadline_in": "9999d"}, "deadline_in"),
        ({"items": []}, "items"),
    ):
        answer = operator.post(
            "/api/dead-letters/resolve",
            json={**retry, **change},
            headers={"X-CSRF-Token": operator.csrf},
        )
        assert answer.status_code == 422, change
        assert [p["path"] for p in answer.json()["problems"]] == [field], change


def test_a_dead_letters_resolution_is_on_its_instances_audit_trail(studio: LiveStudio) -> None:
    """Retrying or discarding a dead letter was recorded (the dead letters page and a
    retention export show it) but the instance's own audit trail, the list of what
    operators did to it, left it out: its page said nobody had acted on it. Each
    resolution is now a row of that trail (who, when, what and why), among the
    commands by time, and in the API's instance detail."""
    team = studio.team("trail")
    name = f"dl.{uuid.uuid4().hex[:6]}"
    studio.publish(team, definition(name))
    retried, discarded = studio.start(team, name), studio.start(team, name)
    assert studio.overdue(retried) == 1 and studio.overdue(discarded) == 1
    studio.command(retried, Action.PAUSE, "while the fleet is down")
    operator_name = studio.user(team, Role.OPERATOR)
    operator = studio.client(operator_name)
    listed = {i["instance_id"]: i for i in operator.get("/api/dead-letters").json()["items"]}
    for instance_id, action, reason in (
        (retried, "retry", "the worker fleet is back"),
        (discarded, "discard", "obsolete order"),
    ):
        item = {k: listed[instance_id][k] for k in ("instance_id", "work_id", "token")}
        answer = operator.post(
            "/api/dead-letters/resolve",
            json={"action": action, "reason": reason, "items": [item], "retry_in": "1h"}
            if action == "retry"
            else {"action": action, "reason": reason, "items": [item]},
            headers={"X-CSRF-Token": operator.csrf},
        )
        assert [r["ok"] for r in answer.json()] == [True], answer.text

    viewer = studio.client(studio.user(team, Role.VIEWER))
    page = viewer.get(instance_url(retried)).text
    table = re.search(r'id="audit-table".*?<tbody>(.*?)</tbody>', page, re.S).group(1)
    rows = re.findall(r"<tr data-command=.*?</tr>", table.replace("<wbr>", ""), re.S)
    assert len(rows) == 2
    newest, older = rows
    assert f"<td>{operator_name}</td>" in newest and ">dead_letter_retried<" in newest
    assert "the worker fleet is back" in newest
    assert re.search(r"activity \w+ \(token \d+\), due \d{4}-.* UTC, deadline ", newest)
    assert re.search(f"<td>{WHEN_HTML}</td>", newest)
    assert ">pause<" in older and "while the fleet is down" in older
    page = viewer.get(instance_url(discarded)).text.replace("<wbr>", "")
    assert "No operator has acted on this instance." not in page
    assert ">dead_letter_discarded<" in page and "obsolete order" in page

    detail = viewer.get(f"/api/instances/{retried}").json()
    (resolution,) = detail["dead_letter_resolutions"]
    assert (resolution["kind"], resolution["actor"], resolution["reason"]) == (
        "dead_letter_retried",
        operator_name,
        "the worker fleet is back",
    )
    assert resolution["work_id"] == listed[retried]["work_id"]
    assert resolution["fencing_token"] == listed[retried]["token"]
    assert resolution["step"] and resolution["retry_at"] and resolution["deadline"]
    assert [a["action"] for a in detail["audit"]] == ["pause"]
