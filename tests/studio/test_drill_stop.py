"""A drill job can be stopped from the studio: one job runs at a time, so a long
campaign started by mistake used to hold every other drill (and plan run) back until it
ended. Stopping cuts the drill under way short (its processes and schema cleaned up),
keeps what finished, records the run as stopped and frees the studio at once."""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pytest

from studio.roles import Role
from tests.studio.live import LiveStudio, SignedInClient
from tests.studio.plan_workspace import plans_of
from tests.studio.test_plan_api import RUN_SECONDS, api, payments, plan

SLOW_SECONDS = 30.0
"""The stub's answer time: far longer than a stop takes, so a drill that ended stopped
with nothing finished was cut short."""


@pytest.fixture(scope="module")
def stopper(studio: LiveStudio, team: str) -> tuple[str, SignedInClient]:
    """An operator and its client: the stop names who asked for it."""
    username = studio.user(team, Role.OPERATOR)
    return username, studio.client(username)


@pytest.fixture(scope="module")
def base(studio: LiveStudio, team: str) -> str:
    return "/api" + plans_of(studio.publish_new(team, "stoppable", payments))


def poll(client: SignedInClient, job: dict[str, Any], until: Any) -> dict[str, Any]:
    """The job as the API says it, polled as its page does (it has no event to await)."""
    deadline = time.monotonic() + RUN_SECONDS
    while not until(job) and time.monotonic() < deadline:
        time.sleep(0.25)
        job = client.get(f"/api/drills/jobs/{job['job_id']}").json()
    assert until(job), job
    return job


def drill_schemas(dsn: str, run_id: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", [f"drill_{run_id}%"]
        ).fetchall()
    return [r[0] for r in rows]


def test_a_running_plan_is_stopped_and_the_studio_is_free_again(
    studio: LiveStudio, stopper: tuple[str, SignedInClient], viewer: SignedInClient, base: str
) -> None:
    who, operator = stopper
    client = api(operator)
    slow = plan("very slow")
    slow["stubs"] = {"charge": {"behaviour": "slow", "seconds": SLOW_SECONDS}}
    client.post(base, json={"document": slow})
    started = client.post(f"{base}/very slow/versions/1/run")
    assert started.status_code == 202, started.text
    job = poll(client, started.json(), lambda j: j["run_id"])  # recorded, drill under way
    job_id, run_id = job["job_id"], job["run_id"]

    plan_page = operator.get(f"{base.removeprefix('/api')}/jobs/{job_id}").text
    assert f'action="/drills/jobs/{job_id}/stop"' in plan_page, "Stop beside the plan's run"
    assert api(viewer).post(f"/api/drills/jobs/{job_id}/stop").status_code == 403
    asked = client.post(f"/api/drills/jobs/{job_id}/stop")
    assert asked.status_code == 202, asked.text
    assert asked.json()["stopped_by"] == who
    stopped = poll(client, asked.json(), lambda j: j["status"] != "running")
    assert stopped["status"] == "stopped" and stopped["finished"] == []

    run = client.get(f"/api/drills/runs/{run_id}").json()["run"]
    assert (run["status"], run["error"]) == ("stopped", "stopped before it finished")
    assert drill_schemas(studio.dsn, run_id) == [], "the drill's schema is dropped"
    run_page = operator.get(f"/drills/runs/{run_id}").text
    assert '<span class="pill warn">stopped</span>' in run_page
    assert "<dt>Ended</dt><dd>stopped before it finished</dd>" in run_page
    page = operator.get(f"{base.removeprefix('/api')}/jobs/{job_id}")
    assert 'id="plan-stopped">stopped</span> by' in page.text
    again = client.post(f"/api/drills/jobs/{job_id}/stop")
    assert again.status_code == 409 and "has stopped already" in again.text
    free = client.post("/api/drills/runs", json={"drills": ["D7"], "profile": "ci"})
    assert free.status_code == 202, "no job holds the studio"
    assert client.post(f"/api/drills/jobs/{free.json()['job_id']}/stop").status_code == 202
    poll(client, free.json(), lambda j: j["status"] != "running")


def test_the_job_page_offers_stop_to_operators_and_says_who_stopped_it(
    stopper: tuple[str, SignedInClient], viewer: SignedInClient
) -> None:
    who, operator = stopper
    started = operator.form("/drills/runs", {"profile": "ci", "drill": ["D7"]})
    assert started.status_code == 303
    page_url = started.headers["location"]
    job_id = page_url.rsplit("/", 1)[1]
    running = operator.get(page_url)
    assert f'action="/drills/jobs/{job_id}/stop"' in running.text
    assert 'id="stop-drills"' not in viewer.get(page_url).text
    assert operator.form(f"/drills/jobs/{job_id}/stop", {}).headers["location"] == page_url
    poll(api(operator), {"job_id": job_id, "status": "running"}, lambda j: j["status"] != "running")
    ended = operator.get(page_url)
    assert f'id="drill-stopped">Stopped by {who} after ' in ended.text
    assert f'action="/drills/jobs/{job_id}/stop"' not in ended.text
