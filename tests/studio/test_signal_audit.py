"""A signal a person sends from the studio is audited like any operator action: who
sent it and why stand in the instance's audit trail (it recorded neither), a signal
without a reason is refused with nothing delivered, and the form posted twice delivers
once."""

from __future__ import annotations

import re
from typing import Any

import pytest

from engine.decide.operator_actions import Action
from studio.instance_urls import instance_url
from studio.roles import Role
from tests.studio.live import LiveStudio, SignedInClient

SIGNALLED = {
    "version": "1",
    "mode": "orchestration",
    "steps": [{"name": "go", "kind": "signal", "target": "go", "timeout": "1h", "input_limit": 64}],
}


@pytest.fixture(scope="module")
def signalled(studio: LiveStudio, team: str) -> str:
    name = "audited.signal"
    studio.publish(team, {"name": name, **SIGNALLED})
    return name


def detail(client: SignedInClient, instance_id: str) -> dict[str, Any]:
    return client.get(f"/api{instance_url(instance_id)}").json()


def test_a_signal_sent_from_the_page_names_its_sender_and_reason(
    studio: LiveStudio, team: str, signalled: str
) -> None:
    sender = studio.user(team, Role.OPERATOR)
    operator = studio.client(sender)
    instance_id = studio.start(team, signalled)
    url = f"{instance_url(instance_id)}/signals/go"
    form = {"_csrf": operator.csrf, "payload": '{"ok": true}', "signal_id": "form-1"}
    for _ in range(2):  # the button pressed twice: one signal, one audit record
        sent = operator.form(url, {**form, "reason": "the courier called"})
        assert sent.status_code == 303, sent.text
    shown = detail(operator, instance_id)
    assert [(a["action"], a["actor"], a["reason"], a["command_id"]) for a in shown["audit"]] == [
        ("signal", sender, "the courier called", "form-1")
    ]
    assert [s["signal_id"] for s in shown["signals"]] == ["form-1"]


def test_a_signal_without_a_reason_is_refused_and_not_delivered(
    studio: LiveStudio, team: str, signalled: str, operator: SignedInClient
) -> None:
    instance_id = studio.start(team, signalled)
    page = operator.form(
        f"{instance_url(instance_id)}/signals/go", {"_csrf": operator.csrf, "reason": "  "}
    )
    assert page.status_code == 422
    assert "a reason of 1 to 500 characters is required" in page.text
    api = operator.post(
        f"/api{instance_url(instance_id)}/signals",
        json={"step": "go", "reason": ""},
        headers={"X-CSRF-Token": operator.csrf},
    )
    assert api.status_code == 422
    shown = detail(operator, instance_id)
    assert shown["signals"] == [] and shown["audit"] == []


def test_a_refused_signal_comes_back_in_its_form_beside_the_field(
    studio: LiveStudio, team: str, signalled: str, operator: SignedInClient
) -> None:
    """With htmx, the refusal replaces the signal's own form (the action panel, where
    other answers go, is far above it): the message beside the field it concerns, that
    field marked invalid, and what was typed kept."""
    instance_id = studio.start(team, signalled)
    url = f"{instance_url(instance_id)}/signals/go"
    typed = {"_csrf": operator.csrf, "payload": "{oops", "signal_id": "form-9"}
    cases = [({**typed, "reason": " "}, "reason"), ({**typed, "reason": "courier"}, "payload")]
    for form, field in cases:
        answer = operator.form(url, form, headers={"HX-Request": "true"})
        assert answer.status_code == 422, answer.text
        assert answer.headers["HX-Retarget"] == '[id="signal-form-go"]'
        assert answer.headers["HX-Reswap"] == "outerHTML"
        assert f'id="signal-{field}-error-go"' in answer.text
        assert f'aria-invalid="true" aria-describedby="signal-{field}-error-go"' in answer.text
        assert ">{oops</textarea>" in answer.text and 'value="form-9"' in answer.text
    assert ">courier</textarea>" in answer.text
    assert "not valid JSON" in answer.text
    assert detail(operator, instance_id)["signals"] == []


def test_a_signal_refused_without_javascript_is_the_instance_page_with_its_form(
    studio: LiveStudio, team: str, signalled: str, operator: SignedInClient
) -> None:
    """A plain form post (no htmx: JavaScript off, or not loaded yet) that is refused
    gets the instance page again, the refusal beside its field in the signal's own form
    and what was typed kept: it was the generic error page, the form and its values
    gone. A refusal no field could fix (the instance ended) is said on the page too."""
    instance_id = studio.start(team, signalled)
    url = f"{instance_url(instance_id)}/signals/go"
    typed = {"payload": "{oops", "signal_id": "form-9"}
    for reason, field, said in [(" ", "reason", "a reason of"), ("courier", "payload", "JSON")]:
        answer = operator.form(url, {**typed, "reason": reason})
        assert answer.status_code == 422, answer.text
        assert '<div id="instance-page"' in answer.text and 'id="signal-form-go"' in answer.text
        error = re.search(
            rf'<p class="field-error" id="signal-{field}-error-go"[^>]*>([^<]*)<', answer.text
        )
        assert error and said in error.group(1), answer.text
        assert f'aria-invalid="true" aria-describedby="signal-{field}-error-go"' in answer.text
        assert ">{oops</textarea>" in answer.text and 'value="form-9"' in answer.text
    assert ">courier</textarea>" in answer.text
    assert detail(operator, instance_id)["signals"] == []

    studio.command(instance_id, Action.CANCEL)
    ended = operator.form(url, {**typed, "payload": "{}", "reason": "late courier"})
    assert ended.status_code == 409, ended.text
    assert '<div id="instance-page"' in ended.text
    notice = re.search(
        r'<div id="action-panel"[^>]*>\s*<p class="alert error notice" role="alert">([^<]+)<',
        ended.text,
    )
    assert notice, ended.text
    assert detail(operator, instance_id)["signals"] == []
