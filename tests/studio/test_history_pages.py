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


def test_a_cursor_past_the_last_event_is_refused_saying_how_many_there_are(
    studio: LiveStudio, team: str, viewer: SignedInClient
) -> None:
    """A position copied from a longer instance (or typed) answered an empty page, in the
    API and in the studio alike, as if the history held nothing there."""
    longer = studio.start(team, studio.publish_new(team, "longer"))
    studio.run(lambda store: pad_history(store, longer, 60))
    url = instance_url(studio.start(team, studio.publish_new(team, "short")))
    last = viewer.get(f"/api{url}").json()["sequence"]
    copied = viewer.get(f"/api{instance_url(longer)}").json()["sequence"] - 5
    rule = (
        f"after {copied} is past the end of this history: the instance has {last} events, "
        f"so after is from 0 (the first page) to {last}"
    )

    refused = viewer.get(f"/api{url}/history", params={"after": copied})
    assert refused.status_code == 422
    assert refused.json()["problems"] == [{"path": "after", "message": rule}]
    at_the_end = viewer.get(f"/api{url}/history", params={"after": last})
    assert at_the_end.status_code == 200 and at_the_end.json()["events"] == []

    for path, headers in (
        (f"{url}/history", HTMX),  # the section a pager link swaps in
        (f"{url}/history", {}),  # the history page, opened from a copied link
        (url, {}),  # the instance page, whose history section takes the same cursor
    ):
        answer = viewer.get(path, params={"after": copied}, headers=headers)
        assert answer.status_code == 422, path
        said = re.search(r'id="history-refused" role="alert">([^<]*)<', answer.text)
        assert said and said.group(1) == f"No page: {rule}. ", path
        assert shown(answer.text) == [], path
        first = viewer.get(link(answer.text, "first"), headers=HTMX).text
        assert shown(first) == list(range(1, last + 1)), path
    page = viewer.get(url, params={"after": copied}).text
    assert 'id="instance-position"' in page, "the rest of the page is there"
