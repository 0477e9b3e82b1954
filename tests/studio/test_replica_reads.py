"""Reads off the primary: a studio whose read pages read a real, lagging standby.

The list, an instance's page, its history and the drill reports read the replica
(``WAYLINE_READ_DSN``) and say how far behind it is; every action re-reads on the
primary. The standby's replay is paused (``tests.studio.replica.frozen``) while the
primary moves on, so a page shows a state the primary has left, and the operator acts
from that page: the action is judged on the primary's state, never on the stale view.
"""

from __future__ import annotations

import inspect
import json
import queue
import re
import threading
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from engine import Client
from engine.decide.operator_actions import Action
from engine.model.instance import Instance
from engine.store import catalog
from studio.dependencies import DEPENDENCIES
from studio.instance_urls import instance_url
from studio.read_lag import READ_LAG_HEADER
from studio.roles import Role
from studio.routes import ROUTES
from tests.studio.live import LiveStudio, SignedInClient
from tests.studio.replica import catch_up, frozen, replica_studio
from tests.unit.histories import RICH, Run
from verification.standby import StandbyPair

UP_TO_DATE = "Read from a replica, up to date with the primary."
BEHIND = re.compile(r"Read from a replica at most [^<]+ behind the primary \([\d,]+ bytes")
LAG = re.compile(r"bytes=(\d+); seconds=([\d.]+)")
HTMX = {"HX-Request": "true"}
POLL = timedelta(milliseconds=200)
"""The studio's live poll: short, so that a quiet stream has polled many times soon."""
QUIET_SECONDS = 1.5
"""How long a stream following the frozen replica must stay quiet (several polls)."""
WAIT_SECONDS = 20.0
CAUGHT_UP_TRIES = 5
"""Reads made again when the primary wrote something between a catch-up and the read."""


@pytest.fixture(scope="module")
def pair_and_studio(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[StandbyPair, LiveStudio]]:
    with replica_studio(tmp_path_factory.mktemp("replica"), live_interval=POLL) as both:
        yield both


@pytest.fixture(scope="module")
def pair(pair_and_studio: tuple[StandbyPair, LiveStudio]) -> StandbyPair:
    return pair_and_studio[0]


@pytest.fixture(scope="module")
def live(pair_and_studio: tuple[StandbyPair, LiveStudio]) -> LiveStudio:
    return pair_and_studio[1]


@pytest.fixture(scope="module")
def team(live: LiveStudio) -> str:
    return live.team("replica")


@pytest.fixture(scope="module")
def ops(live: LiveStudio, team: str) -> SignedInClient:
    return live.client(live.user(team, Role.OPERATOR))


@pytest.fixture(scope="module")
def flow(live: LiveStudio, team: str) -> str:
    name = live.publish_new(team, "flow")
    return name


def lag_of(answer: Any) -> tuple[int, float]:
    """The ``Wayline-Read-Lag`` header's bytes and seconds."""
    found = LAG.fullmatch(answer.headers[READ_LAG_HEADER])
    assert found, answer.headers[READ_LAG_HEADER]
    return int(found.group(1)), float(found.group(2))


def read_caught_up(pair: StandbyPair, ops: SignedInClient, path: str) -> Any:
    """``path`` read once the standby has replayed everything: the primary writes WAL
    of its own at any time (the background writer's standby snapshots, autovacuum), so
    a read that found it moved on since the catch-up is made again, a few times at most."""
    for _ in range(CAUGHT_UP_TRIES):
        catch_up(pair)
        answer = ops.get(path)
        if answer.status_code != 200 or lag_of(answer) == (0, 0.0):
            break
    return answer


def on_primary(live: LiveStudio, instance_id: str) -> Instance:
    """The instance as the primary holds it."""
    return live.run(lambda store: Client(store).inspect(instance_id))


def audit(live: LiveStudio, instance_id: str) -> list[tuple[str, str]]:
    """The instance's audit on the primary: (action, actor) pairs."""
    return [(entry.action, entry.actor) for entry in on_primary(live, instance_id).audit]


def test_without_a_replica_pages_read_the_primary_and_say_nothing_of_one(
    studio: LiveStudio,
) -> None:
    team, _, instance_id = studio.one_running("primary-only")
    url = instance_url(instance_id)
    client = studio.client(studio.user(team, Role.VIEWER))
    for path in ("/instances", url, f"/api{url}"):
        answer = client.get(path)
        assert answer.status_code == 200 and READ_LAG_HEADER not in answer.headers, path
        assert "Read from a replica" not in answer.text, path


