"""The drill plans API of a published version: save (each save a new version), list,
get, export in the format ``wayline drill run --plan`` reads, run in a throwaway schema
and follow the run to its verdict per node, the coverage it adds; and who may do what."""

from __future__ import annotations

import tempfile
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from studio.plans.outcome import REPORT, live
from tests.studio.live import LiveStudio, SignedInClient
from tests.studio.plan_workspace import plans_of
from verification.plan import Pin
from verification.plan_sources import read_plan

RUN_SECONDS = 150.0
"""A drill run: a fresh schema, worker processes killed and replaced, the checker."""
UNDER_WAY_SECONDS = 6.0
"""How long ``run_under_way`` keeps its run going: long enough to try a second start."""


def payments(name: str, on_unknown: str = "hold") -> dict[str, Any]:
    """Two activities; an unknown outcome of ``charge`` waits for an operator (or, with
    ``retry_same_key``, is retried under the same idempotency key)."""
    activity = {
        "kind": "activity", "timeout": "30s", "input_limit": 1024, "result_limit": 1024,
        "retry": {"max_attempts": 3, "initial_delay": "1s", "max_delay": "5s"},
    }  # fmt: skip
    return {
        "name": name,
        "version": "1",
        "mode": "orchestration",
        "steps": [
            {"name": "reserve", "target": "stock.reserve", **activity},
            {"name": "charge", "target": "payments.charge", "on_unknown": on_unknown, **activity},
        ],
    }


@pytest.fixture(scope="module")
def base(studio: LiveStudio, team: str) -> str:
    return "/api" + plans_of(studio.publish_new(team, "pay", payments))


def api(client: SignedInClient) -> SignedInClient:
    client.headers["X-CSRF-Token"] = client.csrf
    return client


def finished_run(client: SignedInClient, base: str, started: Any) -> dict[str, Any]:
    """Poll the run as the page does (it has no event to await) until it finished."""
    assert started.status_code == 202, started.text
    run = started.json()
    deadline = time.monotonic() + RUN_SECONDS
    while run["status"] == "running" and time.monotonic() < deadline:
        time.sleep(0.5)
        run = client.get(f"{base}/jobs/{run['job_id']}").json()
    assert run["status"] == "finished", run
    return run


@contextmanager
def run_under_way(client: SignedInClient, base: str) -> Iterator[str]:
    """A run of ``base``'s version that stays under way (its ``charge`` answers after
    ``UNDER_WAY_SECONDS``), so any drill job started meanwhile meets it; yields its job
    id and, leaving, waits for it to finish, so the studio is free for the next test."""
    slow = plan("slow charge")
    slow["stubs"] = {"charge": {"behaviour": "slow", "seconds": UNDER_WAY_SECONDS}}
    client.post(base, json={"document": slow})
    started = client.post(f"{base}/slow charge/versions/1/run")
    try:
        yield started.json()["job_id"]
    finally:
        finished_run(client, base, started)


def node(run: dict[str, Any], step: str) -> dict[str, Any]:
    return next(n for n in run["nodes"] if n["step"] == step)


def coverage_cells(client: SignedInClient, base: str) -> dict[tuple[str, str, str], str]:
    """The coverage API's status of every cell, by (step, boundary, fault)."""
    return {
        (s["step"], c["boundary"], c["fault"]): c["status"]
        for s in client.get(f"{base}/coverage").json()
        for c in s["cells"]
    }


def plan(name: str, *pins: str) -> dict[str, Any]:
    return {"name": name, "input": {"order": "o-1"}, "pins": list(pins),
            "stubs": {"charge": {"behaviour": "succeed", "result": {"charge": "C-1"}}}}  # fmt: skip


