"""A step retried more often than the attempts table keeps (``KEEP_PER_STEP``): what
the instance page and its API say of its attempts, early and late.

A real worker runs the retries (a millisecond apart), so every attempt has the work row
a worker leaves behind, as on a long-running instance.
"""

from __future__ import annotations

import re
import uuid
from datetime import timedelta
from typing import Any

import pytest

from engine import ActivityFailure, ActivityRegistry, ActivityRequest
from engine.api.client import Client
from studio.instance_urls import instance_url
from studio.instances.attempts import KEEP_PER_STEP
from studio.instances.history import PAGE_EVENTS
from tests.studio.live import LiveStudio, SignedInClient

FAILURES = KEEP_PER_STEP + 5
"""Attempts that fail before one succeeds: more than the table keeps."""
TARGET = "retried.call"
WAIT = timedelta(seconds=60)

flaky = ActivityRegistry()


@flaky.activity(TARGET)
def call(request: ActivityRequest) -> Any:
    if request.attempt <= FAILURES:
        raise ActivityFailure("busy", f"attempt {request.attempt} busy", retryable=True)
    return {"ok": request.attempt}


@pytest.fixture(scope="module")
def retried(studio: LiveStudio, team: str) -> str:
    """An instance whose one step failed ``FAILURES`` times, then succeeded."""
    name = f"retried-{uuid.uuid4().hex[:6]}"
    retry = {"max_attempts": FAILURES + 1, "initial_delay": "1ms", "max_delay": "1ms"}
    step = {"name": "call", "kind": "activity", "target": TARGET, "timeout": "30s"}
    studio.publish(team, {"name": name, "version": "1", "steps": [step | {"retry": retry}]})
    instance_id = studio.start(team, name)
    with studio.worker(flaky):
        studio.run(lambda store: Client(store).wait(instance_id, WAIT))
    return instance_id


def test_earlier_attempts_are_never_shown_as_scheduled(
    retried: str, viewer: SignedInClient
) -> None:
    kept = list(range(FAILURES + 2 - KEEP_PER_STEP, FAILURES + 2))
    attempts = viewer.get(f"/api{instance_url(retried)}").json()["attempts"]
    assert [a["attempt"] for a in attempts] == kept
    assert [a["outcome"] for a in attempts] == ["failed"] * (KEEP_PER_STEP - 1) + ["succeeded"]
    page = viewer.get(instance_url(retried)).text
    rows = re.findall(r'data-attempt="activity:call:(\d+)"', page)
    assert [int(n) for n in rows] == kept


def test_the_table_says_which_earlier_attempts_it_leaves_out_and_where_they_are(
    retried: str, viewer: SignedInClient
) -> None:
    left_out = FAILURES + 1 - KEEP_PER_STEP
    attempts = viewer.get(f"/api{instance_url(retried)}").json()["attempts"]
    assert [a["earlier_attempts"] for a in attempts] == [left_out] + [0] * (KEEP_PER_STEP - 1)
    page = viewer.get(instance_url(retried)).text
    note = re.search(r'<tr class="earlier-attempts".*?</tr>', page, re.S)
    assert note and f"attempts 1 to {left_out} are not listed here" in note.group(0)
    history = re.search(r'href="([^"]+)">read them in its history', note.group(0))
    assert history and history.group(1) == f"{instance_url(retried)}/history?step=call"
    failed = viewer.get(f"/api{instance_url(retried)}/history?step=call&kind=attempt_failed")
    assert [e["attempt"] for e in failed.json()["events"]][:left_out] == list(
        range(1, left_out + 1)
    )


def test_an_attempt_links_to_its_event_beyond_the_first_history_page(
    retried: str, viewer: SignedInClient
) -> None:
    url = instance_url(retried)
    page = viewer.get(url).text
    last = re.search(rf'data-attempt="activity:call:{FAILURES + 1}".*?href="([^"]+)"', page, re.S)
    assert last, "the newest attempt links to its attempt_started event"
    started = viewer.get(f"/api{url}/history?kind=attempt_started&step=call&limit=1000")
    sequence = started.json()["events"][-1]["sequence"]
    assert sequence > PAGE_EVENTS, "the event is not on the instance page's history page"
    assert last.group(1) == f"{url}/history?after={sequence - 1}#event-{sequence}"
    target = viewer.get(last.group(1).partition("#")[0]).text
    assert f'id="event-{sequence}"' in target
