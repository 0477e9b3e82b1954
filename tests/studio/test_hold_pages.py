"""Incident holds over HTTP: placing and releasing from the Holds page and the JSON API,
the banner every affected page shows (who, why, backlog), and clear refusals; and a
step handed on into a hold, which the instance page and ``wayline inspect`` say waits
for it and has not run."""

from __future__ import annotations

import asyncio
import re
import uuid
from typing import Any

import pytest

from engine.cli.main import main
from engine.model.holds import MAX_RELEASE_COUNT, MAX_RELEASE_RATE
from engine.store import work_views
from engine.store.rows import WorkState
from engine.store.store import Store
from engine.worker.activities import ActivityRegistry
from studio.instance_urls import instance_ref
from studio.roles import Role
from tests.e2e.conftest import until
from tests.studio.live import LiveStudio, definition

REASON = "INC-7: the payment provider is down"


def banner(html: str) -> str:
    """The text of the page's hold banner ('' when there is none)."""
    found = re.search(r'<section class="alert warn hold-banner".*?</section>', html, re.S)
    return re.sub(r"<[^>]+>", "", found.group(0)) if found else ""


def test_a_hold_placed_in_the_studio_shows_on_every_affected_page(studio: LiveStudio) -> None:
    team = studio.team("holds")
    name, other = f"held.{uuid.uuid4().hex[:6]}", f"free.{uuid.uuid4().hex[:6]}"
    studio.publish(team, definition(name))
    studio.publish(team, definition(other))
    operator_name = studio.user(team, Role.OPERATOR)
    operator = studio.client(operator_name)
    placed = operator.form("/holds", {"scope": "definition", "definition": name, "reason": REASON})
    assert placed.status_code == 303 and placed.headers["location"].startswith("/holds?placed=")
    instance_id = studio.start(team, name)  # accepted under the hold, and parked

    viewer = studio.client(studio.user(team, Role.VIEWER))
    for path in (
        f"/definitions/{name}",
        f"/definitions/{name}/versions/1",
        f"/instances/{instance_ref(instance_id)}",
        f"/instances/{instance_ref(instance_id)}/state",  # the state panel, opened alone
        "/instances",
    ):
        text = banner(viewer.get(path).text)
        assert f"On hold: {name}" in text and operator_name in text and REASON in text, path
        assert "Backlog: 1 instance." in text, path
    assert banner(viewer.get(f"/definitions/{other}").text) == ""
    holds_page = viewer.get("/holds").text
    assert REASON in holds_page
    assert 'id="place-hold"' not in holds_page and 'class="release-hold"' not in holds_page

    [hold] = operator.get("/api/holds").json()
    assert (hold["definition"], hold["backlog"], hold["active"]) == (name, 1, True)
    released = operator.form(
        f"/holds/{hold['id']}/release", {"mode": "count", "amount": "1", "reason": "one first"}
    )
    assert released.status_code == 303
    page = operator.get(released.headers["location"]).text
    assert (
        notice(page) == f"Hold {hold['id']}: 1 work item due again; backlog 0 instances; in force."
    )
    [hold] = operator.get("/api/holds").json()
    assert (hold["backlog"], hold["active"]) == (0, True)
    assert [(r["mode"], r["amount"], r["released_by"]) for r in hold["releases"]] == [
        ("count", 1, operator_name)
    ]


def test_the_api_places_and_releases_holds_and_refuses_bad_input(studio: LiveStudio) -> None:
    team = studio.team("hold-api")
    operator = studio.client(studio.user(team, Role.OPERATOR))
    headers = {"X-CSRF-Token": operator.csrf}

    def post(path: str, body: dict) -> tuple[int, dict]:
        answer = operator.post(path, json=body, headers=headers)
        return answer.status_code, answer.json()

    status, hold = post("/api/holds", {"scope": "team", "reason": "freeze everything"})
    assert (status, hold["definition"], hold["backlog"]) == (201, "", 0)
    release = f"/api/holds/{hold['id']}/release"
    for field, amount in (("count", 0), ("count", 10_001), ("rate", -1), ("rate", 1001)):
        status, refused = post(release, {"reason": "why", field: amount})
        assert (status, [p["path"] for p in refused["problems"]]) == (422, [field]), amount
    status, refused = post(release, {"reason": "why", "count": 1, "rate": 2.0})
    assert (status, refused["error"]) == (422, "release by a count or by a rate, not both")
    status, nameless = post("/api/holds", {"scope": "definition", "reason": "no name"})
    assert (status, nameless["problems"][0]["path"]) == (422, "definition")
    for path, body in (("/api/holds", {"scope": "team"}), (release, {})):  # each says where
        status, blank = post(path, {**body, "reason": "   "})
        assert (status, [p["path"] for p in blank["problems"]]) == (422, ["reason"]), path
    both = {"scope": "team", "definition": "order.fulfillment", "reason": "which?"}
    status, contradictory = post("/api/holds", both)  # held the whole team, silently
    assert (status, contradictory["problems"][0]["path"]) == (422, "definition")
    assert len(operator.get("/api/holds").json()) == 1, "nothing more was held"
    status, unknown = post(
        "/api/holds", {"scope": "definition", "definition": "never.published", "reason": "typo"}
    )
    assert (status, unknown["error"]) == (
        422,
        "no version of never.published is published in this team",
    )
    assert post("/api/holds/no-such-hold/release", {"reason": "x"})[0] == 404
    status, done = post(release, {"reason": "all clear"})
    assert (status, done["hold"]["active"], done["due"]) == (200, False, 0)
    assert post(release, {"reason": "again"})[0] == 409
    page = operator.form("/holds", {"scope": "definition", "definition": "a b", "reason": "x"})
    assert page.status_code == 422 and "the definition name must be" in page.text


