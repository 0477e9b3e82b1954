"""Drill plans on a published code-first workflow in the studio: the editor draws the
outline of its code, a pin on a step call (its first, or the call number given) or on
a signal the code waits for shows as a marker on that outline node, a boundary a call
never reaches, a call number out of range and an app not shaped MODULE:APP are refused
saying what is allowed, each signal has its answer, a saved plan exports as
``wayline drill run --plan`` reads it, running it from the studio is refused with the
command that runs it, and the coverage heatmap shades the outline's nodes."""

from __future__ import annotations

import asyncio
import re
import uuid
from pathlib import Path

import pytest

from engine import Store
from studio.plans import saved
from tests.studio import plan_code_app
from tests.studio.live import LiveStudio, SignedInClient
from tests.studio.plan_workspace import compose, pick, plans_of
from tests.studio.test_plan_api import api, coverage_cells
from verification import plan as harness
from verification.plan_sources import definition_of, read_plan

APP = "tests.studio.plan_code_app:app"
NAME = plan_code_app.NAME


@pytest.fixture(scope="module")
def team(studio: LiveStudio) -> str:
    team = studio.team("plancode")
    studio.publish(team, plan_code_app.app.workflows[0].document)
    return team


@pytest.fixture(scope="module")
def url(team: str) -> str:
    return plans_of(NAME)


def fields(*pins: str, **more: str) -> dict[str, object]:
    return {"pin": list(pins), "input": '{"sku": "mug"}', "app": APP, **more}


def marked_on(text: str, pin: str) -> str:
    """The outline node (its data-step) the marker of ``pin`` is drawn in."""
    marker = text.index(f'data-pin="{pin}"')
    found = re.findall(r'data-step="([^"]+)"', text[:marker])
    return found[-1]


def test_the_plans_of_a_code_version_draw_its_outline_with_the_app_and_answers(
    operator: SignedInClient, url: str
) -> None:
    version = operator.get(f"/definitions/{NAME}/versions/1")
    assert 'id="drill-plans-link"' in version.text
    page = operator.get(url)
    assert page.status_code == 200, page.text
    assert 'aria-label="Outline of ' in page.text
    assert f'hx-get="{url}/compose?step=step%3Acharge"' in page.text
    assert "Click a step or a signal wait on the outline" in page.text
    assert 'id="plan-app" name="app"' in page.text
    for signal in ("paid", "cancelled", "shipped"):
        assert f'data-answer="{signal}"' in page.text
    assert "data-stub=" not in page.text  # the bodies are the team's code


def test_pinning_a_later_call_and_a_signal_draws_markers_on_their_nodes(
    operator: SignedInClient, url: str
) -> None:
    picked = pick(operator, url, "step:charge")
    assert 'id="picked-step">charge<' in picked.text and 'id="pin-call"' in picked.text
    assert '<option value="after_attempt_start">' in picked.text
    assert '<option value="after_claim">' not in picked.text
    assert 'value="duplicate_signal"' not in picked.text
    added = compose(
        operator, url,
        fields(picked="step:charge", call="2", boundary="before_commit", fault="kill",
               action="pin"),
    )  # fmt: skip
    assert 'name="pin" value="charge.2:before_commit:kill"' in added.text
    assert marked_on(added.text, "charge.2:before_commit:kill") == "step:charge"
    race = pick(operator, url, "race:paid,cancelled")
    assert '<select id="pin-signal" name="signal"><option value="paid">' in race.text
    assert '<option value="before_signal_ack">' in race.text
    both = compose(
        operator, url,
        fields("charge.2:before_commit:kill", picked="race:paid,cancelled", signal="cancelled",
               boundary="before_signal_ack", fault="duplicate_signal", action="pin"),
    )  # fmt: skip
    assert marked_on(both.text, "cancelled:before_signal_ack:duplicate_signal") == (
        "race:paid,cancelled"
    )
    assert marked_on(both.text, "charge.2:before_commit:kill") == "step:charge"


