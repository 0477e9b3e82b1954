"""Drill pages over HTTP: a recorded run's scorecard, a violation's link to the drill
instance and event it names, two runs compared, and a campaign's start refused without
drills. (A real campaign runs in the browser tests.)"""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, datetime
from pathlib import Path

from engine.model.definitions import DefinitionRef
from engine.model.events import EventKind, event_to_json, make_event
from studio.drills.jobs import BUSY as JOBS_BUSY
from studio.roles import Role
from tests.studio.live import LiveStudio
from tests.studio.plan_workspace import plans_of
from tests.studio.test_plan_api import api, payments, run_under_way
from verification import runs

T0 = datetime(2026, 11, 1, 12, tzinfo=UTC)
DRILL = "D1-kill-after_handler-s0"
VIOLATION = "I4 terminal once: i-7: row says completed@3, history running@2"


def card(artifacts: Path, passed: int, failed: int) -> dict:
    """The parts of a scorecard the pages read (as verification.scorecard builds it)."""
    return {
        "identity": {
            "campaign": "c-test",
            "git_sha": "abc1234",
            "postgres": "15.2",
            "python": "3.11.7",
            "cores": 2,
            "profile": "ci",
            "seed": "0x7",
            "artifacts": str(artifacts),
            "wall_seconds": 5.0,
        },
        "invariants": {
            "I4": {
                "name": "terminal once",
                "checked": 3,
                "violations": failed,
                "first": {"drill": DRILL, "what": "i-7: row says completed@3"} if failed else None,
            }
        },
        "faults": {
            "per_boundary": {"after_handler": {"kill": {"planned": 1, "fired": 1}}},
            "reached_runs": {"after_handler": 1},
        },
        "leases": {"takeovers": 1, "stale_writes_accepted": 0},
        "recovery": {"p50": 2.0, "p95": 2.0},
        "summary": {"passed": passed, "failed": failed, "not_run": 0},
    }


def record(studio: LiveStudio, team: str, artifacts: Path, failed: bool) -> str:
    run_id = f"c{uuid.uuid4().hex[:10]}"
    entry = {
        "id": DRILL,
        "family": "D1",
        "title": "kill at after_handler",
        "seed": "0x00000007",
        "verdict": "failed" if failed else "passed",
        "seconds": 2.5,
        "failures": [VIOLATION] if failed else [],
        "known_bug": "",
        "reproduce": f"wayline drill run --drill {DRILL} --seed 0x7" if failed else "",
    }
    scorecard = card(artifacts, 0 if failed else 1, 1 if failed else 0)

    async def write(store) -> None:
        await runs.start_run(store, run_id, "ci", 7, [DRILL], "given server", 1, team)
        await runs.add_result(store, run_id, entry)
        await runs.finish_run(store, run_id, scorecard, "drills: ...")

    studio.run(write)
    return run_id


def corpus(directory: Path) -> None:
    ref = DefinitionRef("flow", "1", "0" * 64)
    events = [
        make_event(sequence=1, instance_id="i-7", kind=EventKind.INSTANCE_STARTED,
                   occurred_at=T0, definition=ref),
        make_event(sequence=2, instance_id="i-7", kind=EventKind.ACTIVITY_SCHEDULED,
                   occurred_at=T0, step="a"),
        make_event(sequence=3, instance_id="i-7", kind=EventKind.COMPLETED, occurred_at=T0),
    ]  # fmt: skip
    line = {"drill": DRILL, "instance_id": "i-7", "events": [event_to_json(e) for e in events]}
    (directory / "corpus.jsonl").write_text(json.dumps({**line, "ledger": [], "work": []}) + "\n")


def test_a_scorecard_links_a_violation_to_the_drill_instance_and_event(
    studio: LiveStudio, tmp_path: Path
) -> None:
    team = studio.team("drills")
    corpus(tmp_path)
    good = record(studio, team, tmp_path, failed=False)
    bad = record(studio, team, tmp_path, failed=True)
    viewer = studio.client(studio.user(team, Role.VIEWER))

    listing = viewer.get("/drills")
    assert listing.status_code == 200 and good in listing.text and bad in listing.text
    assert "Run the chosen drills" not in listing.text  # a viewer cannot start drills

    page = viewer.get(f"/drills/runs/{bad}")
    assert page.status_code == 200
    assert "drills: 0 passed, 1 failed" in page.text
    link = f"/drills/runs/{bad}/drills/{DRILL}/instances/i-7#event-3"
    assert f'href="{link}"' in page.text
    captured = viewer.get(link.split("#")[0])
    assert captured.status_code == 200
    assert 'id="event-3"' in captured.text and 'href="#event-3"' in captured.text
    assert viewer.get(f"/drills/runs/{bad}/drills/{DRILL}/instances/i-9").status_code == 404

    compared = viewer.get(f"/drills/compare?left={good}&right={bad}")
    assert compared.status_code == 200 and "1 changed verdict" in compared.text
    api = viewer.get(f"/api/drills/compare?left={good}&right={bad}").json()
    assert api["drills"] == [{"drill": DRILL, "left": "passed", "right": "failed"}]
    assert viewer.get(f"/api/drills/runs/{bad}").json()["drills"][0]["failures"] == [VIOLATION]

    stranger = studio.client(studio.user(studio.team("strangers"), Role.ADMIN))
    assert stranger.get(f"/drills/runs/{bad}").status_code == 404
    assert bad not in stranger.get("/drills").text