def test_a_refused_hold_form_comes_back_with_what_was_typed(studio: LiveStudio) -> None:
    """Placing or releasing refused: 422, the reason beside that form (and no other),
    and its fields as they were posted."""
    team = studio.team("hold-forms")
    name = f"held.{uuid.uuid4().hex[:6]}"
    studio.publish(team, definition(name))
    operator = studio.client(studio.user(team, Role.OPERATOR))
    typo = {"scope": "definition", "definition": "never.published", "reason": "INC-9 <x>"}
    place = operator.form("/holds", typo)
    assert place.status_code == 422 and 'id="place-hold"' in place.text
    error = re.search(r'id="hold-error">([^<]*)<', place.text).group(1)
    assert error == "Not placed: no version of never.published is published in this team."
    assert 'name="definition" value="never.published"' in place.text
    assert 'name="reason" value="INC-9 &lt;x&gt;"' in place.text
    team_wide = operator.form("/holds", {"scope": "team", "reason": " "})
    assert team_wide.status_code == 422 and '<option value="team" selected>' in team_wide.text

    placed = operator.form("/holds", {"scope": "definition", "definition": name, "reason": "x"})
    hold_id = placed.headers["location"].removeprefix("/holds?placed=")
    answer = operator.form(
        f"/holds/{hold_id}/release", {"mode": "rate", "amount": "fast", "reason": "drain it"}
    )
    assert answer.status_code == 422
    row = re.search(rf'<tr id="hold-{hold_id}".*?</tr>', answer.text, re.S).group(0)
    error = re.search(r'id="release-error-1">([^<]*)<', row).group(1)
    rule = f"the rate must be a number above 0 and at most {MAX_RELEASE_RATE:g}"
    assert error == f"Not released: {rule}."
    assert '<option value="rate" selected>' in row
    assert 'name="amount" size="5" value="fast"' in row and 'value="drain it"' in row
    assert 'id="hold-error"' not in answer.text
    too_many = operator.form(
        f"/holds/{hold_id}/release", {"mode": "count", "amount": "20000", "reason": "all"}
    )
    assert f"the count must be from 1 to {MAX_RELEASE_COUNT} instances, not 20000" in too_many.text
    gone = operator.form("/holds/no-such-hold/release", {"mode": "all", "reason": "x"})
    assert gone.status_code == 404 and 'id="hold-error"' in gone.text, "said at the top"


def test_an_instance_a_release_let_go_is_not_shown_as_held(studio: LiveStudio) -> None:
    """After releasing one instance to try the provider again, its page still said
    'On hold … Workers run none of its work' while it ran, as did ``wayline inspect``
    with another hold in force: the banner named every hold over its definition,
    including those whose release had let this instance go."""
    team = studio.team("hold-let-go")
    name = f"held.{uuid.uuid4().hex[:6]}"
    studio.publish(team, definition(name))
    operator = studio.client(studio.user(team, Role.OPERATOR))
    operator.form("/holds", {"scope": "definition", "definition": name, "reason": REASON})
    first = studio.start(team, name, f"{name}-1")
    second = studio.start(team, name, f"{name}-2")
    [hold] = operator.get("/api/holds").json()
    operator.form(
        f"/holds/{hold['id']}/release", {"mode": "count", "amount": "1", "reason": "one first"}
    )
    assert banner(operator.get(f"/instances/{instance_ref(first)}").text) == ""
    assert f"On hold: {name}" in banner(operator.get(f"/instances/{instance_ref(second)}").text)


def notice(html: str) -> str:
    """The text of the holds page's notice after a post."""
    return re.search(r'id="hold-notice">([^<]*)<', html).group(1)


