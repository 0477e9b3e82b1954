"""An approved step says who approved it and when; it said "received 500a1ab8…", the
approve command's id, which told a reader nothing."""

from __future__ import annotations

import re
import uuid

from engine.decide.operator_actions import Action
from studio.instance_urls import instance_url
from studio.roles import Role
from tests.studio.live import LiveStudio

APPROVED = r"approved by seed \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"


def test_an_approval_names_who_approved_it_and_when(studio: LiveStudio) -> None:
    team = studio.team("approvals")
    name = f"approvals.{uuid.uuid4().hex[:6]}"
    sign = {
        "name": "sign",
        "kind": "approval",
        "target": "ok",
        "timeout": "1h",
        "input_limit": 1024,
    }
    wait = {"name": "later", "kind": "timer", "timeout": "1h"}
    document = {"name": name, "version": "1", "mode": "orchestration", "steps": [sign, wait]}
    studio.publish(team, document)
    instance_id = studio.start(team, name)
    studio.command(instance_id, Action.APPROVE, "looks right", step="sign")
    viewer = studio.client(studio.user(team, Role.VIEWER))

    page = viewer.get(instance_url(instance_id)).text
    row = re.search(r'<tr id="step-row-sign".*?</tr>', page, re.S).group(0)
    assert re.search(APPROVED, row), row
    assert "received" not in row
    steps = viewer.get(f"/api{instance_url(instance_id)}").json()["steps"]
    [note] = [s["note"] for s in steps if s["step"] == "sign"]
    assert re.fullmatch(APPROVED, note), "the API's step note says the same"