def test_a_run_compared_with_itself_shows_the_compare_form_again(
    studio: LiveStudio, tmp_path: Path
) -> None:
    """Not an error page: the Drills page, 422, the reason beside the compare form and
    A and B as they were chosen (the run form neither shows it nor changes)."""
    team = studio.team("comparers")
    first, second = (record(studio, team, tmp_path, failed=False) for _ in range(2))
    viewer = studio.client(studio.user(team, Role.VIEWER))

    same = viewer.get(f"/drills/compare?left={first}&right={first}")
    assert same.status_code == 422 and 'id="compare-form"' in same.text
    error = re.search(r'id="compare-error">([^<]*)<', same.text).group(1)
    assert error == "Not compared: A and B are the same run: choose two different runs to compare."
    checked = re.findall(r'name="(left|right)" value="(\w+)" checked', same.text)
    assert sorted(checked) == [("left", first), ("right", first)]
    assert 'id="drill-error"' not in same.text and "data-replace-url" not in same.text
    api = viewer.get(f"/api/drills/compare?left={first}&right={first}")
    assert api.status_code == 422 and "the same run" in api.json()["error"]
    one = viewer.get(f"/drills/compare?left={second}")
    assert one.status_code == 422 and "one as A and another as B" in one.text
    assert re.findall(r'name="(left|right)" value="(\w+)" checked', one.text) == [("left", second)]
    assert viewer.get(f"/drills/compare?left={first}&right={second}").status_code == 200


def test_a_campaign_needs_drills_that_exist(studio: LiveStudio) -> None:
    team = studio.team("drillers")
    operator = studio.client(studio.user(team, Role.OPERATOR))
    assert operator.form("/drills/runs", {"profile": "ci"}).status_code == 422
    unknown = operator.form("/drills/runs", {"profile": "ci", "drill": ["D1", "D99"]})
    assert unknown.status_code == 422 and "no drill matches D99" in unknown.text
    ticked = re.findall(r'name="drill" value="([\w-]+)" checked', unknown.text)
    assert ticked == ["D1"], "the drills chosen stay chosen"
    assert 'id="compare-error"' not in unknown.text
    catalogue = operator.get("/api/drills").json()
    assert any(f["family"] == "D1" and len(f["drills"]) > 1 for f in catalogue)
    assert operator.get("/api/drills/jobs/nothing").status_code == 404


def test_a_campaign_started_while_a_drill_job_runs_is_refused_beside_the_form(
    studio: LiveStudio,
) -> None:
    """The Run button is disabled while a job runs, but a page opened before it started
    still offers it: its start was an error page; it is the form again, saying why,
    the drills still chosen, and the job under way linked."""
    team = studio.team("drillbusy")
    operator = studio.client(studio.user(team, Role.OPERATOR))
    base = "/api" + plans_of(studio.publish_new(team, "pay", payments))
    with run_under_way(api(operator), base) as job_id:
        refused = operator.form("/drills/runs", {"profile": "ci", "drill": ["D7"]})
    assert refused.status_code == 409
    assert 'id="drill-error"' in refused.text and JOBS_BUSY in refused.text
    assert re.findall(r'name="drill" value="([\w-]+)" checked', refused.text) == ["D7"]
    assert f'href="{base.removeprefix("/api")}/jobs/{job_id}"' in refused.text  # the plan's run


def test_a_start_refused_for_another_teams_drill_says_nothing_of_that_team(
    studio: LiveStudio,
) -> None:
    """One drill job runs at a time in a studio, whoever started it. A start refused
    because of another team's said "another drill job (a campaign or a plan's run)":
    the refusal, on the page as in the API, says only that a drill is running here and
    to try again later, and nothing of the job, its plan or its team."""
    theirs = studio.team("drillbusytheirs")
    owner = studio.client(studio.user(theirs, Role.OPERATOR))
    base = "/api" + plans_of(studio.publish_new(theirs, "pay", payments))
    ours = studio.client(studio.user(studio.team("drillbusyours"), Role.OPERATOR))
    with run_under_way(api(owner), base) as job_id:
        page = ours.form("/drills/runs", {"profile": "ci", "drill": ["D7"]})
        answer = api(ours).post("/api/drills/runs", json={"drills": ["D7"]})
    said = "a drill is running in this studio (one runs at a time); try again later"
    assert (page.status_code, answer.status_code) == (409, 409)
    assert answer.json()["error"] == said
    error = re.search(r'id="drill-error">(.*?)</p>', page.text).group(1)
    assert error == f"Not started: {said}."
    for text in (page.text, answer.text):
        assert job_id not in text and "slow charge" not in text and theirs not in text
    assert 'id="running-job"' not in page.text, "their job is no banner of ours"


def test_a_blank_or_overlong_drill_name_is_refused_saying_which(studio: LiveStudio) -> None:
    """The API said ``no drill matches : see ...`` for a blank name and echoed back a
    name of any length; each is refused naming its place in the list."""
    client = api(studio.client(studio.user(studio.team("drillnames"), Role.OPERATOR)))
    blank = client.post("/api/drills/runs", json={"drills": ["D1", " "]})
    assert blank.status_code == 422, blank.text
    assert blank.json()["problems"][0]["path"] == "drills[1]"
    assert "drills[1] is empty: name a drill id" in blank.json()["error"]
    long = client.post("/api/drills/runs", json={"drills": ["D" * 5000]})
    assert long.status_code == 422 and len(long.text) < 500, long.text[:200]
    assert "drills[0] is 5000 characters long; a drill id or family has at most" in long.text


def test_every_catalogued_family_is_described() -> None:
    from studio.drills.families import ABOUT
    from verification.drills.catalogue import catalogue
    from verification.profiles import PROFILES

    found = {s.family for p in PROFILES.values() for s in catalogue(p, 0)}
    assert found - set(ABOUT) == set()