def test_read_pages_say_the_replica_is_up_to_date_once_it_has_replayed_everything(
    pair: StandbyPair, live: LiveStudio, team: str, flow: str, ops: SignedInClient
) -> None:
    instance_id = live.start(team, flow)
    url = instance_url(instance_id)
    for path in ("/instances", url, url + "/history"):
        page = read_caught_up(pair, ops, path)
        assert page.status_code == 200, path
        assert UP_TO_DATE in page.text, path
        assert lag_of(page) == (0, 0.0), path
    assert instance_id in ops.get("/instances").text
    for path in (f"/api{url}", f"/api{url}/history", "/api/instances", "/api/drills/runs"):
        answer = read_caught_up(pair, ops, path)
        assert answer.status_code == 200 and lag_of(answer) == (0, 0.0), path
    # Pages that act, or answer an action, read the primary and say nothing of a replica.
    confirm = ops.get(url + "/actions/pause")
    assert confirm.status_code == 200 and READ_LAG_HEADER not in confirm.headers
    assert "Read from a replica" not in confirm.text


def test_a_stale_page_offers_cancel_but_the_primary_refuses_it(
    pair: StandbyPair, live: LiveStudio, team: str, flow: str, ops: SignedInClient
) -> None:
    instance_id = live.start(team, flow)
    url = instance_url(instance_id)
    with frozen(pair):
        live.command(instance_id, Action.TERMINATE, "ended on the primary")
        assert on_primary(live, instance_id).status.label == "terminated"

        page = ops.get(url)  # the replica has not replayed the termination
        assert page.status_code == 200
        assert BEHIND.search(page.text), page.text[:2000]
        assert 'data-offer="cancel"' in page.text  # offered from the stale state
        api = ops.get(f"/api{url}")
        assert api.json()["status"] == "running"
        behind_bytes, seconds = lag_of(api)
        assert behind_bytes > 0 and seconds >= 0
        listed = ops.get("/api/instances", params={"view": "active"}).json()
        assert instance_id in {row["id"] for row in listed["items"]}

        # The confirmation re-reads on the primary: cancel is not possible there.
        confirm = ops.get(url + "/actions/cancel")
        assert confirm.status_code == 409 and "not possible" in confirm.text
        form = ops.form(url + "/actions/cancel", {"reason": "acting on the stale page"})
        assert form.status_code == 409 and "does not allow this now" in form.text
        scripted = ops.post(
            f"/api{url}/actions",
            json={"action": "cancel", "reason": "acting on the stale answer"},
            headers={"X-CSRF-Token": ops.csrf},
        )
        assert scripted.status_code == 409
        assert READ_LAG_HEADER not in scripted.headers  # an action's answer is the primary's

    assert audit(live, instance_id) == [("terminate", "seed")]
    assert on_primary(live, instance_id).status.label == "terminated"
    page = read_caught_up(pair, ops, url)
    assert UP_TO_DATE in page.text and 'data-offer="cancel"' not in page.text


def test_a_stale_unknown_outcome_is_not_settled_again_from_the_replica(
    pair: StandbyPair, live: LiveStudio, team: str, ops: SignedInClient
) -> None:
    run = Run(RICH, instance_id=f"doubt-{uuid.uuid4().hex[:6]}")
    run.start()
    run.run_activity("a", "unknown")

    async def commit(store: Any) -> None:
        await catalog.publish(store, RICH, "seed", team)
        for transition in run.transitions:
            await store.commit(transition, team)

    live.run(commit)
    url = instance_url(run.instance_id)
    with frozen(pair):
        live.command(
            run.instance_id,
            Action.RESOLVE_ACTIVITY,
            "the provider says it never arrived",
            step="a",
            resolution="absent",
            result=None,
        )
        page = ops.get(url)
        assert "UNKNOWN (in doubt)" in page.text and BEHIND.search(page.text)
        assert 'data-offer="resolve_activity:a"' in page.text
        done = ops.post(
            url + "/actions/resolve_activity",
            data={
                "_csrf": ops.csrf,
                "step": "a",
                "reason": "the stale page still says unknown",
                "resolution": "succeeded",
                "result": '{"charged": true}',
            },
            headers={**HTMX, "X-CSRF-Token": ops.csrf},
        )
        assert done.status_code == 409 and "does not allow this now" in done.text

    assert audit(live, run.instance_id) == [("resolve_activity", "seed")]
    attempt = ops.get(f"/api{url}").json()["attempts"][0]
    assert attempt["outcome"] == "resolved: absent"


