"""Code-first workflows in the studio (issue 20): the version page draws the outline of
the code, and a run's page shows its journal (step ids, attempts, open waits, signals
set aside), takes any signal its waits await, and shows a divergence banner when the
code no longer matches the journal."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator

import pytest

from engine.api.client import Client
from engine.decide.operator_actions import Action
from studio.definitions.problems import FROM_ITS_CODE
from studio.instance_urls import instance_url
from studio.roles import Role
from tests.studio import code_app
from tests.studio.live import LiveStudio, SignedInClient, csrf_token

PAGE_WAIT_SECONDS = 30.0
WHY = {"reason": "the customer paid by phone"}
"""A signal sent from the studio is audited: it needs a reason, like any command."""
"""How long a page may take to show what the worker did (it shows it within a second
or two; this only bounds how long a failure takes)."""


@pytest.fixture(scope="module")
def team(studio: LiveStudio) -> Iterator[str]:
    team = studio.team("code")
    for flow in code_app.app.workflows:
        studio.publish(team, flow.document)
    with studio.worker(code_app.app):
        yield team


def start(studio: LiveStudio, team: str, name: str, run: str, input: object = None) -> str:
    found = studio.run(lambda store: Client(store).start_run(name, input, id=run, tenant=team))
    return found[0]


def page_until(client: SignedInClient, url: str, holds: Callable[[str], bool]) -> str:
    """The page at ``url`` once ``holds`` is true of it (polled: the worker runs apart)."""
    deadline = time.monotonic() + PAGE_WAIT_SECONDS
    while True:
        page = client.get(url)
        assert page.status_code == 200
        if holds(page.text):
            return page.text
        assert time.monotonic() < deadline, f"{url} never showed what was awaited"
        time.sleep(0.1)


def test_the_version_page_draws_the_outline_of_the_code(operator: SignedInClient) -> None:
    page = operator.get("/definitions/pages-saga/versions/1")
    assert page.status_code == 200
    assert re.search(r'id="code-0" class="[^"]*kind-step', page.text)
    assert re.search(r'id="code-1" class="[^"]*kind-race', page.text)
    assert "reserve" in page.text and "paid | cancelled" in page.text
    outline = re.search(r'aria-label="Steps outline".*?</nav>', page.text, re.S)
    assert outline and "charge" in outline.group(0) and "return" in outline.group(0)
    assert "tests.studio.code_app.pages_saga" in page.text
    listed = operator.get("/definitions").text
    assert re.search(r"pages-saga(?:(?!</tr>).)*4 durable calls", listed, re.S)
    [latest] = [
        d["latest"] for d in operator.get("/api/definitions").json() if d["name"] == "pages-saga"
    ]
    assert (latest["steps"], latest["size"]) == (0, "4 durable calls")  # the API says it too


def test_a_run_page_shows_its_journal_and_takes_the_signals_its_waits_await(
    studio: LiveStudio, team: str, operator: SignedInClient
) -> None:
    run = start(studio, team, "pages-saga", "o-1", {"sku": "mug"})
    url = instance_url(run)
    text = page_until(operator, url, lambda t: 'id="journal-waits"' in t and "race.1" in t)
    assert "pages-saga/o-1/reserve#1.1" in text
    # its attempt's work is completed: no lease owner, not the row's state in that column
    row = re.search(r'data-attempt="activity:reserve\.1:1">(.*?)</tr>', text, re.S)
    assert row, text
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(1), re.S)
    assert cells[2] == '<span class="outcome">succeeded</span>'
    assert cells[7:] == ["—", "1", "—"]
    assert 'id="signal-form-paid"' in text and 'id="signal-form-cancelled"' in text
    token = csrf_token(operator.get(url))
    for signal_id in ("click-1", "click-2"):  # the button was clicked twice
        sent = operator.form(
            f"{url}/signals/paid",
            {"_csrf": token, "payload": '{"by": "ada"}', "signal_id": signal_id, **WHY},
        )
        assert sent.status_code == 303, sent.text
    page_until(operator, url, lambda t: 'id="signal-form-shipped"' in t)
    sent = operator.form(f"{url}/signals/shipped", {"_csrf": token, "payload": "", **WHY})
    assert sent.status_code == 303, sent.text
    text = page_until(operator, url, lambda t: "charge#1" in t and "completed" in t)
    assert "pages-saga/o-1/charge#1.1" in text
    aside = re.search(r'id="journal-set-aside".*?</table>', text, re.S)
    assert aside and "click-2" in aside.group(0) and "click-1" not in aside.group(0)
    assert re.search(r'id="code-2" class="[^"]*state-succeeded', text)


def test_a_run_waiting_for_a_spawned_run_and_a_signal_offers_a_form_for_the_signal_only(
    studio: LiveStudio, team: str, operator: SignedInClient
) -> None:
    """The all waits for ``spawn.1``, the spawned run's end, and ``received``: a signal
    named ``spawn.1`` would be set aside, never taken, so no form sends one; and its
    race-less page has no Races section saying the definition has none."""
    url = instance_url(start(studio, team, "pages-parcel", "p-1"))
    text = page_until(operator, url, lambda t: "all.1" in t and 'id="journal-waits"' in t)
    waits = re.search(r'id="journal-waits".*?</table>', text, re.S)
    assert waits and "spawn.1, received" in waits.group(0)
    assert 'id="signal-form-received"' in text
    assert 'id="signal-form-spawn.1"' not in text and "Send spawn.1" not in text
    assert 'id="races-title"' not in text and "This definition has no race." not in text


def test_a_cancelled_run_s_page_shows_its_race_cancelled_and_no_open_wait(
    studio: LiveStudio, team: str, operator: SignedInClient
) -> None:
    """Cancelled while its race waited: the race will never resume, so its row says
    cancelled and why, no wait is listed open with a time it times out, and no form
    offers a signal it can no longer take."""
    run = start(studio, team, "pages-saga", "c-1", {"sku": "mug"})
    url = instance_url(run)
    page_until(operator, url, lambda t: 'id="signal-form-paid"' in t)
    cancel = Client.command
    studio.run(lambda store: cancel(Client(store), run, Action.CANCEL, "ops", "order void"))
    text = page_until(operator, url, lambda t: 'id="instance-status">cancelled' in t)
    race = re.search(r'id="journal-1".*?</tr>', text, re.S)
    assert race and race.group(0).startswith('id="journal-1" class="state-cancelled"')
    assert "the instance was cancelled" in race.group(0)
    assert "waiting for paid" not in race.group(0)
    waits = re.search(r"<h3>Open waits</h3>(.*?)<h3>", text, re.S)
    assert waits and waits.group(1).strip() == '<p class="empty">No wait is open.</p>'
    assert 'id="signal-form-paid"' not in text


def test_a_run_whose_code_raises_says_why_it_failed(
    studio: LiveStudio, team: str, operator: SignedInClient
) -> None:
    url = instance_url(start(studio, team, "pages-raises", "x-1", {"id": "o-9"}))
    text = page_until(operator, url, lambda t: 'id="instance-failure"' in t)
    failure = re.search(r'id="instance-failure">(.*?)</dd>', text, re.S)
    assert failure, text
    assert failure.group(1) == (
        "<code>workflow-error</code> at workflow: LookupError: no such order: o-9"
    )


def test_a_run_that_continued_as_new_links_to_its_successor_and_back(
    studio: LiveStudio, team: str, operator: SignedInClient
) -> None:
    first = start(studio, team, "pages-renewal", "n-1", 1)
    successor = f"{first}+2"
    text = page_until(operator, instance_url(first), lambda t: 'id="successor-link"' in t)
    assert f'<a href="{instance_url(successor)}" id="successor-link">' in text
    back = page_until(operator, instance_url(successor), lambda t: "status-completed" in t)
    assert f'<a href="{instance_url(first)}" id="predecessor-link">' in back
    assert 'id="successor-link"' not in back
    shown = operator.get(f"/api{instance_url(successor)}").json()
    assert (shown["predecessor_id"], shown["successor_id"]) == (first, None)


def test_a_run_whose_spawn_nobody_published_says_so_not_that_its_code_differs(
    studio: LiveStudio, team: str, operator: SignedInClient
) -> None:
    url = instance_url(start(studio, team, "pages-ghostly", "g-1"))
    text = page_until(operator, url, lambda t: 'id="journal-divergence"' in t)
    banner = re.search(r'id="journal-divergence".*?</div>', text, re.S)
    assert banner, text
    assert "a workflow it spawns has no published version to start." in banner.group(0)
    assert "Publish that workflow (in this team), then retry" in banner.group(0)
    assert "code differs" not in banner.group(0)
    notice = re.search(r'<dd id="instance-dead-letters" class="warn">(.*?)</dd>', text)
    assert notice and notice.group(1).startswith("decision (<code>spawn-definition-not-found")


def test_a_divergent_run_is_parked_with_a_banner_that_says_where(
    studio: LiveStudio, team: str, operator: SignedInClient
) -> None:
    run = start(studio, team, "pages-switch", "s-1")
    url = instance_url(run)
    page_until(operator, url, lambda t: "await.go.1" in t)
    code_app.ROUTE["first"] = "prepare-again"
    try:
        token = csrf_token(operator.get(url))
        sent = operator.form(f"{url}/signals/go", {"_csrf": token, "payload": "", **WHY})
        assert sent.status_code == 303, sent.text
        text = page_until(operator, url, lambda t: 'id="journal-divergence"' in t)
    finally:
        code_app.ROUTE["first"] = "prepare"
    banner = re.search(r'id="journal-divergence".*?</div>', text, re.S)
    assert banner and "journal divergence: expected step &#39;prepare&#39;" in banner.group(0)
    assert "this run&#39;s code differs from its journal." in banner.group(0)
    assert "prepare-again" in banner.group(0)


def test_the_json_api_starts_signals_and_reads_a_code_run(
    studio: LiveStudio, team: str, operator: SignedInClient
) -> None:
    operator.headers["X-CSRF-Token"] = operator.csrf
    started = operator.post(
        "/api/instances",
        json={
            "definition": "pages-saga",
            "version": "1",
            "instance_id": "a-1",
            "input": {"sku": "cup"},
        },
    )
    assert started.status_code == 201, started.text
    run = started.json()["id"]
    assert run == "pages-saga/a-1"
    refused = operator.post(
        "/api/instances", json={"definition": "pages-saga", "version": "1", "instance_id": "a/1"}
    )
    assert refused.status_code == 422
    assert refused.json()["error"] == "A run id is a non-empty string without '/'."
    api = f"/api{instance_url(run)}"
    page_until(operator, instance_url(run), lambda t: "race.1" in t)
    sent = operator.post(f"{api}/signals", json={"step": "cancelled", "signal_id": "api-1", **WHY})
    assert sent.status_code == 200, sent.text
    page_until(operator, instance_url(run), lambda t: "charge#1" in t)
    journal = operator.get(api).json()["journal"]
    assert [e["key"] for e in journal["entries"]][:3] == ["reserve.1", "race.1", "charge.1"]
    assert journal["entries"][2]["step_id"] == "pages-saga/a-1/charge#1.1"
    assert journal["divergence"] == ""
    history = operator.get(f"{api}/history").json()
    kinds = [event["kind"] for event in history["events"]]
    assert "wait_resolved" in kinds and "activity_scheduled" in kinds


def test_a_code_workflow_is_published_from_its_code_never_drafted_here(
    studio: LiveStudio, team: str
) -> None:
    """The version page's *New draft from this version* opened a code workflow in the
    step-list editor as an empty, valid draft, which published as a copy that no lint
    or journal replay had checked; a new version of a code workflow comes from its code."""
    author = studio.client(studio.user(team, Role.AUTHOR))
    author.headers["X-CSRF-Token"] = author.csrf
    page = author.get("/definitions/pages-saga/versions/1").text
    assert "New draft from this version" not in page
    assert "wayline definition publish --app MODULE:APP" in page
    refused = author.form("/definitions/pages-saga/versions/1/draft", follow_redirects=True)
    assert refused.status_code == 422 and "pages-saga@1 is not drafted here" in refused.text
    answer = author.post("/api/drafts", json={"from_name": "pages-saga", "from_version": "1"})
    assert answer.status_code == 422 and FROM_ITS_CODE in answer.json()["error"]
    document = author.get("/definitions/pages-saga/versions/1/export").json()
    document["version"] = "2"
    checked = author.post("/api/definitions/validate", json={"document": document}).json()
    assert not checked["valid"] and [p["message"] for p in checked["problems"]] == [FROM_ITS_CODE]
    published = author.post("/api/definitions", json={"document": document})
    assert published.status_code == 422, published.text
    versions = author.get("/api/definitions/pages-saga").json()
    assert [v["version"] for v in versions] == ["1"]
