"""`wayline drill list|run|self-test`: the verification harness from the command line.

``run`` prints the scorecard (its last line ``drills: N passed, N failed``) and exits 1
when any drill failed; on a terminal it shows a progress bar on stderr, elsewhere one
line per finished drill. Without ``--dsn`` it starts a private PostgreSQL cluster so the
drills that restart or pause the server can run; with ``--dsn`` they are reported as
not run. The harness registers ``drill`` itself, through the ``wayline.commands``
entry point in ``pyproject.toml``, so the engine's command line never imports it; the
harness proper is imported only when a drill command runs.
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import json
import logging
import os
import signal
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg

from engine.cli.options import (
    CommandFailed,
    cannot_connect,
    check_writable,
    checked_dsn,
    schema_name,
    writing,
)
from engine.store.embedded import EmbeddedPostgresError, install_signal_handlers
from engine.store.migrations import DEFAULT_SCHEMA
from engine.worker import logs

if TYPE_CHECKING:  # the harness proper is imported only when a drill command runs
    from verification.campaigns import Recording

EXIT_FAILED = 1
EXIT_USAGE = 2
CONNECT_SECONDS = 10
"""How long a drill command waits for the server of ``--dsn`` to answer before refusing."""
MAX_SEED = 2**63 - 1
"""The largest ``--seed``: a run is recorded with its seed in a ``bigint`` column."""
CAN_CREATE_SCHEMAS = "SELECT has_database_privilege(current_database(), 'CREATE')"
STOPPING_SIGNALS = (signal.SIGINT, signal.SIGTERM)
T = TypeVar("T")


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``drill`` and its actions to the ``wayline`` parser (the entry point)."""
    drill = commands.add_parser("drill", help="fault-injection drills that verify the engine")
    actions = drill.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="list the drills of a profile")
    listing.add_argument("--profile", choices=("ci", "deep"), default="ci")
    _workload_option(listing)
    listing.set_defaults(run=_list)
    run = actions.add_parser("run", help="run drills and print the scorecard")
    _campaign_options(run)
    run.add_argument(
        "--drill", type=_drill_ids, help="comma-separated ids or families, e.g. D1,D3,D4-sigstop"
    )
    _workload_option(run)
    run.add_argument("--json", type=Path, metavar="FILE", help="write the scorecard as JSON")
    run.add_argument("--junit", type=Path, metavar="FILE", help="write JUnit XML")
    run.add_argument("--hit", type=_hit, help="boundary hit number (to reproduce a drill)")
    run.add_argument("--artifacts", type=Path, help="where drill logs and the corpus go")
    _plan_options(run)
    run.set_defaults(run=_run)
    plan = actions.add_parser("plan", help="drill plans: faults pinned on your own steps")
    plan_actions = plan.add_subparsers(dest="plan_action", required=True, metavar="ACTION")
    generate = plan_actions.add_parser(
        "generate", help="write the full matrix plan: every boundary x fault on every step"
    )
    generate.add_argument("definition", metavar="NAME@VERSION|FILE.json")
    generate.add_argument("--out", type=Path, metavar="FILE", help="default: standard output")
    generate.add_argument("--dsn", type=_dsn, help="where NAME@VERSION is published")
    generate.add_argument("--schema", default=DEFAULT_SCHEMA, type=schema_name)
    generate.add_argument(
        "--app", default="", metavar="MODULE:APP", help="the app declaring a code-first workflow"
    )
    generate.set_defaults(run=_generate)
    selftest = actions.add_parser("self-test", help="run the drills against broken engines")
    _campaign_options(selftest)
    selftest.set_defaults(run=_self_test)


def _plan_options(run: argparse.ArgumentParser) -> None:
    """``drill run``'s drill-plan flags (see ``verification.plan``)."""
    run.add_argument("--plan", type=Path, metavar="PLAN.json", help="run this drill plan")
    run.add_argument(
        "--definition", metavar="NAME@VERSION|FILE.json", help="drill this definition (with --pin)"
    )
    run.add_argument(
        "--pin", action="append", default=[], metavar="STEP:BOUNDARY:FAULT",
        help="a fault pinned on a step (repeatable)",
    )  # fmt: skip
    run.add_argument("--app", metavar="MODULE:APP", help="run your handlers instead of stubs")
    run.add_argument("--input", type=_json_value, help="the instance's input as JSON")
    run.add_argument("--for-each-pin", action="store_true", help="one drill per pin")


