"""The command line during an incident: ``hold list`` shows every release of a hold, with
who released how much, when and why, as the studio's Holds page and the API show them;
``start --wait`` that times out under a hold says the hold keeps the instance."""

from __future__ import annotations

import json
import re

import pytest

from engine.cli.main import main
from tests.integration.test_cli_errors import EXAMPLE

INSTANT = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z"


def placed_hold(capsys: pytest.CaptureFixture[str]) -> str:
    """The id ``hold place`` printed."""
    found = re.search(r"^hold (\w+) placed on ", capsys.readouterr().out, re.M)
    assert found, "hold place printed no hold id"
    return found.group(1)


def test_hold_list_shows_who_released_a_hold_how_much_and_why(
    pg_dsn: str, schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The list said a hold was released, and when, but never by whom or why, nor that
    part of it had been let go by a count or a rate: the command line had no way to
    answer who ended an incident's hold."""
    store = ["--dsn", pg_dsn, "--schema", schema]
    assert main(["definition", "publish", str(EXAMPLE), *store]) == 0
    place = ["hold", "place", "--definition", "order.fulfillment", *store]
    assert main([*place, "--actor", "ann", "--reason", "INC-9: payments down"]) == 0
    hold_id = placed_hold(capsys)
    release = ["hold", "release", hold_id, *store]
    assert main([*release, "--count", "2", "--actor", "bob", "--reason", "two first"]) == 0
    assert main([*release, "--rate", "0.5", "--actor", "cy", "--reason", "slowly"]) == 0
    assert main([*release, "--actor", "dee", "--reason", "provider back"]) == 0
    capsys.readouterr()

    assert main(["hold", "list", *store]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"{hold_id}  order.fulfillment  released ")
    assert [re.sub(INSTANT, "T", line) for line in lines[1:]] == [
        "  released 2 instances by bob at T: two first",
        "  released 0.5/s by cy at T: slowly",
        "  released everything by dee at T: provider back",
    ]
    assert main(["hold", "list", "--json", *store]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [
        (r["mode"], r["amount"], r["released_by"], r["reason"]) for r in listed["releases"]
    ] == [
        ("count", 2, "bob", "two first"),
        ("rate", 0.5, "cy", "slowly"),
        ("all", 0, "dee", "provider back"),
    ]
    assert all(re.fullmatch(INSTANT, r["released_at"]) for r in listed["releases"])


def test_start_wait_under_a_hold_says_the_hold_keeps_the_instance(
    pg_dsn: str, schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """It said only 'now: activity reserve is ready' (as if no worker were running),
    while ``inspect`` named the hold that parks its work."""
    store = ["--dsn", pg_dsn, "--schema", schema]
    assert main(["definition", "publish", str(EXAMPLE), *store]) == 0
    place = ["hold", "place", "--definition", "order.fulfillment", *store]
    assert main([*place, "--actor", "ann", "--reason", "INC-9: payments down"]) == 0
    hold_id = placed_hold(capsys)
    start = ["start", "order.fulfillment", "--id", "o-held", "--input", "{}", "--wait", "1"]
    assert main([*start, *store]) == 1
    assert capsys.readouterr().err == (
        "wayline start: instance o-held did not end within 1 s: it is running; "
        "now: activity reserve is ready; "
        f"held by hold {hold_id} on order.fulfillment (ann: INC-9: payments down): "
        "no worker runs its work until the hold is released (wayline hold release)\n"
    )
