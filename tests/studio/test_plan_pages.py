"""The drill plan editor over HTTP: a pin added by picking a step shows as a marker, a
pin the step cannot take is refused beside the form, saving twice makes two versions
whose diff shows what changed, a bad input is refused with the plan kept, and a viewer
cannot edit."""

from __future__ import annotations

import html
import json
from urllib.parse import quote

import pytest

from tests.studio.live import LiveStudio, SignedInClient
from tests.studio.plan_workspace import assert_pin_refused, compose, pick, plans_of
from tests.studio.test_plan_api import api, payments, plan, run_under_way


@pytest.fixture(scope="module")
def url(studio: LiveStudio, team: str) -> str:
    return plans_of(studio.publish_new(team, "pay", payments))


def fields(*pins: str, **more: str) -> dict[str, object]:
    return {"pin": list(pins), "input": '{"order": "o-1"}', **more}


def test_picking_a_step_and_pinning_draws_a_marker(operator: SignedInClient, url: str) -> None:
    picked = pick(operator, url, "charge")
    assert 'id="picked-step">charge<' in picked.text and "after_handler" in picked.text
    added = compose(
        operator, url, fields(picked="charge", boundary="after_handler", fault="kill", action="pin")
    )
    assert added.status_code == 200
    assert 'data-pin="charge:after_handler:kill"' in added.text  # the node's marker
    assert 'name="pin" value="charge:after_handler:kill"' in added.text


def test_a_pin_the_step_cannot_take_is_refused_beside_the_form(
    operator: SignedInClient, url: str
) -> None:
    pin = fields(picked="charge", boundary="before_signal_ack", fault="kill", action="pin")
    assert_pin_refused(operator, url, pin, "an activity step does not reach before_signal_ack")


def test_saving_twice_makes_versions_and_their_diff_shows_the_change(
    operator: SignedInClient, url: str
) -> None:
    first = operator.form(url, fields("charge:after_handler:kill", name="weekly"))
    assert first.status_code == 303 and first.headers["location"].endswith("v=1&saved_notice=1")
    operator.form(
        url, fields("charge:after_handler:kill", "reserve:after_commit:exit", name="weekly")
    )
    page = operator.get(url)
    assert 'data-plan="weekly" data-version="2"' in page.text
    diff = operator.get(f"{url}/weekly/diff", params={"left": 1, "right": 2})
    assert "reserve:after_commit:exit</code> added" in diff.text
    assert (
        "+      &#34;step&#34;: &#34;reserve&#34;" in diff.text or '"step": "reserve"' in diff.text
    )
    exported = operator.get(f"{url}/weekly/versions/1/export")
    assert "attachment" in exported.headers["content-disposition"]
    assert [p["step"] for p in json.loads(exported.text)["pins"]] == ["charge"]


def test_a_bad_input_is_refused_and_the_plan_kept(operator: SignedInClient, url: str) -> None:
    refused = operator.form(
        url, {"pin": ["charge:after_handler:kill"], "input": "{nope", "name": "typo"}
    )
    assert refused.status_code == 422
    assert 'id="error-input"' in refused.text and "is not allowed; JSON of at most" in refused.text
    assert ">{nope</textarea>" in refused.text
    assert 'name="pin" value="charge:after_handler:kill"' in refused.text


def test_the_answers_say_a_signal_is_sent_as_the_instance_starts(
    studio: LiveStudio, team: str, operator: SignedInClient
) -> None:
    """The drill sends a step list's signals as the instance starts (its history has
    them received before the first attempt), and approves an approval once the instance
    waits there: the page said both happen when the instance waits there."""

    def confirmed(name: str) -> dict:
        document = payments(name)
        wait = {"kind": "signal", "target": "pay.confirm", "timeout": "1m"}
        document["steps"].append({"name": "confirm", **wait})
        return document

    page = operator.get(plans_of(studio.publish_new(team, "signalled", confirmed)))
    said = " ".join(html.unescape(page.text).split())
    assert (
        "The payload the drill sends each signal step as the instance starts (it keeps the "
        "signal until it waits there), and approves each approval step with once the "
        "instance waits there (JSON; null by default)."
    ) in said


def test_a_viewer_sees_no_editor(viewer: SignedInClient, url: str) -> None:
    assert viewer.get(f"{url}/compose", params={"step": "charge"}).status_code == 403
    assert viewer.form(url, fields(name="mine")).status_code == 403


def test_a_stub_that_ignores_keys_is_saved_as_not_idempotent(
    operator: SignedInClient, url: str
) -> None:
    operator.form(
        url,
        fields("charge:after_handler:kill", name="keys", **{
            "stub.charge.behaviour": "succeed", "stub.charge.ignores_keys": "on",
        }),
    )  # fmt: skip
    exported = json.loads(operator.get(f"{url}/keys/versions/1/export").text)
    assert exported["stubs"] == {
        "charge": {"behaviour": "succeed", "result": None, "seconds": 0.0, "idempotent": False}
    }
    assert (
        'name="stub.charge.ignores_keys" checked'
        in operator.get(url, params={"plan": "keys", "v": 1}).text
    )