def _campaign_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", choices=("ci", "deep"), default="ci")
    parser.add_argument("--seed", type=_seed, help="master seed (decimal or 0x hex)")
    parser.add_argument(
        "--dsn", type=_dsn, help="run on this PostgreSQL (default: a private cluster)"
    )
    parser.add_argument(  # checked here: a bad one was a traceback, or a run unrecorded
        "--schema", default=DEFAULT_SCHEMA, type=schema_name, help="where runs are recorded"
    )
    logs.add_option(parser)


def _workload_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--workload",
        choices=("flow", "machine", "code"),
        help="only the drills of activity flows, state machines or code-first workflows",
    )


def _json_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise argparse.ArgumentTypeError("must be JSON, e.g. '{\"amount\": 3}'") from None


def _drill_ids(text: str) -> list[str]:
    """``--drill``: at least one id or family. An empty one (``--drill "$DRILLS"`` with
    the variable unset) ran the whole profile, the opposite of choosing."""
    ids = [d.strip() for d in text.split(",") if d.strip()]
    if not ids:
        raise argparse.ArgumentTypeError(
            "give drill ids or families, comma-separated, e.g. D1,D3,D4-sigstop "
            "(see `wayline drill list`)"
        )
    return ids


def _hit(text: str) -> int:
    """``--hit``: which hit of a boundary the fault fires on, as a plan's pin takes it."""
    from verification.plan import MAX_HIT

    if not text.isdecimal() or not 1 <= int(text) <= MAX_HIT:
        raise argparse.ArgumentTypeError(f"must be a whole number from 1 to {MAX_HIT}")
    return int(text)


def _seed(text: str) -> int:
    """``--seed``: a whole number the run can be recorded with and a failed drill's
    reproduction line (``--seed 0xHEX``) reads back; a negative one was written as
    ``0x-5``, which no run accepts, and one past ``bigint`` ended in a traceback."""
    try:
        seed = int(text, 0)
    except ValueError:
        seed = -1
    if not 0 <= seed <= MAX_SEED:
        raise argparse.ArgumentTypeError(
            f"must be a whole number from 0 to {MAX_SEED} (decimal or 0x hex)"
        )
    return seed


def _dsn(text: str) -> str:
    """``--dsn``: a PostgreSQL connection string (never echoed: it may hold a password).
    The drills take their server only from ``--dsn``, never from WAYLINE_DSN: a drill
    creates and drops schemas, so running on a server is always asked for by name."""
    try:
        return checked_dsn(text)
    except CommandFailed:
        raise argparse.ArgumentTypeError("not a valid PostgreSQL connection string") from None


def _check_reachable(dsn: str | None, drilling: bool = True) -> None:
    """Refuse a ``--dsn`` no server answers, before any drill starts: otherwise each
    part of the harness would fail on its own, with the driver's text (which can quote
    the host and the user) in a traceback. ``drilling``: drills will run there, each in
    a schema it creates, so a role that may not create one (a CI's restricted role) is
    refused too; it ended in the driver's ``permission denied`` traceback."""
    if dsn is None:
        return
    try:
        with psycopg.connect(dsn, connect_timeout=CONNECT_SECONDS, autocommit=True) as conn:
            row = conn.execute(CAN_CREATE_SCHEMAS).fetchone()
    except psycopg.Error:
        raise CommandFailed(cannot_connect(env="")) from None
    if drilling and not (row and row[0]):
        raise CommandFailed(
            "the --dsn role may not create schemas in its database, and each drill runs in "
            "a schema of its own: give a role with CREATE on the database"
        )


def _make_directory(path: Path, what: str) -> None:
    """Make ``path`` (where drill logs go) before any drill runs, or refuse it: a file
    there, a file above it, no permission."""
    with writing(path, what):
        if path.exists() and not path.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))
        path.mkdir(parents=True, exist_ok=True)


def _list(args: argparse.Namespace) -> int:
    from verification.drills.catalogue import catalogue
    from verification.profiles import PROFILES

    for spec in catalogue(PROFILES[args.profile], 0, args.workload or ""):
        flags = " [owned server]" if spec.owned_server else ""
        print(f"{spec.id:<44} {spec.family:<4} {spec.title}{flags}")
    return 0


