"""The start form says what it will do with what is typed: a code-first run's id becomes
``<name>/<id>`` and its code reads the input; and opened without a version it offers
one the pre-filled ``{}`` is not known to fail (never a child, which takes its input
from its parent)."""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from engine.api.queries import PublishedVersion
from engine.model.validation import parse_definition
from examples import order_saga
from studio.instance_urls import instance_url
from studio.instances.service import start_default
from studio.roles import Role
from tests.studio import code_app
from tests.studio.live import LiveStudio, definition

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
T0 = datetime(2026, 12, 1, tzinfo=UTC)


def published(*documents: dict[str, Any]) -> list[PublishedVersion]:
    """The documents as the catalog lists them: published in this order, listed by name."""
    found = [
        PublishedVersion(parse_definition(d), False, T0 + timedelta(minutes=n), "seed")
        for n, d in enumerate(documents)
    ]
    return sorted(found, key=lambda v: (v.definition.name, v.published_at))


def renamed(document: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    """``document`` with every ``name`` in ``names`` replaced (its own, a spawn's)."""

    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                k: names.get(v, v) if k == "name" and isinstance(v, str) else walk(v)
                for k, v in value.items()
            }
        return [walk(v) for v in value] if isinstance(value, list) else value

    return walk(document)


def code_documents(suffix: str = "") -> list[dict[str, Any]]:
    """The example order saga and the shipping child it spawns (renamed by ``suffix``)."""
    names = {n: n + suffix for n in ("order-saga", "shipping")}
    return [renamed(flow.document, names) for flow in order_saga.app.workflows]


def test_the_default_is_never_a_child_and_a_step_list_first() -> None:
    """The studio's first start publishes these three: the form offered ``shipping``
    (the catalog's last row, by name), whose first step reads the parcel its parent
    gives it, so a start with ``{}`` was held there."""
    fulfillment = json.loads((EXAMPLES / "order_fulfillment.json").read_text())
    saga, shipping = code_documents()
    chosen = start_default(published(fulfillment, saga, shipping))
    assert chosen is not None and chosen.definition.name == "order.fulfillment"

    code_only = start_default(published(saga, shipping))
    assert code_only is not None and code_only.definition.name == "order-saga", "not the child"
    machine = json.loads((EXAMPLES / "document_approval.json").read_text())
    with_machine = start_default(published(saga, machine))
    assert with_machine is not None and with_machine.definition.name == "order-saga"

    child = definition("a.child")
    ref = parse_definition(child).ref
    parent = {
        **definition("a.parent"),
        "steps": [
            {
                "name": "kid",
                "kind": "child",
                "target": "a.child",
                "child_definition": ref.to_json(),
                "timeout": "1h",
                "input_limit": 1024,
                "result_limit": 1024,
                "retry": {"max_attempts": 1, "initial_delay": "1s", "max_delay": "1s"},
            }
        ],
    }
    newest = start_default(published(parent, child))
    assert newest is not None and newest.definition.name == "a.parent", "a child step's too"
    assert start_default([]) is None


def test_a_code_first_run_id_is_said_next_to_the_id_field(studio: LiveStudio) -> None:
    team = studio.team("start-code")
    flow = code_app.app.workflows[0]
    name = f"start-saga-{uuid.uuid4().hex[:6]}"
    studio.publish(team, {**flow.document, "name": name})
    steps = studio.publish_new(team, "start-steps")
    operator = studio.client(studio.user(team, Role.OPERATOR))

    def hints(path: str) -> tuple[str, str]:
        """The id field's hint and the input field's, as the form opens."""
        text = operator.get(path).text
        found = re.search(r'id="start-id-help"[^>]*>([^<]*)<', text).group(1)
        wanted = re.search(r'id="start-input-help"[^>]*>([^<]*)<', text).group(1)
        return found, wanted

    id_hint, input_hint = hints(f"/instances/new?definition={name}&version=1")
    assert id_hint.startswith(
        f"{name} is a code-first workflow: its run id is stored as {name}/ID, the "
        "workflow's name, a slash and the id given here (or a new one when empty)"
    )
    assert input_hint.startswith(
        f"The workflow's code ({flow.module}.{flow.qualname}) receives the input as it is"
    )
    id_hint, input_hint = hints(f"/instances/new?definition={steps}&version=1")
    assert id_hint.startswith("Leave empty for a new id.") and "code-first" not in id_hint
    assert input_hint.startswith("Every activity receives the input: at most 1024 bytes")
    page = operator.get(f"/instances/new?definition={steps}&version=1").text
    option = re.search(rf'<option value="{re.escape(name)}@1"[^>]*>', page).group(0)
    assert f'data-id-hint="{name} is a code-first workflow: its run id is stored as' in option

    fields = {"definition": f"{name}@1", "instance_id": "r-1", "input": '{"sku": "mug"}'}
    started = operator.form("/instances", fields)
    assert started.status_code == 303
    assert started.headers["location"] == instance_url(f"{name}/r-1"), "as the hint said"
    clash = operator.form("/instances", {**fields, "input": '{"sku": "cup"}'})
    assert clash.status_code == 409
    assert f"instance {name}/r-1 already exists with another definition or input" in clash.text


