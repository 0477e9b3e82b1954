"""``wayline definition publish`` and ``wayline start`` act for a team with ``--team``,
as ``machine submit``, ``hold`` and ``retention`` do: a team's name is published as its
own, and its instances are stored as the studio stores them (``TEAM:ID``, a code run as
``NAME/ID``) with the team as their tenant, so the team's studio lists them. Without
``--team`` both act for the engine's own team ''.

Each command runs through the ``wayline`` entry point in this process, against the
real PostgreSQL of the integration fixtures.
"""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from engine.api.queries import Queries
from engine.cli.main import main
from engine.store.store import Store
from tests.integration.test_cli_errors import EXAMPLE, argument_refused, refused

NAME = "order.fulfillment"
CLOSED = "postgresql://postgres@127.0.0.1:1/x"
"""No server: a command that got past its arguments would fail here, with exit 1."""


def _read(pg_dsn: str, schema: str, question: str, *args: object) -> object:
    """Ask ``Queries`` one question on the test's schema."""

    async def ask() -> object:
        store = await Store.open(pg_dsn, schema)
        try:
            return await getattr(Queries(store), question)(*args)
        finally:
            await store.close()

    return asyncio.run(ask())


@pytest.fixture
def store_options(pg_dsn: str, schema: str) -> list[str]:
    return ["--dsn", pg_dsn, "--schema", schema]


def test_publish_and_start_with_a_team_act_as_its_studio_does(
    pg_dsn: str, schema: str, store_options: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    publish = ["definition", "publish", str(EXAMPLE), "--team", "acme", *store_options]
    assert main(publish) == 0
    assert _read(pg_dsn, schema, "name_owner", NAME) == "acme"
    capsys.readouterr()

    start = ["start", NAME, "--id", "o-1", "--input", "{}", *store_options]
    assert main([*start, "--team", "acme"]) == 0
    assert capsys.readouterr().out.startswith(f"started acme:o-1 on {NAME}@1 (running)")
    (row,) = _read(pg_dsn, schema, "instance_rows", ["acme:o-1"]).values()
    assert (row.instance_id, row.tenant_id) == ("acme:o-1", "acme")
    assert main([*start, "--team", "acme"]) == 0  # idempotent, on the stored id
    assert capsys.readouterr().out.startswith("already started: joined acme:o-1")
    assert main(["inspect", "acme:o-1", *store_options]) == 0  # addressed as stored

    assert refused(capsys, *start) == (
        1,
        f"wayline start: {NAME} is not published in the engine's own team '' (no --team): "
        "a team starts its own definitions",
    )
    assert refused(capsys, *start, "--team", "crew") == (
        1,
        f"wayline start: {NAME} is not published in team crew: a team starts its own definitions",
    )
    assert refused(capsys, "definition", "publish", str(EXAMPLE), *store_options) == (
        1,
        f"wayline definition publish: the name {NAME} belongs to another team",
    )


def test_a_team_id_too_long_with_its_prefix_is_refused_naming_the_teams_limit(
    pg_dsn: str, schema: str, store_options: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """The studio's rule (``team_id_problem``): ``acme:`` takes 5 of the 200 characters."""
    assert main(["definition", "publish", str(EXAMPLE), "--team", "acme", *store_options]) == 0
    capsys.readouterr()
    start = ["start", NAME, "--input", "{}", "--team", "acme", *store_options]
    assert refused(capsys, *start, "--id", "x" * 196) == (
        2,
        "wayline start: argument --id: the id is 196 characters; this team's ids have at most 195",
    )
    assert _read(pg_dsn, schema, "instance_rows", ["acme:" + "x" * 196]) == {}


def test_a_code_run_started_for_a_team_is_its_run(
    pg_dsn: str, schema: str, store_options: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    app = ["definition", "publish", "--app", "examples.order_saga:app", "--team", "acme"]
    assert main([*app, *store_options]) == 0
    assert _read(pg_dsn, schema, "name_owner", "order-saga") == "acme"
    capsys.readouterr()
    order = '{"sku": "mug", "amount": 1200}'
    start = ["start", "order-saga", "--id", "o-42", "--input", order, "--team", "acme"]
    assert main([*start, *store_options]) == 0
    assert capsys.readouterr().out == "run: order-saga/o-42\nstarted: true\n"
    (row,) = _read(pg_dsn, schema, "instance_rows", ["order-saga/o-42"]).values()
    assert row.tenant_id == "acme"


@pytest.mark.parametrize(
    "argv",
    [
        ["start", NAME, "--id", "o-1", "--team", "Acme"],
        ["definition", "publish", str(EXAMPLE), "--team", "a:b"],
    ],
    ids=["start", "publish"],
)
def test_a_team_that_is_no_team_id_is_a_usage_error(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    line = argument_refused(capsys, *argv, "--dsn", CLOSED)
    assert line.endswith(
        "error: argument --team: a team id has 1 to 63 characters: a-z, 0-9 or '-', starting "
        "with a letter or digit (or is empty: the engine's own team)"
    )


def test_a_start_keeps_who_started_it_and_inspect_and_history_say_so(
    pg_dsn: str, schema: str, store_options: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Who started an instance was kept nowhere: inspect, history and the studio named
    who paused or cancelled it but not who set it going. A start now keeps its actor
    (--actor, 'cli' by default); a retried start by someone else joins the instance and
    keeps who first started it."""
    assert main(["definition", "publish", str(EXAMPLE), *store_options]) == 0
    start = ["start", NAME, "--input", "{}", *store_options]
    assert main([*start, "--id", "o-1", "--actor", "ann"]) == 0
    assert main([*start, "--id", "o-1", "--actor", "bob"]) == 0  # joined
    assert main([*start, "--id", "o-2"]) == 0
    capsys.readouterr()

    assert main(["inspect", "o-1", *store_options]) == 0
    assert re.search(r"^started \S+Z by ann$", capsys.readouterr().out, re.M)
    assert main(["inspect", "o-1", "--json", *store_options]) == 0
    assert json.loads(capsys.readouterr().out)["started_by"] == "ann"
    assert main(["history", "o-1", *store_options]) == 0
    assert capsys.readouterr().out.splitlines()[0].endswith(f"definition={NAME}@1 by ann")
    assert main(["history", "o-1", "--json", *store_options]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[0])["started_by"] == "ann"
    assert main(["inspect", "o-2", *store_options]) == 0
    assert re.search(r"^started \S+Z by cli$", capsys.readouterr().out, re.M)
    refusal = argument_refused(capsys, *start, "--id", "o-3", "--actor", "ann smith")
    assert refusal.startswith("wayline start: error: argument --actor: actor must be")
