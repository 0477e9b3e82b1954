"""Machines over HTTP: the definition list, versions and their diff, the version page's
state diagram, and the instance list, page and API of an execution, beside step lists.

The machine's worker side is not built yet, so executions are written as its runtime
will write them (``LiveStudio.start_machine`` and ``machine_event``).
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

import pytest
from markupsafe import escape

from engine.model.events import EventKind
from studio.definitions import drafts
from studio.instance_urls import instance_url
from studio.machines import edits
from studio.roles import Role
from tests.studio.live import LiveStudio, SignedInClient, definition
from tests.unit.machines import approval_document

K = EventKind
NAME = "approval_pages"


def second_version() -> dict[str, Any]:
    """Version 2: an escalation state and edge, a longer timer, more attempts, and
    Rejected keeps a code; InReview can no longer loop on itself."""
    document = approval_document()
    document.update(name=NAME, version="2", max_attempts=5, timers={"InReview": 120})
    document["state"]["variants"].append({"name": "Escalated", "fields": {"to": "text"}})
    document["state"]["variants"][3]["fields"]["code"] = "integer"
    document["transitions"] = {
        "Submitted": ["InReview"],
        "InReview": ["Approved", "Rejected", "Expired", "Escalated"],
        "Escalated": ["Approved", "Rejected"],
    }
    return document


@pytest.fixture(scope="module")
def team(studio: LiveStudio) -> str:
    team = studio.team("machines")
    studio.publish(team, {**approval_document(), "name": NAME})
    studio.publish(team, second_version())
    studio.publish(team, definition("steps.beside"))
    return team


def test_the_definition_list_shows_a_machine_beside_step_lists(viewer: SignedInClient) -> None:
    page = viewer.get("/definitions")
    assert page.status_code == 200
    row = re.search(rf"<tr[^>]*>(?:(?!</tr>).)*{NAME}(?:(?!</tr>).)*</tr>", page.text, re.S)
    assert row and "5 states" not in row.group(0) and "6 states" in row.group(0)
    assert "steps.beside" in page.text


def test_the_version_page_draws_the_state_diagram(viewer: SignedInClient) -> None:
    page = viewer.get(f"/definitions/{NAME}/versions/1")
    assert page.status_code == 200
    assert 'class="graph state-diagram"' in page.text
    for state in ("Submitted", "InReview", "Approved", "Rejected", "Expired"):
        assert f'id="state-{state}"' in page.text
    assert re.search(r'id="state-Submitted" class="[^"]*\binitial\b', page.text)
    assert re.search(r'id="state-Expired" class="[^"]*\bterminal-state\b', page.text)
    assert "timer 1 min" in page.text and 'id="state-entry"' in page.text
    assert re.search(r'id="edge-InReview--InReview" class="[^"]*route-self', page.text)
    assert 'id="states-outline"' in page.text and "at most 3 attempts per state" in page.text


def test_two_versions_diff_by_states_edges_timers_and_bounds(viewer: SignedInClient) -> None:
    page = viewer.get(f"/definitions/{NAME}", params={"left": "1", "right": "2"})
    assert page.status_code == 200
    assert re.search(r'id="right-state-Escalated" class="[^"]*diff-added', page.text)
    assert re.search(r'id="left-edge-InReview--InReview" class="[^"]*diff-removed', page.text)
    assert re.search(r'id="right-edge-Escalated--Approved" class="[^"]*diff-added', page.text)
    assert "State or edge" in page.text and "new edge" in page.text
    api = viewer.get(f"/api/definitions/{NAME}/diff", params={"left": "1", "right": "2"})
    body = api.json()
    top = {c["field"]: (c["before"], c["after"]) for c in body["top"]}
    assert top["max_attempts"] == (3, 5)
    changes = {(s["step"], s["kind"], s["change"]) for s in body["steps"]}
    assert {
        ("Escalated", "state", "added"),
        ("InReview", "state", "changed"),
        ("Rejected", "state", "changed"),
        ("InReview → Escalated", "edge", "added"),
        ("InReview → InReview", "edge", "removed"),
    } <= changes
    in_review = next(s for s in body["steps"] if s["step"] == "InReview")
    assert [(f["field"], f["before"], f["after"]) for f in in_review["fields"]] == [
        ("timer", 60, 120)
    ]


def test_an_execution_is_listed_filtered_and_drawn_with_its_state(
    studio: LiveStudio, team: str, viewer: SignedInClient
) -> None:
    execution = studio.start_machine(team, NAME, {"input": "doc", "parent": "p-1"})
    studio.machine_event(
        execution, K.STATE_ENTERED, step="InReview", attempt=1, data='{"reminders":2}'
    )
    studio.machine_event(
        execution, K.TIMER_SCHEDULED, step="InReview", due_at=timedelta(seconds=60)
    )
    listed = viewer.get("/instances", params={"definition": NAME})
    assert listed.status_code == 200 and execution in listed.text
    assert viewer.get("/instances", params={"definition": "steps.beside"}).status_code == 200
    assert execution not in viewer.get("/instances", params={"definition": "steps.beside"}).text

    page = viewer.get(instance_url(execution))
    assert page.status_code == 200
    assert re.search(r'id="state-InReview" class="[^"]*\bcurrent state-waiting-timer\b', page.text)
    assert re.search(r'id="edge-Submitted--InReview" class="[^"]*\btaken last\b', page.text)
    assert 'id="machine-current">InReview<' in page.text
    assert 'id="machine-timer-due"' in page.text and "2 of 8" not in page.text
    assert "1 of 8" in page.text and "reminders" in page.text
    assert "waiting in InReview" in page.text

    studio.machine_event(execution, K.TIMER_FIRED, step="InReview", later=timedelta(seconds=61))
    studio.machine_event(
        execution,
        K.ADVANCE_FAILED,
        step="InReview",
        attempt=1,
        code="db-down",
        due_at=timedelta(seconds=1),
    )
    page = viewer.get(instance_url(execution))
    assert 'id="advance-failures"' in page.text and "db-down" in page.text
    assert re.search(r'id="state-InReview" class="[^"]*\bstate-retry-waiting\b', page.text)

    api = viewer.get(f"/api{instance_url(execution)}")
    assert api.status_code == 200


def test_an_execution_page_shows_no_signals_races_or_children(
    studio: LiveStudio, team: str, viewer: SignedInClient
) -> None:
    """A machine takes no signal, runs no race and starts no child: its page has no such
    sections (nor does an action's answer swap them in); a step list's page keeps them."""
    execution = studio.start_machine(team, NAME, {"input": "doc", "parent": "p-parts"})
    steps = studio.start(team, "steps.beside", input={})
    machine_page = viewer.get(instance_url(execution)).text
    steps_page = viewer.get(instance_url(steps)).text
    for part in ("signals", "races", "children"):
        assert f'id="{part}-title"' not in machine_page, part
        assert f'id="instance-{part}"' not in machine_page, part
        assert f'id="{part}-title"' in steps_page, part
        assert f'id="instance-{part}"' in steps_page, part
    for part in ("attempts", "timers", "compensations", "audit"):
        assert f'id="{part}-title"' in machine_page, part

    operator = studio.client(studio.user(team, Role.OPERATOR))
    answer = operator.post(
        instance_url(execution) + "/actions/pause",
        data={"_csrf": operator.csrf, "reason": "hold it"},
        headers={"HX-Request": "true", "X-CSRF-Token": operator.csrf},
    )
    assert answer.status_code == 200 and 'id="instance-audit"' in answer.text
    for part in ("signals", "races", "children"):
        assert f'id="instance-{part}"' not in answer.text, part


def test_a_dead_execution_is_marked_dead_where_it_stopped(
    studio: LiveStudio, team: str, viewer: SignedInClient
) -> None:
    execution = studio.start_machine(team, NAME, {"input": "doc", "parent": "p-2"})
    studio.machine_event(execution, K.FAILED, code="dead-authorization")
    page = viewer.get(instance_url(execution))
    assert re.search(r'id="state-Submitted" class="[^"]*\bcurrent state-failed\b', page.text)
    assert 'id="machine-status">dead<' in page.text
    # The timers part speaks of the current state's timer: it never says that no timer
    # was scheduled, which a history with InReview's timers would contradict.
    assert "No timer scheduled" not in page.text
    assert "Submitted, the current state, has no timer." in page.text
    assert viewer.get("/instances", params={"definition": NAME, "view": "all"}).status_code == 200


def test_the_start_form_starts_a_machine_in_its_initial_state(
    studio: LiveStudio, team: str
) -> None:
    operator = studio.client(studio.user(team, Role.OPERATOR))
    form = operator.get("/instances/new", params={"definition": NAME, "version": "1"})
    assert form.status_code == 200
    # The hint says what a machine starts from (it has no activities to receive it),
    # in the paragraph and in the option's data-hint that the page swaps in.
    shown = re.search(r'id="start-input-help">([^<]*)</p>', form.text)
    assert shown and shown.group(1).startswith(
        "A state machine starts from {&#34;input&#34;: ..., &#34;parent&#34;: &#34;PARENT&#34;}"
        ": its input, of type text, and the id of the row the execution works on"
    ), shown
    assert f'data-hint="{shown.group(1)}"' in form.text
    started = operator.form(
        "/instances", {"definition": f"{NAME}@1", "input": '{"input": "doc", "parent": "p-3"}'}
    )
    assert started.status_code == 303
    page = operator.get(started.headers["location"])
    assert re.search(r'id="state-Submitted" class="[^"]*\bcurrent state-running\b', page.text)
    assert "running in Submitted" in page.text


def test_the_start_form_keeps_a_refused_machine_start_and_says_why(
    studio: LiveStudio, team: str
) -> None:
    """Start data the machine does not take, or a parent that already has an active
    execution, brings the form back with the reason and the input as typed (never an
    error page, nor a 500), naming the active execution by the id the team sees."""
    operator = studio.client(studio.user(team, Role.OPERATOR))
    for typed, said, status in (
        ("{}", "a machine&#39;s start data needs input and parent", 422),
        (  # who submitted it is the submit's to record, from its caller
            '{"input": "doc", "parent": "p-6", "owner": "someone-else", "scope": "admin"}',
            "a start&#39;s data may not set owner, scope: who submitted an execution is "
            "recorded by a submit",
            422,
        ),
        ('{"input": 5, "parent": "p-5"}', "the input must be text", 422),
        ('{"input": "doc", "parent": "p-5"}', None, 303),
        (
            '{"input": "other", "parent": "p-5"}',
            "already has an active execution for parent p-5",
            409,
        ),
    ):
        answer = operator.form("/instances", {"definition": f"{NAME}@1", "input": typed})
        assert answer.status_code == status, answer.text
        if said is not None:
            assert said in answer.text
            assert str(escape(typed)) in answer.text
    started = answer.text.split("for parent p-5: ")[1].split(";")[0]
    assert ":" not in started and operator.get(instance_url(started)).status_code == 200


def test_importing_a_machine_previews_its_diagram(studio: LiveStudio, team: str) -> None:
    author = studio.client(studio.user(team, Role.AUTHOR))
    preview = author.form("/definitions/import", {"document": json.dumps(approval_document())})
    assert preview.status_code == 200
    assert "document_approval@1</strong>, 5 states" in preview.text
    assert 'id="preview-state-InReview"' in preview.text


def test_the_problems_pill_of_a_machine_draft_opens_the_list_of_them(
    studio: LiveStudio, team: str
) -> None:
    """Not only a count: each problem, linked to the state it concerns (the machine's
    own problems last), so the pill says where to go."""
    document = edits.add_state(approval_document(), "Orphan", "").document
    document["max_transitions"] = 0
    draft = studio.run(lambda store: drafts.create_draft(store, team, document, "", "x"))
    author = studio.client(studio.user(team, Role.AUTHOR))
    page = author.get(f"/drafts/{draft.draft_id}").text
    pill = re.search(
        r'<details class="problems-toggle" id="draft-problems">.*?</details>', page, re.S
    )
    assert pill, "the pill opens a list"
    summary = re.search(r"<summary>(.*?)</summary>", pill.group(0), re.S).group(1)
    assert '<span class="pill error">2 problems</span>' in summary
    items = [
        re.sub(r"<[^>]+>", "", li).strip() for li in re.findall(r"<li.*?</li>", pill.group(0), re.S)
    ]
    assert items[0].startswith("Orphan transitions ") and "Orphan" in items[0][8:]
    assert items[1].startswith("max_transitions must be")
    base = f"/drafts/{draft.draft_id}"
    assert f'<a href="{base}?step=Orphan">Orphan</a>' in pill.group(0)
