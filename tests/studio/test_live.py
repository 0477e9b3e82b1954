"""Following instances live: what it costs the database, and what the stream sends.

The watcher serves every open page with one row probe per interval and nothing at all
when no page is open; only a page whose instance moved reads history, and only the new
events. The stream sends the node classes, the changed parts and the new history rows,
then ``end`` when the instance has ended.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Callable
from datetime import timedelta

import httpx
import pytest

from engine import Client, Queries
from engine.decide.operator_actions import Action
from engine.model.validation import parse_definition
from engine.store.store import Store
from studio.instances.live import InstanceWatcher
from studio.instances.live_pages import ACCESS_ENDED
from studio.instances.replays import replay_cache
from studio.roles import Role
from tests.e2e.conftest import until
from tests.studio.live import LiveStudio, SignedInClient, definition

INTERVAL = timedelta(milliseconds=50)
IDLE_POLLS = 10
WAIT_SECONDS = 20.0
"""Bounds how long a failure takes; a passing wait returns as soon as its event comes."""


@pytest.fixture
def store(default_store: Store) -> Store:
    return default_store


async def started(store: Store) -> tuple[Client, str]:
    client = Client(store)
    await client.publish(parse_definition(definition("watched")))
    await client.start("watched", "w-1", {})
    return client, "w-1"


async def test_idle_pages_share_one_row_probe_and_no_page_costs_nothing(store: Store) -> None:
    client, instance_id = await started(store)
    watcher = InstanceWatcher(Queries(store), INTERVAL)
    replays = replay_cache(store, client.registries)
    first = await replays.load(instance_id)
    read_at_start = replays.events_read
    loop = asyncio.get_running_loop()
    began = loop.time()
    async with (
        watcher.follow(instance_id, first.state.sequence) as one,
        watcher.follow(instance_id, first.state.sequence) as two,
    ):
        await until(lambda: watcher.polls >= IDLE_POLLS, what=f"{IDLE_POLLS} idle polls")
        idle_polls, intervals = watcher.polls, (loop.time() - began) / INTERVAL.total_seconds()
        # One poll per interval for both pages together (and one per follow's nudge):
        # a poll per page would make about twice as many. Load only makes fewer.
        assert idle_polls <= intervals + 3, (idle_polls, intervals)
        assert not one.woken.is_set() and not two.woken.is_set()
        assert replays.events_read == read_at_start  # no history read while idle

        await client.command(instance_id, Action.PAUSE, "alice", "look")
        assert await one.wait(WAIT_SECONDS) and await two.wait(WAIT_SECONDS)
        moved = await replays.load(instance_id, at_least=one.known)
        assert replays.events_read == read_at_start + 2  # just the two new events
        assert moved.events_after(first.state.sequence) is not None
        assert [e.kind.label for e in moved.events_after(first.state.sequence)] == [
            "operator_command_recorded",
            "paused",
        ]
    after_leaving = watcher.polls
    assert watcher.following == 0
    # Nobody follows: the poll ends by itself (within an interval), with no query made.
    poll = watcher._task
    assert poll is not None
    await asyncio.wait_for(asyncio.shield(poll), WAIT_SECONDS)
    assert watcher.polls == after_leaving
    await watcher.close()


def read_stream(
    client: SignedInClient,
    url: str,
    found: list[tuple[str, str]],
    opened: threading.Event | None = None,
    headers: dict[str, str] | None = None,
) -> None:
    """Collect (event, data) pairs from an SSE stream until it ends; ``opened`` is set
    once its answer's status is in."""
    event, data = "", []
    with client.stream("GET", url, timeout=httpx.Timeout(30.0), headers=headers) as response:
        found.append(("status", str(response.status_code)))
        if opened is not None:
            opened.set()
        for line in response.iter_lines():
            if line.startswith("event:"):
                event = line.split(":", 1)[1].strip()
            elif line.startswith("data:"):
                data.append(line.split(":", 1)[1].strip())
            elif line == "" and event:
                found.append((event, "\n".join(data)))
                event, data = "", []
                if found[-1][0] == "end":
                    return