def _run(args: argparse.Namespace) -> int:
    logs.use_format(args.log_format)
    for path, what in _outputs(args):
        check_writable(path, what)
    _check_reachable(args.dsn)
    if args.artifacts:
        _make_directory(args.artifacts, "the --artifacts directory")
    misplaced = _misplaced(args)
    if misplaced:
        print(f"wayline drill run: {misplaced}", file=sys.stderr)
        return EXIT_USAGE
    if args.plan or args.definition:
        return _run_plan(args)
    from verification.campaigns import Recording, run_drills

    install_signal_handlers()  # SIGTERM unwinds: workers stopped, schemas and cluster gone
    wanted = args.drill or []
    recording = Recording()
    try:
        outcome = _until_stopped(
            run_drills(
                args.dsn,
                wanted,
                args.profile,
                args.seed,
                _progress(),
                schema=args.schema,
                artifacts=args.artifacts,
                hit=args.hit,
                workload=args.workload or "",
                recording=recording,
            )
        )
    except ValueError as error:
        print(f"wayline drill run: {error}", file=sys.stderr)
        return EXIT_USAGE
    except _Stopped as stopped:
        return stopped.exit("wayline drill run", recording)
    return _report(args, outcome)


def _misplaced(args: argparse.Namespace) -> str:
    """Why flags of the other kind of run were given, or ''. A flag that would be
    ignored is refused: ``--plan P --drill D1`` ran the plan alone and said nothing."""
    if args.plan or args.definition:
        if args.drill or args.workload or args.hit is not None or args.profile != "ci":
            return (
                "--drill, --workload, --hit and --profile choose the harness's own drills, "
                "not a plan's (a plan runs its own pins, under the ci profile): run them apart"
            )
    elif args.pin or args.app or args.for_each_pin or args.input is not None:
        return "--pin, --app, --input and --for-each-pin go with --plan or --definition"
    return ""


class _Stopped(Exception):
    """A drill command stopped by a signal (``_until_stopped``)."""

    def __init__(self, signum: int) -> None:
        self.signum = signum

    def exit(self, command: str, recording: Recording | None = None) -> int:
        """Say so in one line, with what became of the run's record (``recording``; None
        for a command that records no run); the status."""
        name = signal.Signals(self.signum).name
        said = ""
        if recording is not None and recording.kept:
            said = "; the run is recorded as stopped"
        elif recording is not None:
            said = f"; the run is not recorded ({recording.why_not})"
        print(
            f"{command}: stopped by {name}; the drills under way were cleaned up (their "
            f"processes and schemas){said}",
            file=sys.stderr,
        )
        return 128 + self.signum


