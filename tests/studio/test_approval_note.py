"""An approved step, or a signal a person sent, says who and when; it said "received
500a1ab8…", the command's id, which told a reader nothing."""

from __future__ import annotations

import re
import uuid

import pytest

from engine.decide.operator_actions import Action
from studio.instance_urls import instance_url
from studio.roles import Role
from tests.studio.live import LiveStudio

WHEN = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"


@pytest.mark.parametrize(
    ("kind", "action", "said"),
    [("approval", Action.APPROVE, "approved"), ("signal", Action.SIGNAL, "sent")],
)
def test_a_step_a_person_filled_names_who_and_when(
    studio: LiveStudio, kind: str, action: Action, said: str
) -> None:
    team = studio.team("approvals")
    name = f"approvals.{uuid.uuid4().hex[:6]}"
    approved = f"{said} by seed {WHEN}"
    sign = {
        "name": "sign",
        "kind": kind,
        "target": "ok",
        "timeout": "1h",
        "input_limit": 1024,
    }
    wait = {"name": "later", "kind": "timer", "timeout": "1h"}
    document = {"name": name, "version": "1", "mode": "orchestration", "steps": [sign, wait]}
    studio.publish(team, document)
    instance_id = studio.start(team, name)
    studio.command(instance_id, action, "looks right", step="sign")
    viewer = studio.client(studio.user(team, Role.VIEWER))

    page = viewer.get(instance_url(instance_id)).text
    row = re.search(r'<tr id="step-row-sign".*?</tr>', page, re.S).group(0)
    assert re.search(approved, row), row
    assert "received" not in row
    steps = viewer.get(f"/api{instance_url(instance_id)}").json()["steps"]
    [note] = [s["note"] for s in steps if s["step"] == "sign"]
    assert re.fullmatch(approved, note), "the API's step note says the same"