def test_a_call_out_of_range_a_boundary_never_reached_and_a_bad_app_are_refused(
    operator: SignedInClient, url: str
) -> None:
    call = compose(
        operator, url,
        fields(picked="step:charge", call="0", boundary="before_commit", fault="kill",
               action="pin"),
    )  # fmt: skip
    assert 'id="error-call"' in call.text and "a whole number from 1 to 100" in call.text
    assert 'name="pin"' not in call.text
    boundary = compose(
        operator,
        url,
        fields(picked="step:reserve", boundary="after_claim", fault="kill", action="pin"),
    )
    assert "a step call does not reach after_claim; it reaches after_attempt_start" in (
        boundary.text
    )
    signal = compose(
        operator, url,
        fields(picked="race:paid,cancelled", signal="shipped", boundary="before_signal_ack",
               fault="kill", action="pin"),
    )  # fmt: skip
    assert 'id="error-signal"' in signal.text and "this wait awaits paid, cancelled" in signal.text
    page = operator.get(url).text
    end = re.search(r'data-step="(return@\d+)"', page)
    assert end
    nothing = pick(operator, url, end[1])
    assert "has no work a code plan can fault (only step calls and signal waits do)" in (
        nothing.text
    )
    app = operator.form(url, fields(name="bad app", app="shop.worker"))
    assert app.status_code == 422
    assert 'id="error-app"' in app.text and "as MODULE:APP (e.g. shop.worker:app)" in app.text
    missing = operator.form(url, fields(name="no app", app=""))
    assert missing.status_code == 422
    assert "required: a code-first workflow runs its own code" in missing.text
    by_api = api(operator).post(f"/api{url}", json={"document": {"name": "no app", "pins": []}})
    assert by_api.status_code == 422
    assert "is a code-first workflow: it runs its own code, so name the app" in by_api.text


def test_a_saved_plan_exports_as_the_command_line_reads_it(
    operator: SignedInClient, url: str, tmp_path: Path
) -> None:
    saved_ = operator.form(
        url,
        fields("reserve.1:after_handler:exit", "paid:before_signal_ack:kill", name="saga",
               **{"answer.paid": '{"by": "ada"}'}),
    )  # fmt: skip
    assert saved_.status_code == 303, saved_.text
    again = operator.form(url, fields("charge.2:after_commit:kill", name="saga"))
    assert again.status_code == 303, again.text
    diff = operator.get(f"{url}/saga/diff", params={"left": 1, "right": 2})
    assert "charge.2:after_commit:kill</code> added" in diff.text
    path = tmp_path / "saga.v1.json"
    path.write_text(operator.get(f"{url}/saga/versions/1/export").text)
    plan = read_plan(path)
    assert (plan.definition, plan.app) == (f"{NAME}@1", APP)
    assert [p.label for p in plan.pins] == [
        "reserve.1:after_handler:exit",
        "paid:before_signal_ack:kill",
    ]
    assert plan.answers == {"paid": {"by": "ada"}}
    declared = asyncio.run(definition_of(plan, None, "unused"))  # the app declares it
    harness.check_against(plan, declared)


def test_running_from_the_studio_is_refused_with_the_command_that_runs_it(
    operator: SignedInClient, url: str
) -> None:
    operator.form(url, fields("shipped:before_signal_ack:kill", name="ship"))
    page = operator.get(url)
    assert "wayline drill run --plan ship.v1.json" in page.text
    assert f'action="{url}/ship/versions/1/run"' not in page.text
    refused = operator.form(f"{url}/ship/versions/1/run", {})
    assert refused.status_code == 422
    assert "from its app (tests.studio.plan_code_app:app), and the studio does not load" in (
        refused.text
    )
    assert "wayline drill run --plan ship.v1.json` where that app" in refused.text
    by_api = api(operator).post(f"/api{url}/ship/versions/1/run")
    assert by_api.status_code == 422 and "ship.v1.json" in by_api.text


def test_the_coverage_heatmap_shades_the_outline_nodes(
    studio: LiveStudio, team: str, operator: SignedInClient, url: str
) -> None:
    operator.form(url, fields("charge.1:after_handler:kill", "charge.3:before_commit:kill",
                              name="covered"))  # fmt: skip

    async def record(store: Store) -> None:
        """A run of the plan recorded as the studio records one (the CLI ran it)."""
        plan = await saved.get(store, team, "covered")
        assert plan is not None
        pins = [{"step": "charge.1", "boundary": "after_handler", "fault": "kill", "fired": True}]
        run_id = f"run-{uuid.uuid4().hex[:8]}"
        await saved.record_run(store, team, plan, run_id, "passed", pins, "seed")

    studio.run(record)
    cells = coverage_cells(api(operator), f"/api{url}")
    assert cells[("charge.1", "after_handler", "kill")] == "passed"
    assert cells[("charge.3", "before_commit", "kill")] == "planned"
    assert cells[("paid", "before_signal_ack", "duplicate_signal")] == "not drilled"
    page = operator.get(f"{url}/coverage")
    assert 'id="coverage-charge.3"' in page.text and "step call, 0 of" in page.text
    charge = re.search(r'<g id="code-\d+" class="([^"]*)" data-step="step:charge"', page.text)
    assert charge and "heat heat-1" in charge.group(1)
    assert re.search(r'data-step="wait:shipped"', page.text)
    assert re.search(r'class="node-note"[^>]*>1 of \d+ cells drilled<', page.text)
