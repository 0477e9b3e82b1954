"""What a person at a terminal sees when a command cannot do what it was asked: one
line on stderr, ``wayline <command>: <message>``, saying what was wrong and what is
allowed, a non-zero exit, and never a traceback, driver text or a password.

Each command runs through the ``wayline`` entry point (``engine.cli.main.main``) in
this process, against the real PostgreSQL of the integration fixtures.
"""

from __future__ import annotations

import asyncio
import io
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from engine.api.client import Client
from engine.cli.main import main
from engine.decide.operator_actions import Action
from engine.model.definitions import Definition
from engine.model.identifiers import team_problem
from engine.model.limits import MIN_RETENTION_KEEP
from engine.store import retention
from engine.store.store import Store
from examples import documents, machine_demo
from tests.integration.factories import DEFINITION, member

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "order_fulfillment.json"
STUDIO_STOP_SECONDS = 30
CONNECT_ERROR = "cannot connect to the database: check --dsn or WAYLINE_DSN"
SECRET = "hunter2-secret"


def refused(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    """Run ``wayline ARGV``; its exit status and its only stderr line (no traceback)."""
    status = main(list(argv))
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err
    return status, lines[0]


def unreachable(pg_dsn: str) -> dict[str, str]:
    """DSNs that name no usable database, each for its own reason; each carries a
    password, which no message may show."""
    given = {"password": SECRET}
    return {
        "closed port": make_conninfo(pg_dsn, host="127.0.0.1", port="1", **given),
        "port not a number": "postgresql://postgres:hunter2-secret@127.0.0.1:notaport/x",
        "no such database": make_conninfo(pg_dsn, dbname="no_such_database", **given),
        "no such user": make_conninfo(pg_dsn, user="no_such_user", **given),
    }


CONNECTING = [
    ("wayline status", ["status", "order-1"]),
    ("wayline migrate", ["migrate"]),
    ("wayline demo", ["demo"]),
    ("wayline demo", ["demo", "--machine"]),
    ("wayline user create", ["user", "create", "dave"]),
    ("wayline studio", ["studio"]),
    # a group's command is named in full, as its usage errors name it
    ("wayline retention list", ["retention", "list"]),
    ("wayline hold list", ["hold", "list"]),
    ("wayline dead-letter list", ["dead-letter", "list"]),
    ("wayline machine status", ["machine", "status", "document_approval", "x", "--as", "ann"]),
]
DRILLS_CONNECTING = [
    ("wayline drill plan generate", ["drill", "plan", "generate", "order.fulfillment@1"]),
    ("wayline drill run", ["drill", "run", "--drill", "D1"]),
    (
        "wayline drill run",
        ["drill", "run", "--definition", str(EXAMPLE), "--pin", "charge:after_handler:kill"],
    ),
    ("wayline drill self-test", ["drill", "self-test"]),
]


@pytest.mark.parametrize(("label", "argv"), CONNECTING, ids=[" ".join(a) for _, a in CONNECTING])
def test_a_database_that_cannot_be_reached_is_one_message_for_every_command(
    pg_dsn: str, label: str, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    for reason, dsn in unreachable(pg_dsn).items():
        status, line = refused(capsys, *argv, "--dsn", dsn)
        assert (status, line) == (1, f"{label}: {CONNECT_ERROR}"), reason
        assert SECRET not in line


@pytest.mark.parametrize(
    ("label", "argv"), DRILLS_CONNECTING, ids=[" ".join(a) for _, a in DRILLS_CONNECTING]
)
def test_a_drill_server_that_cannot_be_reached_is_refused_before_any_drill_runs(
    pg_dsn: str, label: str, argv: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The drills take their server only from --dsn (a drill creates and drops schemas,
    so it runs on a server only when asked by name), so the message names --dsn alone;
    it came as a traceback with the driver's text once the harness had started."""
    artifacts = tmp_path / "artifacts"
    for reason, dsn in unreachable(pg_dsn).items():
        extra = ["--artifacts", str(artifacts)] if "run" in argv else []
        status, line = refused(capsys, *argv, *extra, "--dsn", dsn)
        assert (status, line) == (1, f"{label}: cannot connect to the database: check --dsn"), (
            reason
        )
        assert SECRET not in line
    assert not artifacts.exists(), "no drill ran"


@pytest.fixture
def role_without_create(pg_dsn: str) -> Iterator[str]:
    """A DSN of a login role (with a password) that may not create schemas, as a CI's
    restricted role; dropped afterwards."""
    role = f"drill_weak_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{SECRET}'")
    try:
        yield make_conninfo(pg_dsn, user=role, password=SECRET)
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f"DROP ROLE {role}")


@pytest.mark.parametrize("action", [["run", "--drill", "D1-kill-before_commit-s0"], ["self-test"]])
def test_a_drill_role_that_may_not_create_schemas_is_refused_before_any_drill_runs(
    action: list[str], role_without_create: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Each drill runs in a schema it creates: the run ended in the driver's
    ``permission denied`` traceback once the first drill set up."""
    artifacts = ["--artifacts", str(tmp_path / "artifacts")] if "run" in action else []
    status, line = refused(capsys, "drill", *action, *artifacts, "--dsn", role_without_create)
    assert (status, line) == (
        1,
        f"wayline drill {action[0]}: the --dsn role may not create schemas in its database, "
        "and each drill runs in a schema of its own: give a role with CREATE on the database",
    )
    assert not (tmp_path / "artifacts").exists(), "no drill ran"


def test_an_engine_refusal_is_its_own_message(
    pg_dsn: str, schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``demo --machine --team T`` when another team owns the machine's name: the
    engine's DefinitionConflict, in its own words, not a traceback."""
    asyncio.run(_publish_as(pg_dsn, schema, documents.flow.definition, "first-team"))
    asyncio.run(_member(pg_dsn, schema, "ada", "crew", "operator"))
    store = ["--dsn", pg_dsn, "--schema", schema]
    status, line = refused(capsys, "demo", "--machine", "--as", "ada", "--team", "crew", *store)
    assert (status, line) == (
        1,
        "wayline demo: the name document_approval belongs to another team",
    )


async def _publish_as(dsn: str, schema: str, definition: Definition, team: str) -> None:
    store = await Store.open(dsn, schema)
    try:
        await Client(store).publish(definition, "ann", team)
    finally:
        await store.close()


def test_a_machine_demo_that_does_not_complete_fails(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An execution that ends otherwise than completed is a failure, not a demo."""
    monkeypatch.setattr(machine_demo, "run", lambda *given: ("document_approval/x1", "dead"))
    status, line = refused(capsys, "demo", "--machine")
    assert (status, line) == (
        1,
        "wayline demo: document_approval/x1 ended dead, not completed "
        "(`wayline inspect document_approval/x1` says why)",
    )


def test_a_read_replica_that_cannot_be_reached_is_refused_before_serving(
    pg_dsn: str, schema: str, conn: psycopg.Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing is served, no address printed, and no first admin made whose one-time
    password nobody would see."""
    replica = make_conninfo(pg_dsn, host="127.0.0.1", port="1", password=SECRET)
    store = ["--dsn", pg_dsn, "--schema", schema]
    status = main(["studio", *store, "--read-dsn", replica])
    out, err = capsys.readouterr()
    assert (status, out, err) == (
        1,
        "",
        "wayline studio: cannot connect to the read replica: check --read-dsn or "
        "WAYLINE_READ_DSN\n",
    )
    assert conn.execute("SELECT count(*) FROM studio_users").fetchone() == (0,)


def test_a_studio_port_in_use_is_refused_before_serving(
    pg_dsn: str, schema: str, conn: psycopg.Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    """As with the replica: no address printed, no first admin made, no traceback."""
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        status = main(["studio", "--dsn", pg_dsn, "--schema", schema, "--port", str(port)])
    out, err = capsys.readouterr()
    assert (status, out) == (1, "")
    assert err.startswith(f"wayline studio: the port {port} cannot be bound on 127.0.0.1 (")
    assert len(err.splitlines()) == 1
    assert conn.execute("SELECT count(*) FROM studio_users").fetchone() == (0,)


def test_an_export_dir_that_cannot_be_written_removes_nothing(
    pg_dsn: str, schema: str, conn: psycopg.Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    asyncio.run(_ended_past_its_keep(pg_dsn, schema, "gone"))
    store = ["--dsn", pg_dsn, "--schema", schema]
    status, line = refused(capsys, "retention", "run", "--export-dir", "/proc", *store)
    assert status == 1
    assert line.startswith("wayline retention run: the export directory /proc cannot be written (")
    assert conn.execute("SELECT instance_id FROM instances").fetchall() == [("gone",)]


def test_an_export_dir_too_long_to_look_up_is_not_a_directory(
    pg_dsn: str, schema: str, conn: psycopg.Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    """A name longer than the system looks up was an OSError traceback."""
    asyncio.run(_ended_past_its_keep(pg_dsn, schema, "kept"))
    long_name = "x" * 5000
    store = ["--dsn", pg_dsn, "--schema", schema]
    status, line = refused(capsys, "retention", "run", "--export-dir", long_name, *store)
    assert (status, line) == (
        2,
        f"wayline retention run: --export-dir {long_name} is not a directory",
    )
    assert conn.execute("SELECT instance_id FROM instances").fetchall() == [("kept",)]


async def _ended_past_its_keep(dsn: str, schema: str, instance_id: str) -> None:
    """An instance that ``retention run`` would export and remove."""
    store = await Store.open(dsn, schema)
    try:
        client = Client(store)
        await client.publish(DEFINITION, "ann")
        await client.start(DEFINITION.name, instance_id, None)
        await client.command(instance_id, Action.TERMINATE, "ann", "no longer needed")
        await retention.set_policy(store, "", MIN_RETENTION_KEEP, "ann")
        async with store.connection() as conn:
            moved = "UPDATE instances SET archived_at = archived_at - %(keep)s"
            await conn.execute(moved, {"keep": MIN_RETENTION_KEEP})
            await conn.commit()
    finally:
        await store.close()


@pytest.mark.parametrize("out", ["a-directory", "no-such-directory/plan.json"])
def test_a_plan_that_cannot_be_written_is_one_line(
    out: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a-directory").mkdir()
    target = tmp_path / out
    status, line = refused(capsys, "drill", "plan", "generate", str(EXAMPLE), "--out", str(target))
    assert status == 1
    assert line.startswith(
        f"wayline drill plan generate: the output file {target} cannot be written ("
    )


@pytest.mark.parametrize("flag", ["--json", "--junit"])
@pytest.mark.parametrize("out", ["a-directory", "missing/card.json"])
def test_a_drill_report_that_cannot_be_written_is_refused_before_any_drill_runs(
    flag: str, out: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a-directory").mkdir()
    target = tmp_path / out
    artifacts = tmp_path / "artifacts"
    argv = ("drill", "run", "--drill", "D1", flag, str(target), "--artifacts", str(artifacts))
    status, line = refused(capsys, *argv, "--dsn", CLOSED)
    assert status == 1
    assert line.startswith(f"wayline drill run: the {flag} file {target} cannot be written (")
    assert not artifacts.exists(), "no drill ran"


def argument_refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run ``wayline ARGV`` with an argument argparse refuses: exit 2, and stderr is one
    line saying which argument and what it must be (no usage synopsis above it)."""
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    err = capsys.readouterr().err
    assert exited.value.code == 2 and "Traceback" not in err
    (line,) = err.splitlines()
    return line


@pytest.fixture
def order_started(pg_dsn: str, schema: str, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """The example order published and its instance o-1 started, through the command
    line; the store options every command of the test then takes."""
    store = ["--dsn", pg_dsn, "--schema", schema]
    assert main(["definition", "publish", str(EXAMPLE), *store]) == 0
    assert main(["start", "order.fulfillment", "--id", "o-1", "--input", "{}", *store]) == 0
    capsys.readouterr()
    return store


AUDITED_USAGE = {
    "a reason of only spaces": (
        ["command", "o-1", "pause", "--actor", "ann", "--reason", "  "],
        "wayline command: error: argument --reason: a reason of 1 to 500 characters, not "
        "only spaces, is required",
    ),
    "an actor that is no id": (
        ["command", "o-1", "pause", "--actor", "ann smith", "--reason", "why"],
        "wayline command: error: argument --actor: actor must be 1 to 200 characters: "
        "ASCII letters, digits and . _ : @ / + -, starting with a letter or digit",
    ),
    "an empty instance id": (
        ["start", "order.fulfillment", "--id", "", "--input", "{}"],
        "wayline start: error: argument --id: must be 1 to 200 characters: ASCII letters, digits "
        "and . _ : @ / + -, starting with a letter or digit",
    ),
    "an empty instance to act on": (
        ["command", "", "pause", "--actor", "ann", "--reason", "why"],
        "wayline command: error: argument instance: an instance id must be 1 to 512 "
        "characters: ASCII letters, digits and . _ : @ / + -, starting with a letter or digit",
    ),
    "a spaced instance to signal": (
        ["signal", "o 1", "shipped", "--signal-id", "s-1"],
        "wayline signal: error: argument instance: an instance id must be 1 to 512 "
        "characters: ASCII letters, digits and . _ : @ / + -, starting with a letter or digit",
    ),
    "an empty instance to inspect": (
        ["inspect", ""],
        "wayline inspect: error: argument instance: an instance id must be 1 to 512 "
        "characters: ASCII letters, digits and . _ : @ / + -, starting with a letter or digit",
    ),
    "a missing option": (
        ["command", "o-1", "pause", "--actor", "ann"],
        "wayline command: error: the following arguments are required: --reason",
    ),
    "a signal id that is no id": (
        ["signal", "o-1", "shipped", "--signal-id", "pay 1"],
        "wayline signal: error: argument --signal-id: must be 1 to 512 characters: ASCII "
        "letters, digits and . _ : @ / + -, starting with a letter or digit",
    ),
    "a signal name that is no name": (
        ["signal", "o-1", "ship it", "--signal-id", "s-1"],
        "wayline signal: error: argument STEP: must be 1 to 200 characters: ASCII letters, digits, "
        "'.', '_' or '-', starting with a letter or digit",
    ),
}


@pytest.mark.parametrize(("argv", "says"), AUDITED_USAGE.values(), ids=AUDITED_USAGE)
def test_a_bad_value_is_a_usage_error_in_one_line_before_anything_is_written(
    order_started: list[str],
    conn: psycopg.Connection,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    says: str,
) -> None:
    """A blank reason, an actor with a space or a signal id or name no event can carry
    was refused only by the engine, with exit 1 as if the command had failed, and
    argparse's refusals came under a usage synopsis (seven lines for ``wayline
    command``) that buried the line saying what was wrong."""
    store = order_started
    written = "SELECT (SELECT count(*) FROM instances), (SELECT count(*) FROM history)"
    before = conn.execute(written).fetchone()
    assert argument_refused(capsys, *argv, *store) == says
    assert conn.execute(written).fetchone() == before


def test_compensating_a_step_without_a_compensation_is_refused_in_words(
    order_started: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """``command ID compensate --step S`` on an activity that declares no compensation
    (a JSON step's or a code run's ``ctx.step`` without ``compensate=``) ended in an
    AssertionError traceback; it is one line, exit 1, and records nothing."""
    argv = ["command", "o-1", "compensate", "--step", "notify", "--actor", "ann"]
    status, line = refused(capsys, *argv, "--reason", "undo it", *order_started)
    assert (status, line) == (
        1,
        "wayline command: activity 'notify' declares no compensation, so there is nothing "
        "to run; nothing was done",
    )


PORTS = "must be a port number from 1 to 65535"
CLOSED = "postgresql://postgres@127.0.0.1:1/x"  # an unfixed command stops here, fast


@pytest.mark.parametrize("given", ["99999", "65536", "-1", "eighty"])
def test_a_port_out_of_range_is_refused_not_wrapped(
    given: str, capsys: pytest.CaptureFixture[str]
) -> None:
    worker = ["worker", "--app", "examples.orders:app", "--dsn", CLOSED, "--metrics-port", given]
    assert argument_refused(capsys, *worker) == (
        f"wayline worker: error: argument --metrics-port: {PORTS}, or 0 for none"
    )
    studio = ["studio", "--dsn", CLOSED, "--port", given]
    assert argument_refused(capsys, *studio) == f"wayline studio: error: argument --port: {PORTS}"


def test_a_drill_dsn_that_does_not_parse_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    run = ["drill", "run", "--drill", "D1", "--dsn", f"password={SECRET} nonsense=:::"]
    line = argument_refused(capsys, *run)
    assert (
        line == "wayline drill run: error: argument --dsn: not a valid PostgreSQL connection string"
    )


@pytest.mark.parametrize("given", ["0", "-5", "101", "x"])
def test_a_drill_hit_out_of_range_is_refused(
    given: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Hit 0 ran every drill at its first hit and a negative one failed them all as
    "never happened"; a pin in a plan takes the same range."""
    run = ["drill", "run", "--drill", "D1-kill", "--hit", given]
    line = argument_refused(capsys, *run)
    assert line == "wayline drill run: error: argument --hit: must be a whole number from 1 to 100"


@pytest.mark.parametrize("given", ["-5", "-0x1", str(2**63), "0x8000000000000000", "abc"])
@pytest.mark.parametrize("action", ["run", "self-test"])
def test_a_drill_seed_out_of_range_is_refused(
    given: str, action: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A negative seed ran and printed reproduction lines with ``--seed 0x-5``, which
    no run accepts; one past ``bigint`` ended in a traceback when the run was recorded."""
    line = argument_refused(capsys, "drill", action, "--seed", given, "--dsn", CLOSED)
    assert line == (
        f"wayline drill {action}: error: argument --seed: must be a whole number from 0 to "
        f"{2**63 - 1} (decimal or 0x hex)"
    )


@pytest.mark.parametrize(
    "action", [["run"], ["self-test"], ["plan", "generate", "order.fulfillment@1"]]
)
def test_a_drill_schema_that_is_no_schema_name_is_refused(
    action: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """``plan generate --schema 'x; drop'`` was a traceback, and ``run`` ran its drills
    unrecorded behind a warning, exit 0; now each is the usage line the store's
    commands give (before the server is asked: CLOSED makes an unfixed run stop fast)."""
    line = argument_refused(capsys, "drill", *action, "--schema", "x; drop", "--dsn", CLOSED)
    assert line == (
        f"wayline drill {' '.join(action[:2])}: error: argument --schema: invalid schema name "
        "'x; drop': use 1-63 characters from a-z, 0-9 and _, starting with a letter or _"
    )


@pytest.mark.parametrize("given", ["", " ", ",", " , "])
def test_an_empty_drill_selection_is_refused(
    given: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--drill "$DRILLS"`` with the variable unset ran every drill of the profile."""
    line = argument_refused(capsys, "drill", "run", "--drill", given, "--dsn", CLOSED)
    assert line == (
        "wayline drill run: error: argument --drill: give drill ids or families, "
        "comma-separated, e.g. D1,D3,D4-sigstop (see `wayline drill list`)"
    )


@pytest.mark.parametrize("where", ["a-file", "a-file/logs"])
def test_drill_artifacts_that_cannot_be_a_directory_are_refused_before_any_drill_runs(
    where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    target = tmp_path / where
    status, line = refused(capsys, "drill", "run", "--drill", "D1-kill", "--artifacts", str(target))
    assert (status, line) == (
        1,
        f"wayline drill run: the --artifacts directory {target} cannot be written "
        "(Not a directory)",
    )


def test_the_studio_port_is_not_zero(capsys: pytest.CaptureFixture[str]) -> None:
    """Port 0 would have the system choose a port, which the studio could not announce."""
    studio = ["studio", "--dsn", CLOSED, "--port", "0"]
    assert argument_refused(capsys, *studio) == f"wayline studio: error: argument --port: {PORTS}"


@pytest.mark.parametrize("url", ["ftp://traces.example/{trace_id}", "https://traces.example/"])
def test_a_trace_url_that_links_nowhere_is_refused_before_the_studio_announces_itself(
    url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The studio printed its address as if serving, then a traceback of the check."""
    monkeypatch.setenv("WAYLINE_TRACE_URL", url)
    status, line = refused(capsys, "studio", "--dsn", CLOSED)
    assert (status, line) == (
        2,
        "wayline studio: WAYLINE_TRACE_URL must be an http(s) address holding {trace_id}",
    )


def test_a_metrics_port_in_use_is_refused_before_the_worker_runs(
    pg_dsn: str, schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        busy = taken.getsockname()[1]
        worker = ["worker", "--app", "examples.orders:app", "--metrics-port", str(busy)]
        status = main([*worker, "--dsn", pg_dsn, "--schema", schema])
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "running" not in out
    assert (status, err) == (
        1,
        f"wayline worker: the metrics port {busy} cannot be bound on 127.0.0.1 "
        "(Address already in use)\n",
    )


LEASE_BOUNDS = "from 1 (MIN_LEASE_DURATION) to 900 (MAX_LEASE_DURATION)"
POLL_BOUNDS = "from 0.01 (MIN_WORKER_POLL_INTERVAL) to 60 (MAX_WORKER_POLL_INTERVAL)"
DRAIN_BOUNDS = "more than 0 and at most 900 (MAX_WORKER_DRAIN)"


@pytest.mark.parametrize(
    ("flag", "given", "bounds"),
    [
        # 0.1 was taken: the worker renewed every 33 ms and lost its leases to any pause
        *(("--lease-seconds", given, LEASE_BOUNDS) for given in ("0", "nan", "0.1", "901")),
        # 0.0001 was taken: an idle worker would ask the database 10,000 times a second
        *(("--poll-seconds", given, POLL_BOUNDS) for given in ("-1", "61", "0.0001")),
        *(("--drain-seconds", given, DRAIN_BOUNDS) for given in ("0", "901", "-1e3")),
    ],
)
def test_a_worker_timing_is_refused_outside_its_bounds(
    flag: str, given: str, bounds: str, capsys: pytest.CaptureFixture[str]
) -> None:
    worker = ["worker", "--app", "examples.orders:app", "--dsn", CLOSED, flag, given]
    assert argument_refused(capsys, *worker) == (
        f"wayline worker: error: argument {flag}: must be a number of seconds {bounds}"
    )


def test_a_negative_duration_is_a_value_refused_for_what_it_is(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """argparse took ``-1d`` for an option and said only "expected one argument"."""
    keep = ["retention", "set", "--dsn", CLOSED, "--keep", "-1d", "--as", "ann"]
    assert argument_refused(capsys, *keep) == (
        "wayline retention set: error: argument --keep: expected a duration: a whole number "
        "followed by ms, s, m, h or d, e.g. 500ms, 30s, 5m, 72h, 7d"
    )


def test_an_unknown_option_is_refused_under_the_commands_own_name(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """It said only ``wayline: error: unrecognized arguments``, whatever the command."""
    keep = ["retention", "set", "--dsn", CLOSED, "--keep", "9d", "--as", "ann", "--kep", "1d"]
    assert argument_refused(capsys, *keep) == (
        "wayline retention set: error: unrecognized arguments: --kep 1d"
    )


def test_a_worker_id_that_is_no_id_is_refused_before_the_worker_runs(
    pg_dsn: str, schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store = ["--dsn", pg_dsn, "--schema", schema]
    worker = ["worker", "--app", "examples.orders:app", *store, "--worker-id", "w ü 1"]
    assert refused(capsys, *worker) == (  # bad input: exit 2, as every other bad argument
        2,
        "wayline worker: the worker id must be 1 to 200 characters: ASCII letters, digits and "
        ". _ : @ / + -, starting with a letter or digit",
    )
    empty = refused(capsys, *worker[:-1], "")  # it silently became the default id
    assert empty == (
        2,
        "wayline worker: --worker-id is empty: give the id this worker's leases carry",
    )
    for idle in ("0", "abc"):
        assert argument_refused(capsys, *worker[:-2], "--concurrency", idle) == (
            "wayline worker: error: argument --concurrency: must be a whole number from 1 to "
            "1000 (MAX_WORKER_CONCURRENCY)"
        )


@pytest.mark.parametrize("given", ["", "\n"])
def test_an_empty_password_on_stdin_is_refused(
    given: str,
    pg_dsn: str,
    schema: str,
    conn: psycopg.Connection,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``--password-stdin`` asked to set a password; none is not 'generate one' (which
    would be a password nobody is shown). Nothing is written, not even the team."""
    monkeypatch.setattr("sys.stdin", io.StringIO(given))
    create = ["user", "create", "carol", "--team", "crew", "--password-stdin"]
    status, line = refused(capsys, *create, "--dsn", pg_dsn, "--schema", schema)
    assert (status, line) == (1, "wayline user create: a password needs 10 to 256 characters")
    assert conn.execute("SELECT count(*) FROM studio_users").fetchone() == (0,)
    assert conn.execute("SELECT count(*) FROM studio_teams").fetchone() == (0,)


@pytest.mark.parametrize(
    ("argv", "label"),
    [
        (["definition", "check"], "wayline definition check"),
        (["definition", "publish"], "wayline definition publish"),
        (["definition", "replay-check"], "wayline definition replay-check"),
        (["machine", "roles"], "wayline machine roles"),
        (["worker"], "wayline worker"),
    ],
)
def test_every_command_refuses_an_app_it_cannot_load_alike(
    pg_dsn: str, schema: str, capsys: pytest.CaptureFixture[str], argv: list[str], label: str
) -> None:
    """An --app whose module is missing was exit 2 from ``worker`` and ``replay-check``
    but exit 1 from ``check``, ``publish`` and ``machine roles``, and ``publish`` and
    ``replay-check`` named themselves ``wayline definition``: the same mistake is now
    the same usage error, under the command's own name."""
    store = [] if argv[0] != "worker" and argv[1] in ("check", "roles") else ["--dsn", pg_dsn]
    app = ["--app", "tests.fixtures.journal.absent:app"]
    status, line = refused(capsys, *argv, *app, *store, *(["--schema", schema] if store else []))
    assert status == 2
    assert line.startswith(f"{label}: cannot load tests.fixtures.journal.absent:app: ")


def test_replay_check_of_an_app_without_code_workflows_says_so(
    pg_dsn: str, schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """As ``check`` and ``publish`` refuse an app that declares nothing: a replay check
    that checked nothing must not pass silently."""
    check = ["definition", "replay-check", "--app", "examples.orders:app"]
    status, line = refused(capsys, *check, "--dsn", pg_dsn, "--schema", schema)
    assert (status, line) == (
        1,
        "wayline definition replay-check: examples.orders:app declares no code workflows, "
        "so there is nothing to replay",
    )


def test_a_kind_or_mode_after_a_vowel_takes_an(
    pg_dsn: str, schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """ "step 'reserve' is an activity step", not "a activity" (``with_article``)."""
    store = ["--dsn", pg_dsn, "--schema", schema]
    fulfilment = str(EXAMPLE)
    assert main(["definition", "publish", fulfilment, *store]) == 0
    assert main(["start", "order.fulfillment", "--id", "o-1", "--input", "{}", *store]) == 0
    capsys.readouterr()
    signal = refused(capsys, "signal", "o-1", "reserve", "--signal-id", "s-1", *store)
    assert signal == (1, "wayline signal: step 'reserve' is an activity step")
    submit = ["machine", "submit", "order.fulfillment", "--parent", "p", "--key", "k"]
    submitted = refused(capsys, *submit, "--input", "{}", "--as", "ann", *store)
    assert submitted == (
        1,
        "wayline machine submit: order.fulfillment is an orchestration definition, not a machine",
    )


@pytest.mark.parametrize("given_by", ["--dsn", "WAYLINE_DSN"])
def test_the_studio_says_what_gave_its_database_and_not_the_password(
    given_by: str, pg_dsn: str, schema: str
) -> None:
    """A real ``wayline studio`` process: its announcement, read up to its last line."""
    dsn = make_conninfo(pg_dsn, password=SECRET)  # the test server trusts local logins
    env = {k: v for k, v in os.environ.items() if k != "WAYLINE_DSN"}
    option = ["--dsn", dsn] if given_by == "--dsn" else []
    env |= {"WAYLINE_DSN": dsn} if given_by == "WAYLINE_DSN" else {}
    announced = _studio_announcement(schema, option, env)
    assert f"  database: given by {given_by}; a worker runs the example" in announced
    assert SECRET not in announced


def test_a_studio_whose_examples_another_team_published_says_it_left_them_out(
    pg_dsn: str, schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Following the README in order (the command line publishes the order example,
    then ``wayline studio``), the studio's Definitions page was empty with no word why:
    the example's name was the command line's team's, and the first start skipped it."""
    assert main(["definition", "publish", str(EXAMPLE), "--dsn", pg_dsn, "--schema", schema]) == 0
    announced = _studio_announcement(schema, ["--dsn", pg_dsn], dict(os.environ))
    assert (
        "  examples not published in team default: order.fulfillment (another team, such as "
        "the command line's, published those names first)\n"
    ) in announced


def _studio_announcement(schema: str, option: list[str], env: dict[str, str]) -> str:
    """What a real ``wayline studio`` process on a free port announces, read up to the
    announcement's last line; the studio is then stopped."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = str(probe.getsockname()[1])
    studio = [sys.executable, "-m", "engine.cli.main", "studio", "--schema", schema]
    with subprocess.Popen(
        [*studio, "--port", free, *option], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True
    ) as process:
        announced = _announcement(process)
        process.terminate()  # the studio unwinds on SIGTERM (install_signal_handlers)
        process.wait(timeout=STUDIO_STOP_SECONDS)
    return announced


def _announcement(process: subprocess.Popen[str]) -> str:
    """The studio's stdout up to its announcement's last line (or to its end)."""
    assert process.stdout is not None
    lines = []
    for line in process.stdout:
        lines.append(line)
        if line.startswith("  stop with Ctrl+C"):
            break
    return "".join(lines)


SUBMITTERS = {
    "wayline machine submit": [
        "machine",
        "submit",
        "document_approval",
        "--parent",
        "p",
        "--key",
        "k",
        "--input",
        "1",
    ],
    "wayline demo": ["demo", "--machine"],
}
STANDINGS = {
    "no member": (None, "ada is not a member of team crew: only a member may submit"),
    "a viewer": ("viewer", "ada's role in team crew does not cover the scope operator"),
}


@pytest.mark.parametrize(("label", "argv"), SUBMITTERS.items(), ids=SUBMITTERS)
@pytest.mark.parametrize(("role", "says"), STANDINGS.values(), ids=STANDINGS)
def test_a_submit_for_a_team_the_actor_does_not_stand_in_is_refused_and_writes_nothing(
    pg_dsn: str,
    schema: str,
    conn: psycopg.Connection,
    capsys: pytest.CaptureFixture[str],
    label: str,
    argv: list[str],
    role: str | None,
    says: str,
) -> None:
    """Every advance re-checks the submitter, so the engine would take this submit only
    for the execution to end ``dead-authorization``: the command line says why at once,
    and ``demo --machine`` (whose execution ended dead) refuses it with the same check
    before it publishes the machine."""
    store = ["--dsn", pg_dsn, "--schema", schema]
    if (
        label == "wayline machine submit"
    ):  # machine submit submits only a machine the team published
        asyncio.run(_publish_as(pg_dsn, schema, documents.flow.definition, "crew"))
    if role is not None:
        asyncio.run(_member(pg_dsn, schema, "ada", "crew", role))
    published = conn.execute("SELECT count(*) FROM definitions").fetchone()
    status, line = refused(capsys, *argv, "--as", "ada", "--team", "crew", *store)
    assert (status, line) == (1, f"{label}: {says}")
    assert conn.execute("SELECT count(*) FROM instances").fetchone() == (0,)
    assert conn.execute("SELECT count(*) FROM definitions").fetchone() == published


async def _member(dsn: str, schema: str, username: str, team: str, role: str) -> None:
    store = await Store.open(dsn, schema)
    try:
        async with store.connection() as conn:
            await member(conn, username, team, role)
            await conn.commit()
    finally:
        await store.close()


MIGRATE = ["instance", "migrate", "o-1", "--to", "2", "--actor", "a", "--reason", "r"]
TEAM_READS_AND_BULKS = {
    "wayline hold list": ["hold", "list"],
    "wayline dead-letter list": ["dead-letter", "list"],
    "wayline instance migrate": MIGRATE,
    "wayline instance migrate --dry-run": [*MIGRATE, "--dry-run"],
}


@pytest.mark.parametrize(("label", "argv"), TEAM_READS_AND_BULKS.items(), ids=TEAM_READS_AND_BULKS)
def test_a_team_no_id_could_name_is_refused_by_a_list_and_a_bulk_too(
    order_started: list[str],
    conn: psycopg.Connection,
    capsys: pytest.CaptureFixture[str],
    label: str,
    argv: list[str],
) -> None:
    """``hold list --team BAD`` said "no holds" as if the team were clear, and ``instance
    migrate --team BAD`` recorded its bulk for that team."""
    store = order_started
    line = argument_refused(capsys, *argv, "--team", "Not A Team", *store)
    label = label.removesuffix(" --dry-run")
    assert line == f"{label}: error: argument --team: {team_problem('Not A Team')}"
    assert conn.execute("SELECT count(*) FROM bulk_commands").fetchone() == (0,)


@pytest.mark.parametrize("given", ["abc", "0", "-3"])
def test_a_dead_letter_token_that_is_no_token_says_what_one_is(
    given: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """argparse's own words were "invalid int value: 'abc'"."""
    retry = ["dead-letter", "retry", "i-1", "w-1", "--token", given, "--dsn", CLOSED]
    assert argument_refused(capsys, *retry, "--actor", "ops", "--reason", "why") == (
        "wayline dead-letter retry: error: argument --token: must be the dead letter's "
        "fencing token, a whole number of at least 1"
    )