def test_an_action_allowed_on_the_primary_acts_on_the_primary_state(
    pair: StandbyPair, live: LiveStudio, team: str, flow: str, ops: SignedInClient
) -> None:
    """Paused on the primary while the replica still shows it running: resume is not on
    the stale page, yet posting it acts (it is what the primary allows), and its answer
    shows the primary's state, not the replica's."""
    instance_id = live.start(team, flow)
    url = instance_url(instance_id)
    with frozen(pair):
        live.command(instance_id, Action.PAUSE, "paused on the primary")
        page = ops.get(url)
        assert 'data-offer="resume"' not in page.text and 'data-offer="pause"' in page.text
        stale_pause = ops.form(url + "/actions/pause", {"reason": "the page says running"})
        assert stale_pause.status_code == 409
        resumed = ops.post(
            f"/api{url}/actions",
            json={"action": "resume", "reason": "what the primary allows"},
            headers={"X-CSRF-Token": ops.csrf},
        )
        answer = resumed.json()
        assert resumed.status_code == 200 and answer["status"] == "running"
        # The answer is the primary's (the replica has neither command yet).
        assert [entry["action"] for entry in answer["audit"]] == ["pause", "resume"]
        assert ops.get(f"/api{url}").json()["audit"] == []  # the replica, still frozen
    assert [a for a, _ in audit(live, instance_id)] == ["pause", "resume"]


def test_a_bulk_cancel_chosen_from_a_stale_list_is_judged_instance_by_instance_on_the_primary(
    pair: StandbyPair, live: LiveStudio, team: str, flow: str, ops: SignedInClient
) -> None:
    running, ended = live.start(team, flow), live.start(team, flow)
    headers = {"X-CSRF-Token": ops.csrf}
    with frozen(pair):
        live.command(ended, Action.TERMINATE, "ended on the primary")
        listed = ops.get("/api/instances", params={"view": "active", "definition": flow})
        assert {row["id"] for row in listed.json()["items"]} >= {running, ended}  # stale
        assert lag_of(listed)[0] > 0
        chosen = {"action": "cancel", "instances": [running, ended]}
        preview = ops.post("/api/instances/bulk/preview", json=chosen, headers=headers).json()
        assert (preview["applies"], preview["refused"]) == (1, 1)  # read on the primary
        done = ops.post(
            "/api/instances/bulk",
            json={**chosen, "bulk_id": preview["bulk_id"], "reason": "from the stale list"},
            headers=headers,
        ).json()
    outcomes = {r["id"]: (r["outcome"], r["status_before"]) for r in done["results"]}
    assert outcomes[ended] == ("refused", "terminated")
    assert outcomes[running][0] == "done"
    assert audit(live, ended) == [("terminate", "seed")]


def _events(client: SignedInClient, path: str, found: queue.Queue[dict[str, str]]) -> None:
    """Put each named event of the server-sent stream at ``path`` into ``found``."""
    with client.stream("GET", path, timeout=WAIT_SECONDS * 2) as answer:
        event: dict[str, str] = {}
        for line in answer.iter_lines():
            if line:
                name, _, value = line.partition(": ")
                event[name] = value
                continue
            if "event" in event:
                found.put(event)
                if event["event"] == "end":
                    return
            event = {}


def test_a_live_page_follows_the_replica_and_moves_on_when_it_replays(
    pair: StandbyPair, live: LiveStudio, team: str, flow: str, ops: SignedInClient
) -> None:
    instance_id = live.start(team, flow)
    url = instance_url(instance_id)
    catch_up(pair)
    shown = ops.get(f"/api{url}").json()["sequence"]
    found: queue.Queue[dict[str, str]] = queue.Queue()
    with frozen(pair):
        live.command(instance_id, Action.TERMINATE, "ended on the primary")
        reader = threading.Thread(target=_events, args=(ops, f"{url}/live?after={shown}", found))
        reader.start()
        with pytest.raises(queue.Empty):  # the replica has nothing new to show
            found.get(timeout=QUIET_SECONDS)
    update = found.get(timeout=WAIT_SECONDS)  # replayed now: the page moves on
    assert update["event"] == "update"
    assert json.loads(update["data"])["status"] == "terminated"
    assert found.get(timeout=WAIT_SECONDS)["event"] == "end"
    reader.join(WAIT_SECONDS)


def _dependencies_of(handler: Any, seen: set[str] | None = None) -> set[str]:
    """Every dependency a handler asks for, and what those ask for in turn."""
    seen = set() if seen is None else seen
    for name in inspect.signature(handler).parameters:
        if name in DEPENDENCIES and name not in seen:
            seen.add(name)
            _dependencies_of(DEPENDENCIES[name].dependency, seen)
    return seen


def test_no_route_that_changes_anything_can_read_the_replica() -> None:
    """The structure behind every test above: an action's handler cannot even ask for
    the replica's reads, so nothing it decides can come from them."""
    acting = [r for r in ROUTES if r.method not in ("GET", "HEAD")]
    assert acting
    for route in acting:
        assert "reads" not in _dependencies_of(route.handler), (route.method, route.path)
    readers = {r.path for r in ROUTES if "reads" in _dependencies_of(r.handler)}
    assert {"/instances", "/api/instances", "/drills/runs/{run_id:str}"} <= readers