def _until_stopped(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` until it ends or SIGINT or SIGTERM stops it (_Stopped). A stop cancels
    ``main`` once, from the top, so every drill under way unwinds in order (its processes
    stopped, its schema dropped) and the run is recorded as stopped: an interrupted
    ``asyncio.run`` cancels every task at once, and a drill's cleanup, cancelled again
    through its parent, was cut short and left its schema behind. A second signal while
    the drills clean up is ignored. A private cluster that cannot be had (no server
    binaries, a failed initdb) is one line (CommandFailed): it was a traceback."""
    received: list[int] = []

    async def stoppable() -> T:
        task, loop = asyncio.current_task(), asyncio.get_running_loop()
        assert task is not None

        def stop(signum: int) -> None:
            if not received:
                _say("stopping: cleaning up the drills under way...")
                task.cancel()
            received.append(signum)

        for signum in STOPPING_SIGNALS:
            loop.add_signal_handler(signum, stop, signum)
        return await main

    try:
        return asyncio.run(stoppable())
    except asyncio.CancelledError:
        if not received:
            raise
        raise _Stopped(received[0]) from None
    except EmbeddedPostgresError as error:  # without --dsn: no server binaries, an initdb
        raise CommandFailed(f"{error}; or give --dsn a PostgreSQL to drill on") from None


def _outputs(args: argparse.Namespace) -> list[tuple[Path, str]]:
    """The files a run writes when it ends, with how a refusal names them."""
    named = ((args.json, "the --json file"), (args.junit, "the --junit file"))
    return [(path, what) for path, what in named if path]


def _report(args: argparse.Namespace, outcome: Any, before: str = "", text: str = "") -> int:
    """Print the scorecard (``text``, else the run's; after ``before``), write --json
    and --junit, and the exit. The scorecard comes first: a file that cannot be written
    loses no run."""
    text = text or outcome.text
    print(f"{before}\n{text}" if before else text, flush=True)
    for path, what in _outputs(args):
        with writing(path, what):
            is_json = path is args.json
            path.write_text(
                json.dumps(outcome.card, indent=2, default=str) if is_json else outcome.junit()
            )
    return EXIT_FAILED if outcome.failed else 0


def _run_plan(args: argparse.Namespace) -> int:
    """``drill run --plan`` or ``--definition --pin``: a team's own workflow, drilled."""
    from verification import plan_report, plan_sources, reports
    from verification.campaigns import Recording, run_plans
    from verification.plan import PlanInvalid

    install_signal_handlers()
    try:
        if args.plan and args.definition:
            raise PlanInvalid(["give --plan or --definition, not both"])
        if args.plan and (args.pin or args.app or args.input is not None):
            raise PlanInvalid([
                "--pin, --app and --input go with --definition: a plan file carries its "
                "own pins, app and input (edit the plan, or drill its definition with "
                "--definition and --pin)"
            ])  # fmt: skip
        plan = (
            plan_sources.read_shaped(args.plan)
            if args.plan
            else plan_sources.shaped_from_flags(args.definition, args.pin, args.app, args.input)
        )
        drilled = asyncio.run(plan_sources.drilled(plan, args.dsn, args.schema, args.for_each_pin))
    except PlanInvalid as error:
        print(f"wayline drill run: {error}", file=sys.stderr)
        return EXIT_USAGE
    progress, recording = _progress(), Recording()
    try:
        outcome = _until_stopped(
            run_plans(args.dsn, drilled, args.seed, progress, schema=args.schema,
                      artifacts=args.artifacts, recording=recording)
        )  # fmt: skip
    except _Stopped as stopped:
        return stopped.exit("wayline drill run", recording)
    card = outcome.card  # the plan sections list the findings: the scorecard need not
    text = reports.text(card, listed=plan_report.listed(card))
    return _report(args, outcome, plan_report.text(card), text)


def _generate(args: argparse.Namespace) -> int:
    """``drill plan generate``: the full matrix plan of a definition, as JSON."""
    from verification import plan_sources
    from verification.plan import PlanInvalid, matrix

    _check_reachable(args.dsn, drilling=False)
    try:
        plan = plan_sources.plan_from_flags(args.definition, [], args.app, None)
        definition = asyncio.run(plan_sources.definition_of(plan, args.dsn, args.schema))
        full = matrix(plan, definition)
    except PlanInvalid as error:
        print(f"wayline drill plan generate: {error}", file=sys.stderr)
        return EXIT_USAGE
    document = full.as_json()
    if full.definition_file:  # relative to the plan, as a plan reads it
        base = (args.out or Path.cwd() / "plan.json").resolve().parent
        document["definition_file"] = os.path.relpath(full.definition_file, base)
    text = json.dumps(document, indent=2) + "\n"
    if args.out:
        with writing(args.out, "the output file"):
            args.out.write_text(text)
        ref = f"{definition.name}@{definition.version}"
        print(f"wrote {len(full.pins)} pins on {ref} to {args.out}")
    else:
        sys.stdout.write(text)
    return 0


def _say(message: str) -> None:
    """A progress line on stderr; with ``--log-format json`` a record as the logs write
    it, since a log pipeline reads stderr as one JSON object per line (plain progress
    lines among the JSON records broke it)."""
    if logs.json_logs:
        record = logging.LogRecord("wayline.drills", logging.INFO, "", 0, message, None, None)
        message = logs.JsonFormatter().format(record)
    print(message, file=sys.stderr, flush=True)


def _progress() -> Any:
    """A bar on a terminal, else one line per finished drill (``_say``)."""
    return _Bar() if sys.stderr.isatty() and not logs.json_logs else _lines


def _lines(done: int, total: int, drill: dict[str, Any]) -> None:
    _say(f"[{done}/{total}] {drill['id']} {drill['verdict']} {drill['seconds']}s")


class _Bar:
    """A one-line progress bar on a terminal."""

    def __call__(self, done: int, total: int, drill: dict[str, Any]) -> None:
        width = 30
        filled = width * done // max(total, 1)
        line = f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {drill['id'][:40]:<40}"
        sys.stderr.write(line + ("\n" if done == total else ""))
        sys.stderr.flush()


def _self_test(args: argparse.Namespace) -> int:
    from verification.self_test import self_test

    logs.use_format(args.log_format)
    _check_reachable(args.dsn)
    install_signal_handlers()
    try:
        result = _until_stopped(self_test(args.dsn, args.profile, args.seed, progress=_say))
    except _Stopped as stopped:
        return stopped.exit("wayline drill self-test")
    print(result.text())
    return 0 if result.passed else EXIT_FAILED
