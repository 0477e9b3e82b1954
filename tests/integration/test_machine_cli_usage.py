"""``wayline machine`` as a stranger types it: a malformed argument is a usage error
(exit 2, one line naming the argument and what it allows) before any database is
asked, and a team submits only the machines it published.

Each command runs through the ``wayline`` entry point in this process, against the
real PostgreSQL of the integration fixtures.
"""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from engine.cli.main import main
from examples import documents
from tests.integration.test_cli_errors import _member, _publish_as, argument_refused, refused

CLOSED = "postgresql://postgres@127.0.0.1:1/x"
"""No server: a command that got past its arguments would fail here, with exit 1."""
SUBMIT = ["machine", "submit", "document_approval", "--input", '"v1"', "--as", "ada"]
ID_RULE = (
    "must be 1 to 200 characters: ASCII letters, digits and . _ : @ / + -, starting with a "
    "letter or digit"
)
USAGE = {
    "a parent that is no id": (
        [*SUBMIT, "--parent", "doc 7", "--key", "k"],
        f"wayline machine submit: error: argument --parent: {ID_RULE}",
    ),
    "a key of only spaces": (
        [*SUBMIT, "--parent", "doc-7", "--key", "  "],
        "wayline machine submit: error: argument --key: the key must be non-empty text",
    ),
    "a key over its limit": (
        [*SUBMIT, "--parent", "doc-7", "--key", "k" * 201],
        "wayline machine submit: error: argument --key: the key has at most 200 characters",
    ),
    "a scope that is no role": (
        [*SUBMIT, "--parent", "doc-7", "--key", "k", "--scope", "god"],
        "wayline machine submit: error: argument --scope: invalid choice: 'god' (choose "
        "from 'viewer', 'author', 'operator', 'admin')",
    ),
    "an @ without a version": (
        ["machine", "submit", "document_approval@", *SUBMIT[3:], "--parent", "p", "--key", "k"],
        "wayline machine submit: error: argument NAME[@VERSION]: name a version after @, "
        "or leave the @ out",
    ),
    "an execution id that is no id": (
        ["machine", "status", "document_approval", "x" * 201, "--as", "ada"],
        f"wayline machine status: error: argument ID: an execution id {ID_RULE}",
    ),
}


@pytest.mark.parametrize(("argv", "says"), USAGE.values(), ids=USAGE)
def test_a_malformed_argument_is_a_usage_error_before_the_database(
    capsys: pytest.CaptureFixture[str], argv: list[str], says: str
) -> None:
    """These were the engine's refusals, exit 1 as if the command had failed (and an
    over-long execution id was echoed whole); a script could not tell them from a busy
    parent or a conflict."""
    assert argument_refused(capsys, *argv, "--dsn", CLOSED) == says


def test_a_team_cannot_submit_another_teams_machine(
    pg_dsn: str, schema: str, conn: psycopg.Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    """Team acme's submit for a parent of team crew's machine was refused naming crew's
    active execution (and, for a free parent, admitted on crew's machine), though another
    team's execution looks like none everywhere else, and the studio submits only the
    team's own machines."""
    store = ["--dsn", pg_dsn, "--schema", schema]
    asyncio.run(_publish_as(pg_dsn, schema, documents.flow.definition, "crew"))
    for name, team in (("ada", "crew"), ("carl", "acme")):
        asyncio.run(_member(pg_dsn, schema, name, team, "operator"))
    submit = ["machine", "submit", "document_approval", "--parent", "doc-7", "--input", '"v1"']
    assert main([*submit, "--key", "k1", "--as", "ada", "--team", "crew", *store]) == 0
    crews = capsys.readouterr().out.split()[1]

    status, line = refused(capsys, *submit, "--key", "k2", "--as", "carl", "--team", "acme", *store)
    assert (status, line) == (
        1,
        "wayline machine submit: document_approval is not published in team acme: a team "
        "submits its own machines",
    )
    assert crews not in line
    assert conn.execute("SELECT count(*) FROM instances").fetchone() == (1,)


@pytest.mark.parametrize(
    "command", [["definition", "check"], ["definition", "publish"], ["machine", "roles"]]
)
def test_an_app_of_another_shape_is_a_usage_error_in_every_command_that_loads_one(
    pg_dsn: str, schema: str, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    """``wayline worker --app refunds`` exited 2 while these said the same with exit 1."""
    store = [] if command[1] == "check" else ["--dsn", pg_dsn, "--schema", schema]
    status, line = refused(capsys, *command, "--app", "refunds", *store)
    assert (status, line) == (
        2,
        f"wayline {' '.join(command)}: --app must look like MODULE:REGISTRY, a module as "
        "Python imports it and a name in it, e.g. examples.orders:app (not a file path)",
    )
