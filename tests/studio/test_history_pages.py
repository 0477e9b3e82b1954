"""Paging a long history in the studio: from where it starts, from where it stands now
(its newest events) and back, never skipping or repeating an event."""

from __future__ import annotations

import re

from studio.instance_urls import instance_url
from tests.studio.live import LiveStudio, SignedInClient
from tests.studio.test_instances import pad_history

HTMX = {"HX-Request": "true"}
LIMIT = 40


def shown(fragment: str) -> list[int]:
    return [int(n) for n in re.findall(r'<tr id="event-(\d+)"', fragment)]


def link(fragment: str, name: str) -> str | None:
    found = re.search(rf'id="history-{name}" href="([^"]+)"', fragment)
    return found.group(1).replace("&amp;", "&") if found else None


def test_the_newest_events_are_one_click_away_and_pages_lead_back_to_the_first(
    studio: LiveStudio, team: str, viewer: SignedInClient
) -> None:
    instance_id = studio.start(team, studio.publish_new(team, "paged"))
    studio.run(lambda store: pad_history(store, instance_id, 500))
    url = instance_url(instance_id)
    last = viewer.get(f"/api{url}").json()["sequence"]
    first = viewer.get(f"{url}/history?limit={LIMIT}", headers=HTMX).text
    assert shown(first) == list(range(1, LIMIT + 1)) and link(first, "previous") is None

    latest_url = link(first, "latest")
    assert latest_url, "the first page of a long history links to its newest events"
    latest = viewer.get(latest_url, headers=HTMX).text
    assert shown(latest)[-1] == last and not link(latest, "next") and not link(latest, "latest")
    seen: list[int] = []
    page_url: str | None = latest_url
    while page_url:
        page = viewer.get(page_url, headers=HTMX).text
        seen[:0] = shown(page)
        page_url = link(page, "previous")
    assert seen[-1] == last and seen == list(range(1, last + 1))
