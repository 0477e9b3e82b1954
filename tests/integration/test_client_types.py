"""A newcomer's wrong types are refused by the client in words, as InputRefused.

An int where an id is expected, or a set, a datetime or bytes where a JSON value is,
used to fail as a TypeError from inside a regular expression or the JSON encoder, which
says neither which argument was wrong nor what is allowed.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from engine import InputRefused, load_definition, parse_scope
from engine.api.client import Client
from engine.decide.operator_actions import Action
from tests.integration.transition_builders import SINGLE


@pytest.fixture
def client(single_client: Client) -> Client:
    return single_client


NOT_TEXT: dict[str, Callable[[Client], Awaitable[Any]]] = {
    "the instance id": lambda c: c.start(SINGLE, 42),
    "the name": lambda c: c.start(7, "x"),
    "the version": lambda c: c.start(SINGLE, "x", version=1),
    "the signal id": lambda c: c.signal("running", "a", 9),
    "the actor": lambda c: c.command("running", Action.PAUSE, 3, "why"),
    "the instance id ": lambda c: c.inspect(42),
}


@pytest.mark.parametrize("call", NOT_TEXT.values(), ids=NOT_TEXT.keys())
async def test_an_argument_that_is_not_a_str_is_refused_naming_it(
    client: Client, call: Callable[[Client], Awaitable[Any]]
) -> None:
    with pytest.raises(InputRefused, match=r"^the \w+( id)? must be a str, not int$"):
        await call(client)


NOT_JSON: dict[str, Any] = {
    "set": {1, 2},
    "datetime": {"at": datetime(2026, 1, 1, tzinfo=UTC)},
    "bytes": [b"abc"],
}


@pytest.mark.parametrize(("kind", "value"), NOT_JSON.items(), ids=NOT_JSON.keys())
async def test_a_value_json_cannot_carry_is_refused_naming_its_type(
    client: Client, kind: str, value: Any
) -> None:
    allowed = "use dicts with str keys, lists, str, int, float, bool and None"
    with pytest.raises(
        InputRefused, match=f"^the input holds a {kind}, which is not JSON: {allowed}$"
    ):
        await client.start(SINGLE, "not-json", value)
    with pytest.raises(InputRefused, match=f"^the payload holds a {kind}"):
        await client.signal("running", "a", "s", value)
    with pytest.raises(InputRefused, match=r"^the input holds a dict key that is not a str"):
        await client.start(SINGLE, "int-key", {1: "a"})


COMMANDS: dict[str, tuple[dict[str, Any], str]] = {
    "unknown action": (
        {"action": "pauze"},
        "^'pauze' is not an operator action: one of pause, resume, cancel, terminate, ",
    ),
    "missing field": ({"action": "retry_activity"}, "^retry_activity lacks step: it takes step$"),
    "extra field": ({"bogus": 1}, "^pause does not take bogus: it takes no fields$"),
    "empty actor": ({"actor": ""}, "actor must be 1 to 200 characters"),
    "bad command id": ({"command_id": "a b"}, "^command id must be"),
    **{  # each used to reach the event's check: "... event 4: needs code" or a traceback
        f"{what} code": (
            {"action": "resolve_compensation", "step": "a", "code": code},
            rf"^the code must be {expected}1 to 200 \(MAX_CODE_LENGTH\) printable characters",
        )
        for what, code, expected in (
            ("empty", "", ""),
            ("blank", "  ", ""),
            ("long", "x" * 201, ""),
            ("multi-line", "refunded\nby phone", ""),
            ("int", 7, "a str, not a int: "),
        )
    },
}


@pytest.mark.parametrize(("change", "message"), COMMANDS.values(), ids=COMMANDS.keys())
async def test_a_command_that_cannot_be_recorded_is_refused_saying_what_is_allowed(
    client: Client, change: dict[str, Any], message: str
) -> None:
    arguments = {"action": "pause", "actor": "ops", "reason": "why", **change}
    with pytest.raises(InputRefused, match=message):
        await client.command("running", **arguments)
    assert len((await client.inspect("running")).audit) == 0, "nothing was recorded"


async def test_publish_takes_a_definition_and_load_definition_a_str_path(client: Client) -> None:
    document = Path(__file__).parents[2] / "examples" / "order_fulfillment.json"
    with pytest.raises(InputRefused, match=r"^publish takes a Definition, not dict: read a JSON"):
        await client.publish(json.loads(document.read_text()))
    assert await client.publish(load_definition(str(document)))


async def test_a_hold_on_a_definition_name_given_as_a_str_says_to_use_parse_scope(
    client: Client,
) -> None:
    with pytest.raises(InputRefused, match=r"^a hold's scope is a HoldScope, not str: parse_scope"):
        await client.place_hold(SINGLE, "ops", "incident")  # type: ignore[arg-type]
    hold = await client.place_hold(parse_scope("", SINGLE), "ops", "incident")
    assert hold.scope.name == SINGLE