def test_saving_again_makes_a_new_version_and_export_is_a_cli_plan(
    operator: SignedInClient, base: str, tmp_path: Path
) -> None:
    client = api(operator)
    first = client.post(base, json={"document": plan("nightly", "charge:after_handler:kill")})
    assert first.status_code == 201, first.text
    assert first.json()["version"] == 1 and first.json()["pins"] == 1
    second = client.post(
        base,
        json={
            "document": plan("nightly", "charge:after_handler:kill", "reserve:before_commit:raise")
        },
    )
    assert second.json()["version"] == 2
    listed = client.get(base).json()
    assert [(p["name"], p["version"]) for p in listed] == [("nightly", 2), ("nightly", 1)]
    assert client.get(f"{base}/nightly").json()["version"] == 2
    kept = client.get(f"{base}/nightly/versions/1").json()
    assert kept["pins"] == 1  # version 1 is what it was
    exported = client.get(f"{base}/nightly/versions/2/export")
    path = tmp_path / "plan.json"
    path.write_text(exported.text)
    read = read_plan(path)  # exactly what `wayline drill run --plan` reads
    assert read.definition == base.split("/")[3] + "@1"
    assert [p.label for p in read.pins] == [
        "charge:after_handler:kill",
        "reserve:before_commit:raise",
    ]
    assert read.stub("charge").result == {"charge": "C-1"}


def test_an_invalid_plan_is_refused_listing_every_problem(
    operator: SignedInClient, base: str
) -> None:
    bad = plan("broken", "ship:after_handler:kill", "charge:after_handler:explode")
    answer = api(operator).post(base, json={"document": bad})
    assert answer.status_code == 422
    problems = answer.json()["problems"]
    messages = " ".join(p["message"] for p in problems)
    assert "no step 'ship'" in messages and "fault 'explode' is not one of" in messages
    assert {p["path"] for p in problems} == {"pins[0]", "pins[1]"}  # each at its pin
    assert api(operator).get(f"{base}/broken").status_code == 404


def test_a_plan_with_a_misshapen_part_lists_its_problems_against_the_definition_too(
    operator: SignedInClient, base: str
) -> None:
    """A hit of 0 and a field that is not a plan's do not hide a step the definition
    lacks: shape problems first, then the well-shaped pins' against the definition."""
    bad = {**plan("broken", "charge:after_handler:kill#0", "ship:after_handler:kill"), "x": 1}
    answer = api(operator).post(base, json={"document": bad})
    assert answer.status_code == 422
    problems = [(p["path"], p["message"]) for p in answer.json()["problems"]]
    assert [path for path, _ in problems] == ["x", "pins[0].hit", "pins[1]"]
    assert problems[2][1].startswith("ship:after_handler:kill: no step 'ship'; steps: ")


def test_a_step_lists_plan_naming_your_handlers_is_refused_at_its_app(
    operator: SignedInClient, base: str
) -> None:
    """The studio runs a step list's plan with stubs: a plan naming an app was saved,
    and its Run ran the team's handlers in the studio's workers when they could be
    imported there, else failed with "worker ... exited with status 1"."""
    named = {**plan("handlers", "charge:after_handler:kill"), "stubs": {}, "app": "teamapp:app"}
    answer = api(operator).post(base, json={"document": named})
    assert answer.status_code == 422, answer.text
    (problem,) = answer.json()["problems"]
    assert problem["path"] == "app"
    assert problem["message"].startswith(
        "the studio drills a step list with the stubs of its activities and does not load "
        "your code (teamapp:app): leave app out here"
    )
    assert api(operator).get(f"{base}/handlers").status_code == 404


def test_a_viewer_reads_plans_but_cannot_save_or_run(
    operator: SignedInClient, viewer: SignedInClient, base: str
) -> None:
    api(operator).post(base, json={"document": plan("viewed", "charge:after_handler:kill")})
    client = api(viewer)
    assert client.get(f"{base}/viewed").status_code == 200
    assert client.post(base, json={"document": plan("mine")}).status_code == 403
    assert client.post(f"{base}/viewed/versions/1/run").status_code == 403
    page = client.get(base.removeprefix("/api"))
    assert page.status_code == 200 and 'id="plan-form"' not in page.text


