"""``wayline machine`` as a stranger types it: a malformed argument is a usage error
(exit 2, one line naming the argument and what it allows) before any database is
asked.

Each command runs through the ``wayline`` entry point in this process, against the
real PostgreSQL of the integration fixtures.
"""

from __future__ import annotations

import pytest

from tests.integration.test_cli_errors import argument_refused

CLOSED = "postgresql://postgres@127.0.0.1:1/x"
"""No server: a command that got past its arguments would fail here, with exit 1."""
SUBMIT = ["machine", "submit", "document_approval", "--input", '"v1"', "--as", "ada"]
ID_RULE = (
    "must be 1 to 200 characters: letters, digits and . _ : @ / + -, starting with a "
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