def test_a_restart_pin_is_saved_and_exported_but_runs_only_from_the_cli(
    operator: SignedInClient, url: str
) -> None:
    """The studio runs plans on its own database, which a drill may not restart."""
    picker = pick(operator, url, "charge")
    assert 'value="restart_database"' in picker.text
    saved = operator.form(url, fields("charge:before_commit:restart_database", name="crash"))
    assert saved.status_code == 303
    exported = json.loads(operator.get(f"{url}/crash/versions/1/export").text)
    assert exported["pins"][0]["fault"] == "restart_database"
    refused = operator.form(f"{url}/crash/versions/1/run", {})
    assert refused.status_code == 422 and 'id="run-error"' in refused.text  # on the plans page
    assert "never to a server it was given, and the studio runs plans on its own" in (refused.text)
    # The export names its definition NAME@VERSION, which only --dsn serves: the way
    # that runs is said (the advice was to run the export as it is, which was refused).
    said = html.unescape(refused.text)
    assert 'put "definition_file": that file in place of "definition": "' in said
    assert "and run `wayline drill run --plan crash.v1.json` without --dsn" in said


def test_a_run_refused_says_why_on_the_plans_page_with_the_plan_kept(
    operator: SignedInClient, url: str
) -> None:
    """A Run clicked while another drill job runs (one at a time) was an error page that
    left the plans behind; it is the plans page again, the plan loaded, the reason beside
    it and the job under way one click away."""
    operator.form(url, fields("charge:after_handler:kill", name="second"))
    with run_under_way(api(operator), "/api" + url) as job_id:
        refused = operator.form(f"{url}/second/versions/1/run", {})
    assert refused.status_code == 409
    assert 'id="run-error"' in refused.text and "second v1 not started: a drill is running" in (
        refused.text
    )
    assert f'href="{url}/jobs/{job_id}" id="run-under-way"' in refused.text  # the plan's run page
    assert f'data-replace-url="{url}?plan=second&v=1"' in refused.text
    assert 'name="pin" value="charge:after_handler:kill"' in refused.text


def test_the_drills_page_names_a_plan_run_under_way_and_links_to_its_page(
    operator: SignedInClient, url: str
) -> None:
    """The Drills page's banner called any drill job "a campaign" and linked a plan's run
    to the campaign page; it names the plan and links to where the run is watched."""
    with run_under_way(api(operator), "/api" + url) as job_id:
        drills = operator.get("/drills")
        campaign_page = operator.get(f"/drills/jobs/{job_id}")
    assert 'id="running-job">Run of drill plan slow charge v1 is under way' in drills.text
    assert f'href="{url}/jobs/{job_id}"' in drills.text
    assert "<h1>Run of drill plan slow charge v1</h1>" in campaign_page.text


def test_a_plan_saved_through_the_api_with_text_pins_opens_on_the_page(
    operator: SignedInClient, url: str
) -> None:
    """The API keeps pins as posted, and ``STEP:BOUNDARY:FAULT[#HIT]`` is the shape the
    README shows: opening such a plan on its page answered 500."""
    posted = plan("text pins", "charge:after_handler:kill", "reserve:before_commit:raise#2")
    assert api(operator).post("/api" + url, json={"document": posted}).status_code == 201
    opened = operator.get(url, params={"plan": "text pins", "v": 1})
    assert opened.status_code == 200, opened.text[-300:]
    assert 'name="pin" value="reserve:before_commit:raise#2"' in opened.text
    assert 'data-pin="charge:after_handler:kill"' in opened.text


def test_a_plan_named_in_any_script_downloads_under_its_name(
    operator: SignedInClient, url: str
) -> None:
    """The export's file name went into its header as typed: a name with a letter
    beyond Latin-1 could not be sent, and its download answered 500."""
    posted = plan("計画 nightly", "charge:after_handler:kill")
    assert api(operator).post("/api" + url, json={"document": posted}).status_code == 201
    exported = operator.get(f"{url}/{quote('計画 nightly')}/versions/1/export")
    assert exported.status_code == 200, exported.text[-300:]
    disposition = exported.headers["content-disposition"]
    assert disposition.startswith('attachment; filename="__ nightly.v1.json"')
    assert "filename*=UTF-8''%E8%A8%88%E7%94%BB%20nightly.v1.json" in disposition
    assert json.loads(exported.text)["name"] == "計画 nightly"


def test_a_plan_name_with_a_line_break_is_refused(operator: SignedInClient, url: str) -> None:
    """A name is shown, copied into a command and named the download: one with a line
    break was saved, and its download cut the connection."""
    posted = plan("nightly\r\nSet-Cookie: taken=1", "charge:after_handler:kill")
    refused = api(operator).post("/api" + url, json={"document": posted})
    assert refused.status_code == 422, refused.text
    assert "printable characters" in refused.json()["error"]
    saved = operator.form(url, fields("charge:after_handler:kill", name="weekly\tplan"))
    assert saved.status_code == 422 and "printable characters" in saved.text


def test_saving_a_plan_named_with_query_characters_opens_that_plan(
    operator: SignedInClient, url: str
) -> None:
    """The redirect after a save put the name into its query as typed: a plan named
    ``smoke&v=9 #x`` led to a page asking for plan ``smoke``, version 9."""
    saved = operator.form(url, fields("charge:after_handler:kill", name="smoke&v=9 #x"))
    assert saved.status_code == 303
    location = saved.headers["location"]
    assert location.endswith("?plan=smoke%26v%3D9+%23x&v=1&saved_notice=1"), location
    opened = operator.get(location)
    assert opened.status_code == 200
    assert 'data-plan="smoke&amp;v=9 #x" data-version="1"' in opened.text