def test_a_release_at_a_rate_says_the_backlog_drains_at_it(studio: LiveStudio) -> None:
    """Released at 2 per second, the page answered only 'Hold ID: 0 work items due
    again.', which read as a release that let nothing go, right when an incident
    commander had just chosen how fast the backlog may come back."""
    team = studio.team("hold-drain")
    name = f"held.{uuid.uuid4().hex[:6]}"
    studio.publish(team, definition(name))
    operator = studio.client(studio.user(team, Role.OPERATOR))
    placed = operator.form("/holds", {"scope": "definition", "definition": name, "reason": "x"})
    hold_id = placed.headers["location"].removeprefix("/holds?placed=")
    for n in range(3):
        studio.start(team, name, f"{name}-{n}")
    released = operator.form(
        f"/holds/{hold_id}/release", {"mode": "rate", "amount": "0.01", "reason": "slowly"}
    )
    page = operator.get(released.headers["location"]).text
    assert notice(page) == (
        f"Hold {hold_id}: 0 work items due again; backlog 3 instances, draining at 0.01/s;"
        " in force."
    )


def text_of(html: str) -> str:
    """Markup dropped, spaces collapsed."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).strip()


def test_a_step_handed_on_into_a_hold_reads_as_waiting_for_it_not_running(
    studio: LiveStudio, capsys: pytest.CaptureFixture[str]
) -> None:
    """A worker finished reserve while a hold covered the instance and handed ship on by
    eager dispatch: ship's attempt is recorded started, but the hold parked its work
    before any worker leased it. The page's Position line, its attempts table and
    ``wayline inspect`` all said "running", beside the hold's banner, though no handler
    ran it."""
    team = studio.team("hold-handed")
    name = f"handed.{uuid.uuid4().hex[:6]}"
    activity = {"kind": "activity", "timeout": "30s", "input_limit": 1024, "result_limit": 1024}
    steps = [{"name": s, "target": f"{name}.{s}", **activity} for s in ("reserve", "ship")]
    studio.publish(team, {"name": name, "version": "1", "mode": "orchestration", "steps": steps})
    entered, gate = studio.run(two_events)
    app = ActivityRegistry()

    async def reserve(request: Any) -> dict:
        entered.set()
        await gate.wait()
        return {}

    app.register(f"{name}.reserve", reserve)
    app.register(f"{name}.ship", lambda request: {})
    operator = studio.client(studio.user(team, Role.OPERATOR))
    with studio.worker(app):  # it runs both steps, so it hands ship on to itself
        instance_id = studio.start(team, name)
        studio.run(lambda store: entered.wait())  # reserve is leased and running
        operator.form("/holds", {"scope": "definition", "definition": name, "reason": REASON})
        studio.run(lambda store: set_event(gate))
        [ship] = studio.run(lambda store: until(lambda: parked(store, instance_id)))
    assert (ship.step, ship.token) == ("ship", 0), "handed on, parked, never leased"

    waiting = f"waiting for the hold on {name}: not run yet"
    page = operator.get(f"/instances/{instance_ref(instance_id)}").text
    position = re.search(r'id="instance-position">(.*?)</dd>', page, re.S).group(1)
    assert position == f"event 6 · activity ship attempt 1 is recorded started, {waiting}"
    row = re.search(r'<tr class="[^"]*" data-attempt="activity:ship:1">.*?</tr>', page, re.S)
    assert "running" not in row.group(0) and waiting in text_of(row.group(0))
    step = re.search(r'<tr id="step-row-ship".*?</tr>', page, re.S).group(0)
    assert text_of(step) == f"activity ship scheduled attempt 1 recorded started, {waiting}"
    detail = operator.get(f"/api/instances/{instance_id}").json()
    assert detail["position"] == position.removeprefix("event 6 · ")
    assert [a["outcome"] for a in detail["attempts"]] == ["succeeded", "held"]

    store = ["--dsn", studio.dsn, "--schema", studio.schema]
    assert main(["inspect", instance_id, *store]) == 0
    said = capsys.readouterr().out
    assert (
        f"  activity ship: held attempt 1 key={instance_id}/ship/1 (recorded started, "
        f"{waiting})" in said.splitlines()
    )
    assert f"  now: activity ship attempt 1 is recorded started, {waiting}" in said.splitlines()
    assert "running" not in said.replace(f"{instance_id}: running", "")


async def two_events(store: Store) -> tuple[asyncio.Event, asyncio.Event]:
    """Events made on the seeding loop, where the worker's handlers run."""
    return asyncio.Event(), asyncio.Event()


async def set_event(event: asyncio.Event) -> None:
    event.set()


async def parked(store: Store, instance_id: str) -> list[work_views.WorkRow]:
    """The instance's work an incident hold parked ([] while none is)."""
    rows = await work_views.instance_work(store, instance_id)
    return [row for row in rows if row.state is WorkState.HELD]
