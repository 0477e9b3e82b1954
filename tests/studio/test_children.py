"""A parent's children on its page and in the API (``engine.model.fan_out``): each
child's own status as every page shows an instance's, what happened to it, and how far
the fan-out has got, above the table."""

from __future__ import annotations

import html
import re
import uuid
from collections.abc import Iterator

import pytest

from engine.worker.activities import ActivityRegistry
from studio.instance_urls import instance_url
from tests.studio.live import LiveStudio, SignedInClient, serve_studio
from tests.studio.test_team_instance_ids import child_definitions, child_of, operator, seen, start


@pytest.fixture(scope="module")
def working(pg_dsn: str) -> Iterator[LiveStudio]:
    """A studio whose own worker starts children (they need no activity to start)."""
    with serve_studio(pg_dsn, worker_activities=ActivityRegistry()) as live:
        yield live


def children_part(client: SignedInClient, instance_id: str) -> str:
    """The children section of the instance's page: the count and the table."""
    page = client.get(instance_url(instance_id)).text
    found = re.search(r'<section[^>]*aria-labelledby="children-title".*?</section>', page, re.S)
    assert found, "the page has no children section"
    return html.unescape(found.group(0))


def test_a_parent_cancelled_with_its_child_shows_what_happened_to_it(
    working: LiveStudio,
) -> None:
    """The children table showed the parent's record of each child's start (``active``)
    and, once a cancel ended both, "no longer awaited": it shows the child's own status
    as a badge, says the child was cancelled with its parent, and counts the fan-out."""
    team = working.team("fan")
    client = operator(working, team)
    parent = f"order-{uuid.uuid4().hex[:6]}"
    assert start(client, child_definitions(working, team), parent).status_code == 201
    child_of(client, parent)
    running = children_part(client, parent)
    assert "children: 0 of 1 done, 1 running" in running
    assert '<span class="status status-running">running</span>' in running
    assert ">active<" not in running

    cancel = {"action": "cancel", "reason": "customer left"}
    assert client.post(f"/api{instance_url(parent)}/actions", json=cancel).status_code == 200
    ended = children_part(client, parent)
    assert '<p class="children-summary" id="children-summary">' in ended
    assert "children: 1 of 1 done (1 cancelled)" in ended
    assert '<span class="status status-cancelled">cancelled</span>' in ended
    assert "cancelled with its parent" in ended
    assert "no longer awaited" not in ended
    assert f'<a href="{instance_url(parent + "/kid")}">' in ended

    shown = seen(client, parent).json()
    assert shown["children_progress"] == {
        "total": 1,
        "done": 1,
        "counts": {"cancelled": 1},
        "summary": "children: 1 of 1 done (1 cancelled)",
    }
    [kid] = shown["children"]
    assert (kid["instance_status"], kid["outcome"], kid["said"]) == (
        "cancelled",
        "cancelled",
        "cancelled with its parent",
    )


def test_an_instance_without_children_has_no_count(working: LiveStudio) -> None:
    team = working.team("lone")
    client = operator(working, team)
    lone = f"lone-{uuid.uuid4().hex[:6]}"
    assert start(client, working.publish_new(team, "flow"), lone).status_code == 201
    assert seen(client, lone).json()["children_progress"] is None
    assert "children-summary" not in client.get(instance_url(lone)).text