def test_the_stream_sends_changed_parts_and_ends_with_the_instance(studio: LiveStudio) -> None:
    team, _, instance_id = studio.one_running("live")
    viewer = studio.client(studio.user(team, Role.VIEWER))
    sequence = viewer.get(f"/api/instances/{instance_id}").json()["sequence"]
    found: list[tuple[str, str]] = []
    reader = threading.Thread(
        target=read_stream,
        args=(viewer, f"/instances/{instance_id}/live?after={sequence}", found),
        daemon=True,
    )
    reader.start()
    studio.command(instance_id, Action.PAUSE, "watch me")
    studio.command(instance_id, Action.TERMINATE, "enough")
    reader.join(20)
    assert not reader.is_alive(), found
    assert found[0] == ("status", "200") and found[-1][0] == "end"
    updates = [json.loads(data) for event, data in found if event == "update"]
    assert updates and updates[-1]["status"] == "terminated" and updates[-1]["terminal"]
    audit = "".join(u["parts"].get("instance-audit", {}).get("html", "") for u in updates)
    assert "watch me" in audit and "enough" in audit
    assert any(n["id"] == "step-reserve" and "state-" in n["class"] for n in updates[0]["nodes"])
    rows = [row for u in updates for row in (u["events"] or [])]
    assert any('id="event-' in row and "kind-terminated" in row for row in rows)

    ended = viewer.get(f"/instances/{instance_id}/live?after={updates[-1]['sequence']}")
    assert "event: end" in ended.text  # an ended instance: the stream says so and stops


def follow_until_access_ends_in(
    studio: LiveStudio,
    team: str,
    reader: SignedInClient,
    end_access: Callable[[], None],
    headers: dict[str, str] | None = None,
) -> list[tuple[str, str]]:
    """Open the live stream of a new instance of ``team`` as ``reader`` (a session, or
    ``headers`` with a token), ``end_access`` while it is open, then move the instance
    on (paused, then terminated, which ends any stream): what the stream sent."""
    instance_id = studio.start(team, studio.publish_new(team, "gone"))
    found: list[tuple[str, str]] = []
    opened = threading.Event()
    sequence = reader.get(f"/api/instances/{instance_id}", headers=headers).json()["sequence"]
    url = f"/instances/{instance_id}/live?after={sequence}"
    thread = threading.Thread(
        target=read_stream, args=(reader, url, found, opened, headers), daemon=True
    )
    thread.start()
    assert opened.wait(WAIT_SECONDS) and found[0] == ("status", "200"), found
    end_access()
    studio.command(instance_id, Action.PAUSE, "after access ended")
    studio.command(instance_id, Action.TERMINATE, "after access ended")
    thread.join(WAIT_SECONDS)
    assert not thread.is_alive(), found
    return found


def test_a_signed_out_pages_stream_ends_and_sends_nothing_more(studio: LiveStudio) -> None:
    """Before, a page left open went on receiving its instance's updates (payloads,
    history, audit) after its session was signed out, for up to the stream's limit."""
    team = studio.team("gone")
    viewer = studio.client(studio.user(team, Role.VIEWER))
    twin = studio.client()  # the same session in another tab, which signs out
    twin.cookies.set("wayline_session", viewer.cookies["wayline_session"])
    twin.csrf = viewer.csrf

    def sign_out() -> None:
        assert twin.form("/logout").status_code == 303
        assert twin.get("/api/me").status_code == 401

    found = follow_until_access_ends_in(studio, team, viewer, sign_out)
    assert found[1:] == [("end", ACCESS_ENDED)], found


def test_a_revoked_tokens_stream_ends_and_sends_nothing_more(studio: LiveStudio) -> None:
    team = studio.team("gone")
    admin = studio.client(studio.user(team, Role.ADMIN))
    page = admin.form("/settings/tokens", {"label": "watch", "role": "viewer"})
    token = re.search(r'id="new-token">([^<]+)<', page.text).group(1)

    def revoke() -> None:
        revoked = admin.form(f"/settings/tokens/{token.split('_')[1]}/revoke")
        assert revoked.status_code == 303

    bearer = {"Authorization": f"Bearer {token}"}
    found = follow_until_access_ends_in(studio, team, studio.client(), revoke, bearer)
    assert found[1:] == [("end", ACCESS_ENDED)], found
