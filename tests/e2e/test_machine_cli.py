"""``wayline machine submit|state|status|cancel`` as a person at a terminal sees it:
the one line each answers, and ``wayline: <message>`` with exit 1 when refused; and
``wayline machine roles``, the SQL of the roles machines act as."""

from __future__ import annotations

from typing import TYPE_CHECKING

import psycopg

from examples import documents as document_approval
from tests.e2e.test_cli_e2e import ok, one_line

if TYPE_CHECKING:
    from tests.e2e.conftest import Harness

FIXTURE = "examples/document_approval.json"
SUBMIT = ("machine", "submit", "document_approval", "--parent", "doc-7", "--as", "admin")


async def test_submit_is_idempotent_and_a_conflict_or_a_busy_parent_says_why(
    e2e: Harness,
) -> None:
    await e2e.client.publish(document_approval.flow.definition, "e2e", "default")
    await ok(e2e, "user", "create", "admin", "--team", "default", "--role", "operator")
    first = await ok(e2e, *SUBMIT, "--input", '"v1"', "--key", "r1", "--team", "default")
    execution = first.split()[1]
    assert first == f"submitted {execution} (new)\n"
    assert execution.startswith("document_approval/")
    again = await ok(e2e, *SUBMIT, "--input", '"v1"', "--key", "r1", "--team", "default")
    assert again == f"submitted {execution} (existing)\n"

    other = await e2e.cli(*SUBMIT, "--input", '"v2"', "--key", "r1", "--team", "default")
    assert other.code == 1
    assert one_line(other) == (
        "wayline machine submit: key r1 was already used with another input "
        f"(execution {execution})"
    )
    busy = await e2e.cli(*SUBMIT, "--input", '"v1"', "--key", "r2", "--team", "default")
    assert busy.code == 1
    assert one_line(busy) == (
        "wayline machine submit: document_approval already has an active execution for "
        f"parent doc-7: {execution}"
    )


async def test_state_status_and_cancel_are_the_submitters(e2e: Harness) -> None:
    await e2e.publish(document_approval.flow.definition)
    submitted = await ok(e2e, *SUBMIT, "--input", '"v1"', "--key", "r1")
    execution = submitted.split()[1]
    mine = ("document_approval", execution, "--as", "admin")
    assert await ok(e2e, "machine", "state", *mine) == "Submitted\n"
    assert await ok(e2e, "machine", "state", *mine, "--json") == (
        '{"fields": {}, "variant": "Submitted"}\n'
    )
    status = await e2e.cli("machine", "status", *mine)
    assert (status.code, status.stdout) == (0, "running\n"), "the seed's word, alone on stdout"
    assert status.stderr == (
        "no worker: no running worker runs machine:document_approval@1: its work waits until "
        "a worker whose app registers it starts (wayline worker --app MODULE:REGISTRY) or the "
        "instance is migrated to a version a running worker runs (wayline instance migrate)\n"
    ), "a 'running' execution no worker will advance says so"

    theirs = await e2e.cli("machine", "status", "document_approval", execution, "--as", "bob")
    assert theirs.code == 1
    assert one_line(theirs) == (
        f"wayline machine status: bob may not see or cancel {execution}: only the actor who "
        "submitted it may"
    )
    cancelled = await ok(e2e, "machine", "cancel", *mine, "--reason", "not needed")
    assert cancelled == f"cancel recorded on {execution} (cancelling)\n"


async def test_bad_arguments_get_one_line(e2e: Harness) -> None:
    await e2e.publish(document_approval.flow.definition)
    not_text = await e2e.cli(*SUBMIT, "--input", "7", "--key", "r1")
    assert one_line(not_text) == (
        "wayline machine submit: the input must be text (the machine's input is text)"
    )
    missing = await e2e.cli(*SUBMIT[:3], "--input", '"v1"', "--key", "r1", "--as", "admin")
    assert missing.code == 2 and "--parent" in missing.stderr
    unknown = await e2e.cli("machine", "status", "document_approval", "nope", "--as", "admin")
    assert one_line(unknown) == "wayline machine status: no execution nope in this team"
    steps = await e2e.cli(
        "machine",
        "submit",
        "nothing",
        "--parent",
        "p",
        "--input",
        "1",
        "--key",
        "k",
        "--as",
        "admin",
    )
    assert steps.code == 1 and one_line(steps).startswith("wayline machine submit: ")


async def test_the_machine_demo_reviews_reminds_and_approves_a_document(e2e: Harness) -> None:
    """``wayline demo --machine`` (the README's way to see a machine run): its timers pass
    on the demo's own clock, so it ends at once."""
    out = await ok(e2e, "demo", "--machine")

    lines = out.splitlines()
    assert "in review: InReview(reminders=0)" in lines
    assert "status completed" in lines
    assert "state Approved(by='ann')" in lines
    entered = [line.split()[-1] for line in lines if "state_entered" in line]
    assert entered == ["InReview", "InReview", "Approved"]


async def test_roles_prints_sql_that_runs_again_and_again(e2e: Harness) -> None:
    printed = await e2e.cli("machine", "roles", "--app", "examples.documents:app", store=False)
    assert printed.code == 0, printed.stderr
    assert printed.stdout.count("CREATE ROLE") == 3  # read, write and the role without grants
    assert "GRANT SELECT ON <tables> TO wayline_documents_read;" in printed.stdout
    from_file = await e2e.cli("machine", "roles", FIXTURE, store=False)
    assert from_file.stdout == printed.stdout
    async with await psycopg.AsyncConnection.connect(e2e.dsn, autocommit=True) as conn:
        for _ in range(2):
            await conn.execute(printed.stdout)


async def test_roles_apply_provisions_the_published_machines_roles(e2e: Harness) -> None:
    await e2e.publish(document_approval.flow.definition)

    applied = await ok(e2e, "machine", "roles", "--apply")

    assert applied == "provisioned the roles of Documents and the role without grants\n"
    roles = ["wayline_documents_write", "wayline_documents_read", "wayline_no_grants"]
    assert await e2e.query(MEMBERSHIPS, {"roles": roles}) == [(role,) for role in sorted(roles)]


MEMBERSHIPS = """
SELECT r.rolname FROM pg_auth_members a
JOIN pg_roles r ON r.oid = a.roleid JOIN pg_roles m ON m.oid = a.member
WHERE r.rolname = ANY(%(roles)s) AND m.rolname = current_user ORDER BY 1
"""
"""The roles of ``roles`` the login is a member of (superuser or not)."""


async def test_roles_says_what_was_wrong_in_one_line(e2e: Harness) -> None:
    not_a_machine = await e2e.cli("machine", "roles", "examples/order_fulfillment.json")
    assert (not_a_machine.code, one_line(not_a_machine)) == (
        2,
        "wayline machine roles: the app and files given declare no state machine",
    )
    await e2e.publish(document_approval.flow.definition)
    no_login = await e2e.cli("machine", "roles", "--apply", "--to", "no_such_login_x")
    assert (no_login.code, one_line(no_login)) == (
        1,
        "wayline machine roles: there is no login no_such_login_x to make a member of the roles",
    )