def test_a_run_reports_per_node_and_fills_the_coverage(operator: SignedInClient, base: str) -> None:
    client = api(operator)
    client.post(base, json={"document": plan("in-doubt", "charge:after_handler:kill")})
    run = finished_run(client, base, client.post(f"{base}/in-doubt/versions/1/run"))
    assert run["verdict"] == "passed", run["findings"]
    charge = node(run, "charge")
    assert charge["pins"][0]["state"] == "fired"
    assert "charge: UNKNOWN (in doubt), waiting for an operator" in charge["state"]
    assert any("1 effect" in e for e in charge["effects"])
    assert not charge["findings"]
    assert run["instance_url"].endswith("/instances/plan-1")
    # While a run is under way the page reads the drill's boundary report: this one's
    # shows the kill, as the page would have seen it the moment it fired.
    drill_id = run["instance_url"].split("/drills/")[2].split("/")[0]
    report = Path(tempfile.gettempdir()) / "wayline-drills" / run["run_id"] / drill_id / REPORT
    pins = [Pin("charge", "after_handler", "kill")]
    assert live("running", pins, report).nodes["charge"].pins[0].state == "fired"
    cells = coverage_cells(client, base)
    assert cells[("charge", "after_handler", "kill")] == "passed"
    assert cells[("reserve", "after_handler", "kill")] == "not drilled"


def test_a_duplicate_effect_is_explained_on_its_node(
    studio: LiveStudio, operator: SignedInClient, team: str
) -> None:
    name = f"pay.{uuid.uuid4().hex[:6]}"
    studio.publish(team, payments(name, on_unknown="retry_same_key"))
    base = "/api" + plans_of(name)
    client = api(operator)
    document = plan("ignores keys", "charge:after_handler:kill")
    document["stubs"] = {"charge": {"behaviour": "succeed", "idempotent": False}}
    client.post(base, json={"document": document})
    run = finished_run(client, base, client.post(f"{base}/ignores keys/versions/1/run"))
    assert run["verdict"] == "failed"
    (finding,) = node(run, "charge")["findings"]
    assert "its effect happened 2 times under one idempotency key" in finding
    assert not node(run, "reserve")["findings"] and not run["findings"]


def test_each_fired_cell_of_a_run_has_its_own_verdict_in_the_coverage(
    studio: LiveStudio, operator: SignedInClient, team: str
) -> None:
    """Two faults fire in one run and only one leads to a violation: a worker killed after
    ``charge``'s handler ran, retried under its key on a service that ignores keys, charges
    twice; one killed when it had just claimed ``reserve`` leaves nothing behind. Its cell
    fails, the other's passes, though the run as a whole failed."""
    name = f"pay.{uuid.uuid4().hex[:6]}"
    studio.publish(team, payments(name, on_unknown="retry_same_key"))
    base = "/api" + plans_of(name)
    client = api(operator)
    document = plan("two faults", "reserve:after_claim:kill", "charge:after_handler:kill")
    document["stubs"] = {"charge": {"behaviour": "succeed", "idempotent": False}}
    client.post(base, json={"document": document})
    run = finished_run(client, base, client.post(f"{base}/two faults/versions/1/run"))
    assert run["verdict"] == "failed"
    assert [p["state"] for step in ("reserve", "charge") for p in node(run, step)["pins"]] == [
        "fired",
        "fired",
    ], run["nodes"]
    assert node(run, "charge")["findings"] and not node(run, "reserve")["findings"]

    cells = coverage_cells(client, base)
    assert cells[("charge", "after_handler", "kill")] == "failed"
    assert cells[("reserve", "after_claim", "kill")] == "passed"
    why = {
        (c["boundary"], c["fault"]): c["why"]
        for s in client.get(f"{base}/coverage").json()
        if s["step"] == "charge"
        for c in s["cells"]
    }
    assert "its effect happened 2 times under one idempotency key" in why[("after_handler", "kill")]


def test_saves_of_one_name_at_once_each_get_their_own_version(
    operator: SignedInClient, base: str
) -> None:
    client = api(operator)
    with ThreadPoolExecutor(4) as pool:
        answers = list(
            pool.map(
                lambda _: client.post(base, json={"document": plan("racing")}).json()["version"],
                range(6),
            )
        )
    assert sorted(answers) == [1, 2, 3, 4, 5, 6]