def test_the_form_opened_without_a_version_offers_one_that_is_no_child(
    studio: LiveStudio,
) -> None:
    team = studio.team("start-default")
    suffix = f"-{uuid.uuid4().hex[:6]}"
    for document in code_documents(suffix):
        studio.publish(team, document)
    operator = studio.client(studio.user(team, Role.OPERATOR))
    page = operator.get("/instances/new").text
    selected = re.findall(r'<option value="([^"]+)"[^>]*\bselected>', page)
    assert selected == [f"order-saga{suffix}@1"], "not shipping, which order-saga spawns"
    steps = studio.publish_new(team, "zz-steps")
    page = operator.get("/instances/new").text
    selected = re.findall(r'<option value="([^"]+)"[^>]*\bselected>', page)
    assert selected == [f"{steps}@1"], "a step list takes the {} pre-filled as it is"
    assert "{}</textarea>" in page


def test_a_refusal_is_said_at_its_field_which_keeps_what_was_typed(studio: LiveStudio) -> None:
    """The reason sat above the form, linked to no field; now each field it names is
    marked invalid, described by the reason (and its own help), and focused."""
    team = studio.team("start-fields")
    name = studio.publish_new(team, "start-fields")
    operator = studio.client(studio.user(team, Role.OPERATOR))
    chosen = f"{name}@1"

    def refused(fields: dict[str, str], field: str, help_id: str = "") -> str:
        text = operator.form("/instances", fields).text
        error_id = f"start-{field}-error"
        described = f"{error_id} {help_id}".strip()
        assert 'id="start-error"' not in text, "not above the form"
        assert f'<p class="field-error" id="{error_id}" role="alert">' in text
        marked = re.search(
            rf'<(?:input|textarea|select)[^>]*aria-describedby="{described}"[^>]*>', text
        )
        assert marked and 'aria-invalid="true"' in marked.group(0)
        assert " autofocus" in marked.group(0)
        assert text.count(" autofocus") == 1, "only the refused field"
        return text

    text = refused(
        {"definition": chosen, "instance_id": "bad id!", "input": '{"n": 1}'}, "id", "start-id-help"
    )
    assert "the instance id" in text and 'value="bad id!"' in text
    text = refused(
        {"definition": chosen, "instance_id": "mine", "input": "{"}, "input", "start-input-help"
    )
    assert "not valid JSON" in text and ">{</textarea>" in text and 'value="mine"' in text
    refused({"definition": "", "input": "{}"}, "definition")

    body = {"definition": name, "version": "1", "input": "x" * 2000}
    api = operator.post("/api/instances", json=body, headers={"X-CSRF-Token": operator.csrf})
    assert [p["path"] for p in api.json()["problems"]] == ["input"], "the API names it too"


def test_versions_are_listed_by_name_newest_first_and_a_name_opens_on_its_latest(
    studio: LiveStudio,
) -> None:
    team = studio.team("start-order")
    name = f"order-{uuid.uuid4().hex[:6]}"
    for version in ("1", "2", "10"):
        studio.publish(team, definition(name, version))
    other = studio.publish_new(team, "aa-first")
    operator = studio.client(studio.user(team, Role.OPERATOR))
    page = operator.get(f"/instances/new?definition={name}").text
    listed = re.findall(r'<option value="([^"]+)"', page)
    assert listed == [f"{other}@1", f"{name}@10", f"{name}@2", f"{name}@1"]
    assert re.findall(r'<option value="([^"]+)"[^>]*\bselected>', page) == [f"{name}@10"]
    assert f'<optgroup label="{name}">' in page


def test_an_instance_says_who_started_it_from_the_form_or_with_a_token(
    studio: LiveStudio,
) -> None:
    """Who started an instance was kept nowhere: its page and the API named who
    paused or cancelled it, never who set it going. The person (or the API token, as
    every audit record names one) is now kept with its start and shown; a retry by
    someone else joins it and keeps who first started it."""
    team = studio.team("starters")
    name = studio.publish_new(team, "starters")
    operator_name = studio.user(team, Role.OPERATOR)
    operator = studio.client(operator_name)
    fields = {"definition": f"{name}@1", "instance_id": "by-form", "input": "{}"}
    assert operator.form("/instances", fields).status_code == 303
    other = studio.client(studio.user(team, Role.OPERATOR))
    assert other.form("/instances", fields).status_code == 303  # joined
    page = operator.get(instance_url("by-form")).text
    assert f'<span id="instance-started-by">by {operator_name}</span>' in page

    admin = studio.client(studio.user(team, Role.ADMIN))
    made = admin.form("/settings/tokens", {"label": "ci-start", "role": "operator"})
    secret = re.search(r'id="new-token">([^<]+)<', made.text).group(1)
    bearer = {"Authorization": f"Bearer {secret}"}
    body = {"definition": name, "version": "1", "instance_id": "by-token", "input": {}}
    answer = studio.client().post("/api/instances", json=body, headers=bearer)
    assert answer.status_code == 201, answer.text
    assert answer.json()["started_by"] == f"token:{secret.split('_')[1]}"
    assert operator.get("/api/instances/by-form").json()["started_by"] == operator_name
