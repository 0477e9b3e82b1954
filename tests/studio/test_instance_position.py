"""The instance page's position line writes the instants it names as the rest of the
page does (``2026-12-06 07:39:35 UTC``); it wrote the engine's RFC 3339 text
(``…T07:40:27.105098Z``), which ``wayline inspect`` keeps."""

from __future__ import annotations

import re
import uuid

from engine.api.client import Client
from engine.store.store import Store
from studio.instance_urls import instance_url
from studio.roles import Role
from tests.studio.live import LiveStudio

PAGE_TIME = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"
CLI_TIME = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z"


def test_a_timers_due_time_reads_as_the_page_writes_times(studio: LiveStudio) -> None:
    team = studio.team("position")
    name = f"position.{uuid.uuid4().hex[:6]}"
    timer = {"name": "cool_off", "kind": "timer", "timeout": "5m"}
    studio.publish(team, {"name": name, "version": "1", "mode": "orchestration", "steps": [timer]})
    instance_id = studio.start(team, name)
    viewer = studio.client(studio.user(team, Role.VIEWER))

    page = viewer.get(instance_url(instance_id)).text
    line = re.search(r'id="instance-position">([^<]*)<', page).group(1)
    assert re.fullmatch(rf"event \d+ · timer cool_off is due at {PAGE_TIME}", line), line
    said = viewer.get(f"/api{instance_url(instance_id)}").json()["position"]
    assert re.fullmatch(f"timer cool_off is due at {PAGE_TIME}", said), "the API says the same"

    async def awaiting(store: Store) -> str:
        client = Client(store)
        return await client.awaiting(await client.inspect(instance_id))

    cli = studio.run(awaiting)
    assert re.fullmatch(f"timer cool_off is due at {CLI_TIME}", cli), (
        "wayline inspect keeps RFC 3339"
    )
