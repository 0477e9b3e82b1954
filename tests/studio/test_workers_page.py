"""Workers over HTTP: live or silent, their targets and concurrency, and the leases they
hold on the team's work (never another team's)."""

from __future__ import annotations

import uuid
from datetime import timedelta

from engine.model.transitions import WorkKind
from engine.store import leases, workers
from studio.roles import Role
from tests.studio.live import LiveStudio, definition


def test_workers_show_their_targets_and_the_teams_leases(studio: LiveStudio) -> None:
    team = studio.team("fleet")
    name = f"leased.{uuid.uuid4().hex[:6]}"
    document = definition(name)
    target = f"probe.{uuid.uuid4().hex[:6]}"
    document["steps"][0]["target"] = target
    studio.publish(team, document)
    instance_id = studio.start(team, name)
    worker_id = f"probe-{uuid.uuid4().hex[:6]}"

    async def lease(store) -> int:
        await workers.heartbeat(store, worker_id, [target], 3, "probe-host", 42)
        [claimed] = await leases.claim(
            store, worker_id, timedelta(minutes=5), 1, [WorkKind.ACTIVITY], [target]
        )
        return claimed.token

    token = studio.run(lease)
    viewer = studio.client(studio.user(team, Role.VIEWER))
    found = {w["worker_id"]: w for w in viewer.get("/api/workers").json()}
    mine = found[worker_id]
    assert mine["targets"] == [target] and mine["concurrency"] == 3 and mine["live"]
    assert [(x["instance_id"], x["step"], x["fencing_token"]) for x in mine["leases"]] == [
        (instance_id, "reserve", token)
    ]
    page = viewer.get("/workers")
    assert page.status_code == 200 and worker_id in page.text and instance_id in page.text
    assert 'hx-trigger="every 5s"' in page.text

    attempts = viewer.get(f"/api/instances/{instance_id}").json()["attempts"]
    assert attempts[0]["lease_owner"] == worker_id and attempts[0]["fencing_token"] == token

    stranger = studio.client(studio.user(studio.team("strangers"), Role.VIEWER))
    theirs = {w["worker_id"]: w for w in stranger.get("/api/workers").json()}
    assert theirs[worker_id]["leases"] == []  # the worker is shared, the team's work is not
