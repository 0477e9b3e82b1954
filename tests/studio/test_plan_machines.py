"""Drill plans on a published state machine in the studio: the editor draws its state
diagram, a pin on a state that advances shows as a marker on that state, a terminal
state and a boundary an advance never reaches are refused saying why, the stubs are
per state, a saved plan exports as the CLI reads it, and a run shows each pin fired
and the execution's end on the state it ended in, then fills the coverage."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.studio.live import LiveStudio, SignedInClient
from tests.studio.plan_workspace import assert_pin_refused, compose, pick, plans_of
from tests.studio.test_plan_api import api, coverage_cells, finished_run, node
from verification.plan_sources import read_plan

ROOT = Path(__file__).resolve().parents[2]


def approval(name: str) -> dict[str, Any]:
    """The example's document-approval machine, under a name of this module's own."""
    document = json.loads((ROOT / "examples" / "document_approval.json").read_text())
    return {**document, "name": name}


@pytest.fixture(scope="module")
def name(studio: LiveStudio, team: str) -> str:
    return studio.publish_new(team, "approval", approval)


@pytest.fixture(scope="module")
def url(name: str) -> str:
    return plans_of(name)


def fields(*pins: str, **more: str) -> dict[str, object]:
    return {"pin": list(pins), "input": '"v1"', **more}


def test_the_version_links_its_plans_and_they_draw_the_state_diagram(
    operator: SignedInClient, name: str, url: str
) -> None:
    version = operator.get(f"/definitions/{name}/versions/1")
    assert 'id="drill-plans-link"' in version.text
    page = operator.get(url)
    assert page.status_code == 200
    assert 'class="graph state-diagram"' in page.text
    assert f'hx-get="{url}/compose?step=InReview"' in page.text
    assert "Click a state on the diagram" in page.text
    assert "with a stubbed machine" in page.text and "stubbed activities" not in page.text
    assert 'data-stub="Submitted"' in page.text and 'data-stub="InReview"' in page.text
    assert 'data-stub="Approved"' not in page.text  # a terminal state never advances
    assert "ignores_keys" not in page.text
    textarea = '<textarea id="plan-input" name="input" rows="3" spellcheck="false">'
    assert f"{textarea}&#34;&#34;" in page.text  # the machine's input: "" (text)


def test_picking_a_state_and_pinning_draws_a_marker_on_it(
    operator: SignedInClient, url: str
) -> None:
    picked = pick(operator, url, "InReview")
    assert 'id="picked-step">InReview<' in picked.text
    assert '<option value="before_commit">' in picked.text
    assert '<option value="after_handler">' not in picked.text
    assert 'value="duplicate_signal"' not in picked.text
    assert 'class="node kind-state timer-state selected"' in picked.text
    added = compose(
        operator,
        url,
        fields(picked="InReview", boundary="before_commit", fault="kill", action="pin"),
    )
    assert 'id="state-InReview"' in added.text
    marker = added.text.index('data-pin="InReview:before_commit:kill"')
    assert added.text.rindex('data-step="', 0, marker) == added.text.rindex(
        'data-step="InReview"', 0, marker
    )
    assert 'name="pin" value="InReview:before_commit:kill"' in added.text


def test_a_terminal_state_or_a_boundary_it_never_reaches_is_refused(
    operator: SignedInClient, url: str
) -> None:
    terminal = pick(operator, url, "Approved")
    assert "is a terminal state: it never advances" in terminal.text
    pin = fields(picked="InReview", boundary="after_handler", fault="kill", action="pin")
    why = "advance does not reach after_handler; it reaches after_claim"
    assert_pin_refused(operator, url, pin, why)


def test_a_saved_plan_exports_as_the_command_line_reads_it(
    operator: SignedInClient, name: str, url: str, tmp_path: Path
) -> None:
    saved = operator.form(
        url,
        fields("Submitted:after_commit:exit", name="approve", **{
            "stub.InReview.behaviour": "succeed", "stub.InReview.result": '"Rejected"',
        }),
    )  # fmt: skip
    assert saved.status_code == 303, saved.text
    path = tmp_path / "plan.json"
    path.write_text(operator.get(f"{url}/approve/versions/1/export").text)
    plan = read_plan(path)
    assert plan.definition == f"{name}@1"
    assert [p.label for p in plan.pins] == ["Submitted:after_commit:exit"]
    assert plan.stub("InReview").result == "Rejected"


def test_a_run_shows_the_pin_fired_and_the_end_on_its_state_then_the_coverage(
    operator: SignedInClient, name: str, url: str
) -> None:
    base = f"/api{url}"
    client = api(operator)
    document = {
        "name": "review killed",
        "input": "v1",
        "pins": ["InReview:before_commit:kill"],
        "stubs": {"InReview": {"result": {"state": "Approved", "fields": {"by": "ann"}}}},
    }
    assert client.post(base, json={"document": document}).status_code == 201
    run = finished_run(client, base, client.post(f"{base}/review killed/versions/1/run"))
    assert run["verdict"] == "passed", run["findings"]
    review = node(run, "InReview")
    assert review["pins"][0]["state"] == "fired"
    assert any("transition 2: 1 call, 1 effect" in e for e in review["effects"])
    assert "Approved: CURRENT STATE after 2 transitions" in node(run, "Approved")["state"]
    page = operator.get(f"{url}/jobs/{run['job_id']}")
    assert 'class="graph state-diagram"' in page.text
    assert "drill-fired" in page.text
    cells = coverage_cells(client, base)
    assert cells[("InReview", "before_commit", "kill")] == "passed"
    assert cells[("Submitted", "after_claim", "kill")] == "not drilled"
    coverage = operator.get(f"{url}/coverage")
    assert 'class="graph state-diagram"' in coverage.text
    assert 'id="coverage-InReview"' in coverage.text and "state, 1 of" in coverage.text
