"""The plan editor's fields for what a plan document can say besides its pins: a fail
stub's ``times``, the ``answers`` sent to signal and approval steps, and a pin's ``hit``.
Each is a plain form field; a value it does not allow is refused at that field, saying
what it allows, and the plan is not saved."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.studio.live import LiveStudio, SignedInClient
from tests.studio.plan_workspace import compose, pick, plans_of
from tests.studio.test_plan_machines import approval
from verification.plan import MAX_FAIL_TIMES, MAX_HIT


def waits(name: str) -> dict[str, Any]:
    """An activity, then an approval, then a signal."""
    limits = {"timeout": "30s", "input_limit": 1024}
    return {
        "name": name,
        "version": "1",
        "mode": "orchestration",
        "steps": [
            {"name": "charge", "kind": "activity", "target": "payments.charge",
             "result_limit": 1024, "retry": {"max_attempts": 3, "initial_delay": "1s",
                                             "max_delay": "5s"}, **limits},
            {"name": "manager", "kind": "approval", "target": "order.manager", **limits},
            {"name": "shipped", "kind": "signal", "target": "order.shipped", **limits},
        ],
    }  # fmt: skip


@pytest.fixture(scope="module")
def url(studio: LiveStudio, team: str) -> str:
    return plans_of(studio.publish_new(team, "waits", waits))


def error_at(page: str, field: str) -> str:
    """The error shown at ``field`` (the field points at it), or ''."""
    tag = re.search(rf'<input[^>]*name="{re.escape(field)}"[^>]*>', page)
    assert tag, f"no field {field}"
    if f'aria-describedby="error-{field}"' not in tag.group(0):
        return ""
    found = re.search(rf'id="error-{re.escape(field)}"[^>]*>([^<]*)<', page)
    return found.group(1) if found else ""


def test_times_answers_and_a_hit_are_saved_as_the_cli_reads_them(
    operator: SignedInClient, url: str
) -> None:
    picked = pick(operator, url, "charge")
    assert 'name="hit" value="1"' in picked.text
    assert 'name="answer.manager" value="null"' in picked.text
    pinned = compose(
        operator, url,
        {"picked": "charge", "boundary": "after_handler", "fault": "kill", "hit": "2",
         "action": "pin", "input": "null"},
    )  # fmt: skip
    assert 'name="pin" value="charge:after_handler:kill#2"' in pinned.text
    saved = operator.form(
        url,
        {"pin": ["charge:after_handler:kill#2"], "input": "null", "name": "second-try",
         "stub.charge.behaviour": "fail", "stub.charge.times": "1",
         "answer.manager": '{"approved": true}', "answer.shipped": '{"carrier": "dhl"}'},
    )  # fmt: skip
    assert saved.status_code == 303, saved.text
    exported = json.loads(operator.get(f"{url}/second-try/versions/1/export").text)
    assert exported["pins"] == [
        {"step": "charge", "boundary": "after_handler", "fault": "kill", "hit": 2}
    ]
    assert exported["stubs"]["charge"]["times"] == 1
    assert exported["answers"] == {"manager": {"approved": True}, "shipped": {"carrier": "dhl"}}
    again = operator.get(url, params={"plan": "second-try", "v": 1}).text
    assert 'name="stub.charge.times" value="1"' in again
    assert 'name="answer.shipped" value="{&#34;carrier&#34;: &#34;dhl&#34;}"' in again


@pytest.mark.parametrize("hit", ["0", str(MAX_HIT + 1), "two", "²"])
def test_a_hit_out_of_range_is_refused_at_its_field(
    operator: SignedInClient, url: str, hit: str
) -> None:
    refused = compose(
        operator, url,
        {"picked": "charge", "boundary": "after_handler", "fault": "kill", "hit": hit,
         "action": "pin", "input": "null"},
    )  # fmt: skip
    assert refused.status_code == 200
    said = error_at(refused.text, "hit")
    assert f"a whole number from 1 to {MAX_HIT}" in said, refused.text
    assert 'name="pin"' not in refused.text  # nothing pinned


def test_bad_times_and_answers_are_refused_at_their_fields_and_not_saved(
    operator: SignedInClient, url: str
) -> None:
    refused = operator.form(
        url,
        {"pin": ["charge:after_handler:kill"], "input": "null", "name": "typos",
         "stub.charge.behaviour": "fail", "stub.charge.times": str(MAX_FAIL_TIMES + 1),
         "answer.manager": "{yes", "answer.shipped": '"fine"'},
    )  # fmt: skip
    assert refused.status_code == 422
    assert f"a whole number from 0 to {MAX_FAIL_TIMES} (0: every attempt)" in error_at(
        refused.text, "stub.charge.times"
    )
    assert "JSON of at most" in error_at(refused.text, "answer.manager")
    assert 'value="{yes"' in refused.text  # what was typed is kept to correct
    assert error_at(refused.text, "answer.shipped") == ""
    plans = operator.get(url).text
    assert 'data-plan="typos"' not in plans


def test_a_machine_has_no_answers_to_give(
    operator: SignedInClient, studio: LiveStudio, team: str
) -> None:
    """A state machine waits for no signal or approval: its editor offers no answers."""
    name = studio.publish_new(team, "approval", approval)
    page = operator.get(plans_of(name)).text
    assert "plan-answers" not in page and 'name="stub.' in page


@pytest.mark.parametrize(
    ("field", "typed", "allowed"),
    [
        ("input", "{bad", "JSON of at most"),
        ("stub.charge.result", "{oops", "JSON of at most"),
        ("stub.charge.seconds", "abc", "a number of seconds from 0 to 30"),
        ("stub.charge.seconds", "-5", "a number of seconds from 0 to 30"),
        ("stub.charge.seconds", "nan", "a number of seconds from 0 to 30"),
        ("name", "n" * 201, "a name of 1 to 200 characters"),
        ("name", "", "required: a name of 1 to 200 characters"),
    ],
)
def test_bad_input_result_seconds_or_name_is_refused_at_its_field_as_typed(
    operator: SignedInClient, url: str, field: str, typed: str, allowed: str
) -> None:
    """Each was refused only as 'the drill plan is not valid', saying neither which field
    nor what it allows, and the field came back as null or 0.0: what was typed was lost."""
    fields = {"input": "null", "name": "typed-fields", "stub.charge.behaviour": "slow",
              "stub.charge.seconds": "1", field: typed}  # fmt: skip
    refused = operator.form(url, fields)
    assert refused.status_code == 422
    tag = "textarea" if field == "input" else "input"
    said = re.search(rf'<{tag}[^>]*name="{re.escape(field)}"[^>]*>', refused.text)
    assert said and f'aria-describedby="error-{field}"' in said.group(0), refused.text
    assert allowed in refused.text
    kept = f">{typed}</textarea>" if field == "input" else f'value="{typed}"'
    assert kept in refused.text  # what was typed is kept to correct
    assert 'data-plan="typed-fields"' not in operator.get(url).text


def test_a_refused_save_lists_the_plans_problems_even_without_pins(
    operator: SignedInClient, url: str
) -> None:
    """A slow stub without seconds is the plan's problem, not one field's: it was hidden
    until a pin was added, leaving only 'the drill plan is not valid'."""
    refused = operator.form(
        url, {"input": "null", "name": "slow-zero", "stub.charge.behaviour": "slow"}
    )
    assert refused.status_code == 422
    assert 'id="plan-problems"' in refused.text
    assert "stubs.charge.seconds: a slow stub needs seconds above 0" in refused.text
