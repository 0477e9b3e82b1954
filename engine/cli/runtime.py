"""Commands that act on a running store: worker, start, signal, command, inspect, history,
and ``definition publish`` / ``definition list``.

Each opens the store (refusing a schema that is behind), calls the client API and
prints a short answer, or ``--json`` for scripts. Known errors print one line on
stderr and exit 1; usage errors exit 2.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import shlex
import signal
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from engine.api.client import Client
from engine.api.queries import Queries
from engine.api.waits import WaitTimedOut
from engine.cli.definitions import AppUnusable, add_source, app_definitions, app_from
from engine.cli.options import (
    DSN_ENV,
    EXIT_FAILED,
    CommandFailed,
    UsageError,
    actor,
    add_store_options,
    instance_id,
    named_instance,
    optional_dsn,
    outcome_code,
    outcome_unknown,
    port_or_none,
    print_invalid,
    reason,
    resolve_dsn,
    schema_name,
    signal_id,
    signal_name,
    team,
    whole_number,
)
from engine.decide.audit import COMMAND_LINE_ACTOR
from engine.decide.operator_actions import Action
from engine.model.definitions import Mode
from engine.model.description import (
    ATTEMPT_ENDINGS,
    HeldStarts,
    describe_instance,
    failure_line,
)
from engine.model.errors import (
    DefinitionInvalid,
    InputRefused,
    NotJSON,
)
from engine.model.events import Event, EventKind, event_to_json
from engine.model.files import load_definition
from engine.model.identifiers import split_pin, team_id_problem, team_instance_id
from engine.model.inputs import json_or_text, read_json
from engine.model.instance import Instance, InstanceStatus, instance_to_json
from engine.model.limits import (
    MAX_HISTORY_PAGE_EVENTS,
    MAX_LEASE_DURATION,
    MAX_SEQUENCE,
    MAX_WAIT_TIMEOUT,
    MAX_WORKER_CONCURRENCY,
    MAX_WORKER_DRAIN,
    MAX_WORKER_POLL_INTERVAL,
    MIN_LEASE_DURATION,
    MIN_WORKER_POLL_INTERVAL,
)
from engine.model.pinned_code import PREFIXES
from engine.model.transitions import work_label
from engine.model.words import counted
from engine.modes.code.runs import run_id
from engine.modes.steps.fold.activities import RESOLUTIONS
from engine.store import catalog, holds, reads, work_views
from engine.store.catalog import DefinitionConflict, conflict_message
from engine.store.errors import CommitUnknown, InstanceNotFound
from engine.store.rows import WorkState
from engine.store.store import DEFAULT_POOL_SIZE, Store
from engine.store.work_views import WorkRow
from engine.worker import logs, runner, tracing
from engine.worker.activities import ActivityRegistry
from engine.worker.faults import Faults
from engine.worker.health import worker_readiness
from engine.worker.loop import Worker, WorkerConfig
from engine.worker.metrics import Metrics

METRICS_HOST = "127.0.0.1"
"""Where ``--metrics-port`` listens: this host only."""
EFFECT_OPTIONS: dict[Action, dict[str, bool]] = {
    Action.PAUSE: {},
    Action.RESUME: {},
    Action.CANCEL: {},
    Action.TERMINATE: {},
    Action.RETRY_ACTIVITY: {"step": True},
    Action.RESOLVE_ACTIVITY: {"step": True, "resolution": True, "result": False},
    Action.APPROVE: {"step": True, "payload": False},
    Action.SIGNAL: {"step": True, "payload": False},
    Action.COMPENSATE: {"step": True},
    Action.RESOLVE_COMPENSATION: {"step": True, "code": True, "evidence": False},
}
"""The operator actions of ``wayline command`` (those the studio offers), each with the
options it takes and whether each is required; the option names are the engine's
effect arguments."""
EFFECT_FIELDS = ("step", "resolution", "result", "payload", "code", "evidence")


def register(commands: argparse._SubParsersAction) -> None:
    """Add the runtime commands to the ``wayline`` parser."""
    _worker(commands)
    register_demo(commands)
    start = add_command(commands, "start", "start an instance of NAME[@VERSION]", _start)
    # The instance's trace begins here; a short command waits only so long for its spans.
    start.set_defaults(traced_as="wayline-cli", exit_flush=tracing.EXIT_FLUSH_SECONDS)
    start.add_argument("definition", metavar="NAME[@VERSION]")
    start.add_argument(
        "--id",
        required=True,
        type=instance_id,
        help="instance id (starting is idempotent); a code-first run's id, without '/', "
        "names the run NAME/ID and a retried start joins it",
    )
    start.add_argument("--input", default="null", type=json_arg, help="input as JSON")
    start.add_argument(
        "--actor",
        default=COMMAND_LINE_ACTOR,
        type=actor,
        help=f"who starts it, kept with its start (default: {COMMAND_LINE_ACTOR})",
    )
    start.add_argument(
        "--team",
        default="",
        type=team,
        help="the team whose definition it starts and whose id --id is, stored as TEAM:ID "
        "as the studio stores it (default: the engine's own team, '')",
    )
    start.add_argument(
        "--wait",
        type=wait_seconds,
        metavar="SECONDS",
        help="then wait up to SECONDS for the instance to end and print how it ended "
        "(exit 1 unless it completed)",
    )
    status = add_command(
        commands, "status", "print {kind, seq, at} of an instance's newest event", _status
    )
    status.add_argument("instance", type=named_instance)
    sig = add_command(commands, "signal", "deliver a signal to a waiting step", _signal)
    sig.add_argument("instance", type=named_instance)
    sig.add_argument("step", metavar="STEP", type=signal_name, help="the signal's name")
    sig.add_argument(
        "--signal-id", required=True, type=signal_id, help="deduplication id of this signal"
    )
    sig.add_argument("--payload", default="null", type=json_arg, help="payload as JSON")
    _operator_command(commands)
    inspect = add_command(commands, "inspect", "show an instance's replayed state", _inspect)
    inspect.add_argument("instance", type=named_instance)
    inspect.add_argument("--json", action="store_true", help="print the full state as JSON")
    history = add_command(commands, "history", "print an instance's history", _history)
    history.add_argument("instance", type=named_instance)
    history.add_argument("--json", action="store_true", help="one JSON event per line")
    history.add_argument(
        "--after",
        type=history_position,
        default=0,
        metavar="POSITION",
        help="print the events after this position (default 0: from the first); "
        "the line after a page that is not the last gives the next one",
    )
    history.add_argument(
        "--limit",
        type=history_limit,
        default=MAX_HISTORY_PAGE_EVENTS,
        metavar="N",
        help=f"print at most N events (default and most: {MAX_HISTORY_PAGE_EVENTS})",
    )
    history.add_argument("--step", help="only the events of this step (its attempts, its waits)")


def _operator_command(commands: argparse._SubParsersAction) -> None:
    """``wayline command INSTANCE ACTION``: every operator action the studio offers."""
    cmd = add_command(commands, "command", "an audited operator command", _operator)
    cmd.add_argument("instance", type=named_instance)
    cmd.add_argument("action", choices=[verb(action) for action in EFFECT_OPTIONS])
    cmd.add_argument(
        "--actor", required=True, type=actor, help="who acts (recorded in the audit trail)"
    )
    cmd.add_argument(
        "--reason", required=True, type=reason, help="why (recorded in the audit trail)"
    )
    cmd.add_argument("--command-id", help="idempotency id (default: a new one)")
    cmd.add_argument("--step", help="the step a step action acts on")
    cmd.add_argument(
        "--resolution", choices=sorted(RESOLUTIONS), help="resolve-activity: how it settled"
    )
    cmd.add_argument(
        "--result", type=json_arg, help="resolve-activity succeeded: its result as JSON"
    )
    cmd.add_argument("--payload", type=json_arg, help="approve: the approval's payload as JSON")
    cmd.add_argument(
        "--code",
        type=outcome_code,
        help="resolve-compensation: a code saying how it was settled",
    )
    cmd.add_argument(
        "--evidence", help="resolve-compensation: what shows it settled (JSON, or text)"
    )


def verb(action: Action) -> str:
    """An action as the command line spells it: ``retry_activity`` is ``retry-activity``."""
    return action.value.replace("_", "-")


def register_demo(commands: argparse._SubParsersAction) -> None:
    """``wayline demo``: the example saga end to end (see examples/demo.py)."""
    demo = commands.add_parser(
        "demo",
        help="run the order-fulfillment example (or --machine) end to end",
        description="Run the example saga (or, with --machine, the document-approval "
        "state machine) on a private PostgreSQL (or --dsn) and print what happened.",
    )
    demo.add_argument("--dsn", help=f"use this PostgreSQL instead of a private one ({DSN_ENV})")
    demo.add_argument(
        "--machine", action="store_true", help="the document-approval state machine instead"
    )
    demo.add_argument(
        "--as",
        dest="actor",
        default="demo",
        help="--machine: submit as this studio user (with --team, to see it in the studio)",
    )
    demo.add_argument(
        "--team", default="", type=team, help="--machine: the submitter's studio team"
    )
    demo.add_argument("--schema", default="wayline", type=schema_name)
    demo.set_defaults(run=_demo)


def _demo(args: argparse.Namespace) -> int:
    """The example saga, or with ``--machine`` the document-approval machine, whose
    execution must complete: one that does not is a failure (exit 1), not a demo."""
    root = str(Path(__file__).resolve().parents[2])
    if root not in sys.path:
        sys.path.insert(0, root)
    from examples import demo, machine_demo

    dsn = optional_dsn(args)
    if not args.machine:
        return demo.run(dsn, args.schema)
    execution, status = machine_demo.run(dsn, args.schema, args.actor, args.team)
    if status != "completed":  # a submitter who may not is refused before it starts
        raise CommandFailed(
            f"{execution} ended {status}, not completed (`wayline inspect {execution}` says why)"
        )
    return 0


def register_definition_actions(actions: argparse._SubParsersAction) -> None:
    """``definition publish FILE.json|--app MODULE:APP`` and ``definition list``."""
    publish = add_command(actions, "publish", "publish a definition version", _publish)
    add_source(publish, "publish what the ActivityRegistry at MODULE:APP declares")
    publish.add_argument("--actor", default=COMMAND_LINE_ACTOR)
    publish.add_argument(
        "--team",
        default="",
        type=team,
        help="the team that owns the name, as when its studio publishes it "
        "(default: the engine's own team, '')",
    )
    publish.add_argument(
        "--require-compatible",
        action="store_true",
        help="publish nothing when a running instance of another version could not move "
        "to the new one (for code workflows: its journal diverges from the app's code)",
    )
    add_command(actions, "list", "list published definition versions", _list)
    check = add_command(
        actions,
        "replay-check",
        "replay the journals of active runs of other versions against an app's code",
        _replay_check,
    )
    check.add_argument("--app", required=True, metavar="MODULE:APP")
    check.add_argument("--json", action="store_true", help="one JSON verdict per line")


def add_group(
    commands: argparse._SubParsersAction, name: str, help: str, description: str
) -> argparse._SubParsersAction:
    """A subcommand that only groups actions (``wayline machine submit``): its actions."""
    group = commands.add_parser(name, help=help, description=description)
    return group.add_subparsers(dest="action", required=True, metavar="ACTION")


def add_command(
    commands: argparse._SubParsersAction,
    name: str,
    help: str,
    action: Callable[[Client, argparse.Namespace], Awaitable[int]],
) -> Any:
    """A database-backed subcommand running ``action`` on a client; its failures are
    reported as ``<prog>: <message>`` (``wayline hold place: ...``, see ``Parser``)."""
    parser = commands.add_parser(name, help=help, description=help[0].upper() + help[1:] + ".")
    add_store_options(parser)
    parser.set_defaults(run=lambda args: _run(args, action))
    return parser


def _worker(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "worker",
        help="run a worker for an activity registry",
        description="Claim and process due work until SIGTERM.",
    )
    add_store_options(parser)
    parser.set_defaults(traced_as="wayline-worker")
    parser.add_argument(
        "--app",
        required=True,
        metavar="MODULE:REGISTRY",
        help="where the ActivityRegistry object is, e.g. examples.orders:app",
    )
    parser.add_argument(
        "--concurrency",
        type=lambda text: whole_number(
            text,
            1,
            MAX_WORKER_CONCURRENCY,
            f"must be a whole number from 1 to {MAX_WORKER_CONCURRENCY} (MAX_WORKER_CONCURRENCY)",
        ),
        default=16,
        help="attempts run at once (default: 16)",
    )
    parser.add_argument("--worker-id", help="stable worker identity (default: host-pid)")
    parser.add_argument(
        "--lease-seconds",
        type=seconds_up_to(
            MAX_LEASE_DURATION, "MAX_LEASE_DURATION", MIN_LEASE_DURATION, "MIN_LEASE_DURATION"
        ),
        default=timedelta(seconds=30),
        help="how long a claim lasts unless renewed (default: 30)",
    )
    parser.add_argument(
        "--poll-seconds",
        type=seconds_up_to(
            MAX_WORKER_POLL_INTERVAL,
            "MAX_WORKER_POLL_INTERVAL",
            MIN_WORKER_POLL_INTERVAL,
            "MIN_WORKER_POLL_INTERVAL",
        ),
        default=timedelta(seconds=1),
        help="poll interval when no notification arrives (default: 1)",
    )
    parser.add_argument(
        "--drain-seconds",
        type=seconds_up_to(MAX_WORKER_DRAIN, "MAX_WORKER_DRAIN"),
        default=WorkerConfig.drain_timeout,
        help="on SIGTERM/SIGINT, how long attempts in flight may finish (default: 30)",
    )
    parser.add_argument(
        "--metrics-port",
        type=port_or_none,
        help="serve Prometheus metrics, /healthz and /readyz here (0: none, the default)",
    )
    logs.add_option(parser)
    parser.set_defaults(run=lambda args: _run(args, _run_worker))


def _run(
    args: argparse.Namespace, action: Callable[[Client, argparse.Namespace], Awaitable[int]]
) -> int:
    """Run ``action`` on a client of the store. ``engine.cli.main`` prints its errors;
    an unknown instance gets a hint, and a ValueError (a bound such as ``--concurrency``)
    is a failure too."""
    try:
        dsn = resolve_dsn(args)
        return runner.run(_with_client(dsn, args, action))
    except InstanceNotFound as error:
        raise CommandFailed(f"{error}{_team_hint(getattr(args, 'instance', ''))}") from None
    except ValueError as error:
        raise CommandFailed(str(error)) from None
    finally:
        if flush := getattr(args, "exit_flush", None):
            tracing.flush_at_exit(flush)


def _team_hint(instance_id: str) -> str:
    """Why an id copied from the studio is not found: the studio stores a team's ids as
    ``TEAM:ID`` and shows them without the prefix, while the command line's team is ''."""
    if not instance_id or ":" in instance_id:
        return ""
    return f" (an instance started in the studio is stored as TEAM:{instance_id})"


async def _with_client(
    dsn: str,
    args: argparse.Namespace,
    action: Callable[[Client, argparse.Namespace], Awaitable[int]],
) -> int:
    # A worker needs a connection per busy slot, plus claims, renewals and sweeps.
    pool_size = max(DEFAULT_POOL_SIZE, getattr(args, "concurrency", 0) + 4)
    if service := getattr(args, "traced_as", ""):
        _traced(service)  # before the client is made: it takes the provider then
    store = await Store.open(dsn, args.schema, max_size=pool_size)
    try:
        return await action(Client(store), args)
    finally:
        await store.close()


def json_arg(text: str) -> Any:
    """argparse type for JSON options, read with the engine's rules (``engine.model.inputs``)."""
    try:
        return read_json(text, "the value")
    except NotJSON:
        raise argparse.ArgumentTypeError("must be valid JSON") from None
    except InputRefused as refused:  # nested too deeply, a NUL, bytes that are not UTF-8
        raise argparse.ArgumentTypeError(str(refused)) from None


async def _publish(client: Client, args: argparse.Namespace) -> int:
    """Publish the file, or every definition the app declares once its code lints
    clean (one at a time: a conflict stops at that definition, naming it). Each one's
    compatibility report is printed when instances of other versions are running; with
    ``--require-compatible`` nothing is published when any of them is incompatible."""
    codes: dict[Any, Any] = {}
    if args.app is not None:
        definitions, problems = app_definitions(args.app)
        for problem in problems:
            print(problem)
        if problems:
            return EXIT_FAILED
        codes = {flow.ref: flow for flow in app_from(args.app).workflows}
    else:
        try:
            definitions = [load_definition(args.file)]
        except DefinitionInvalid as exc:
            print_invalid(exc)
            return EXIT_FAILED
    reports = [await client.check_compatibility(d, codes.get(d.ref)) for d in definitions]
    for report in reports:
        if report.verdicts or not report.complete:
            print("\n".join(report.summary()))
    refused = [report.refusal() for report in reports if not report.acceptable]
    if args.require_compatible and refused:  # the report said who; this says what it means
        raise CommandFailed("; ".join(refused))
    for definition in definitions:
        created = await client.publish(
            definition,
            args.actor,
            args.team,
            require_compatible=args.require_compatible,
            code=codes.get(definition.ref),
        )
        verb = "published" if created else "already published"
        print(f"{verb} {definition.ref} {definition.fingerprint}")
    return 0


async def _replay_check(client: Client, args: argparse.Namespace) -> int:
    """Print the compatibility report of every code workflow the app declares (the
    journals of active runs of its other versions replayed against its code); exit 1
    when any run is incompatible, or when it declares none (AppUnusable, as ``check``
    and ``publish`` refuse an app that declares nothing: silence would read as a pass)."""
    flows = app_from(args.app).workflows
    if not flows:
        raise AppUnusable(f"{args.app} declares no code workflows, so there is nothing to replay")
    incompatible = False
    for flow in flows:
        report = await client.check_compatibility(flow.definition, flow)
        incompatible |= not report.acceptable
        if args.json:
            for verdict in report.verdicts:
                print(json.dumps({"definition": str(flow), **verdict.to_json()}, sort_keys=True))
        else:
            print("\n".join(report.summary()))
    return EXIT_FAILED if incompatible else 0


async def _list(client: Client, args: argparse.Namespace) -> int:
    for version in await catalog.versions(client.store):
        d = version.definition
        flag = " deprecated" if version.deprecated else ""
        size = f"{len(d.steps)} steps" if d.manifest is None else f"{d.mode} manifest"
        print(f"{d.name}@{d.version} {d.fingerprint[:12]} {size}{flag}")
    return 0


async def _start(client: Client, args: argparse.Namespace) -> int:
    """Start (or join) the instance, as ``--team``'s when given: a step list's or a
    machine's id is stored as ``TEAM:ID``, a code run's is ``NAME/ID`` (both as the
    studio stores them), and only a definition the team published may be started."""
    name, version = split_pin(args.definition)
    mode = (await client.startable(name, version)).mode
    await require_owned(client, name, args.team, "starts its own definitions")
    if mode == Mode.CODE:
        _check_run_id(name, args.id)
        run, started = await client.start_run(
            name, args.input, id=args.id, version=version, tenant=args.team, started_by=args.actor
        )
        print(f"run: {run}\nstarted: {str(started).lower()}")
        return await _ended(client, run, args.wait)
    if problem := team_id_problem(args.team, args.id):
        raise UsageError(f"argument --id: the id {problem}")
    stored = team_instance_id(args.team, args.id)
    state, created = await client.start_or_join(
        name, stored, args.input, version, args.team, args.actor
    )
    verb = "started" if created else "already started: joined"
    print(f"{verb} {state.instance_id} on {state.definition} ({state.status.label})")
    return await _ended(client, state.instance_id, args.wait)


async def require_owned(client: Client, name: str, team: str, rule: str) -> None:
    """Refuse a definition another team published, as the studio does (``rule`` says
    what a team may do: ``"starts its own definitions"``): its instances would act on
    that team's rows. An unpublished name is left to the command, which says so."""
    owner = await catalog.name_owner(client.store, name)
    if owner is not None and owner != team:
        where = f"team {team}" if team else "the engine's own team '' (no --team)"
        raise CommandFailed(f"{name} is not published in {where}: a team {rule}")


def _check_run_id(name: str, id: str) -> None:
    """A code workflow's run id is stricter than an instance id (no '/', and room for
    ``NAME/`` in front): only known once NAME is looked up, but still a wrong --id,
    so a usage error (exit 2) naming the option rather than the engine's refusal."""
    try:
        run_id(name, id)
    except InputRefused as refused:
        rule = str(refused)
        raise UsageError(
            f"argument --id: {name} is a code workflow, whose runs are {name}/ID: "
            f"{rule[0].lower()}{rule[1:]}"
        ) from None


async def _ended(client: Client, instance_id: str, wait: timedelta | None) -> int:
    """With ``--wait``: print how the instance ended (0 only when it completed); one
    that did not end in time is said with what it waits for now (as ``inspect`` says).
    A run that continued as new is followed to its successor, within the same wait."""
    if wait is None:
        return 0
    sys.stdout.flush()  # the start's line comes first, whatever follows on stderr
    deadline = time.monotonic() + wait.total_seconds()
    state = await _waited(client, instance_id, wait)
    while state.status is InstanceStatus.CONTINUED_AS_NEW and state.successor_id:
        print(f"{state.instance_id} continued as {state.successor_id}")
        left = timedelta(seconds=max(deadline - time.monotonic(), 0.001))
        instance_id = state.successor_id
        state = await _waited(client, instance_id, left)
    print(f"ended {state.instance_id} ({state.status.label})")
    if state.status is InstanceStatus.COMPLETED:
        return 0
    why = f"; {failure_line(state)}" if state.failure_code else ""
    print(
        f"wayline start: {instance_id} did not complete: it ended {state.status.label}{why}",
        file=sys.stderr,
    )
    return EXIT_FAILED


async def _waited(client: Client, instance_id: str, wait: timedelta) -> Instance:
    """The instance once it ended within ``wait``; CommandFailed, saying what it waits
    for now, when it did not."""
    try:
        return await client.wait(instance_id, wait)
    except WaitTimedOut as waited:  # said with what it waits for: an operator, a signal
        state = await client.inspect(instance_id)
        said = [str(waited)]
        rows = await work_views.instance_work(client.store, instance_id)
        held = await holds.started_under_hold(client.store, state, rows)
        if now := await _now(client, state, held):
            said.append(f"now: {now}")
        said += await _held_by(client.store, state, rows)
        said += await unserved_lines(client.store, state, rows)
        raise CommandFailed("; ".join(said)) from None


def seconds_up_to(
    most: timedelta, limit: str, least: timedelta | None = None, least_limit: str = ""
) -> Callable[[str], timedelta]:
    """argparse type for a duration given in seconds, more than 0 (or at least ``least``,
    the constant named ``least_limit``) and at most ``most`` (the constant named
    ``limit``): the refusal names the flag (argparse adds it) and says the bounds in
    seconds, as the flag takes them, not the engine's timedelta."""
    if least is None:
        allowed = f"more than 0 and at most {most.total_seconds():g} ({limit})"
    else:
        allowed = (
            f"from {least.total_seconds():g} ({least_limit}) to {most.total_seconds():g} ({limit})"
        )

    def seconds(text: str) -> timedelta:
        try:
            value = timedelta(seconds=float(text))
        except (ValueError, OverflowError):  # not a number, NaN, or too large
            value = timedelta(0)
        if not (least or timedelta.resolution) <= value <= most:
            raise argparse.ArgumentTypeError(f"must be a number of seconds {allowed}")
        return value

    return seconds


wait_seconds = seconds_up_to(MAX_WAIT_TIMEOUT, "MAX_WAIT_TIMEOUT")
"""argparse type for ``--wait``: the bound ``Client.wait`` checks (``waits.check_timeout``),
so a bad value is refused before anything is started."""


async def _status(client: Client, args: argparse.Namespace) -> int:
    print(json.dumps(await client.status(args.instance), sort_keys=True))
    return 0


async def _signal(client: Client, args: argparse.Namespace) -> int:
    state = await client.signal(args.instance, args.step, args.signal_id, args.payload)
    print(f"signal {args.signal_id} accepted by {state.instance_id} ({state.status.label})")
    return 0


async def _operator(client: Client, args: argparse.Namespace) -> int:
    """Record the command with the same audit as the studio: actor, trimmed reason. Its
    id is printed (and named when the commit's answer is lost), so that it can be given
    again to learn what stands recorded without recording it twice."""
    action = Action(args.action.replace("-", "_"))
    effect = operator_effect(action, args)
    command_id = args.command_id or uuid.uuid4().hex
    reason = args.reason.strip()
    repeat = args.command_id is not None and await _recorded_as(client, args.instance, command_id)
    try:
        state = await client.command(
            args.instance, action, args.actor, reason, command_id, **effect
        )
    except CommitUnknown:
        raise outcome_unknown(command_id) from None
    done = "was recorded already (nothing recorded again)" if repeat else "recorded"
    print(f"{args.action} {done} on {state.instance_id} ({state.status.label})")
    print(f"command id: {command_id}")
    return 0


async def _recorded_as(client: Client, instance_id: str, command_id: str) -> bool:
    """Whether the instance's audit trail holds ``command_id`` already: a command given
    again with its id records nothing (the client answers with the state), and the
    line printed says so rather than "recorded"."""
    with contextlib.suppress(InstanceNotFound):
        state = await client.inspect(instance_id)
        return any(record.command_id == command_id for record in state.audit)
    return False


def operator_effect(action: Action, args: argparse.Namespace) -> dict[str, Any]:
    """The engine's effect arguments for ``action`` from the options; UsageError when a
    required one is missing or one the action does not take is given."""
    options = EFFECT_OPTIONS[action]
    given = {name for name in EFFECT_FIELDS if getattr(args, name) is not None}
    if extra := given - options.keys():
        raise UsageError(f"{verb(action)} does not take {_flags(extra)}")
    if missing := {name for name, required in options.items() if required} - given:
        raise UsageError(f"{verb(action)} needs {_flags(missing)}")
    effect = {name: getattr(args, name) for name in given}
    if "result" in effect and effect.get("resolution") != "succeeded":
        raise UsageError(f"{verb(action)} takes --result only with --resolution succeeded")
    if "code" in effect:
        effect["code"] = effect["code"].strip()
    if "evidence" in effect:
        effect["evidence"] = json_or_text(effect["evidence"], "the evidence")
    return effect


def _flags(names: set[str]) -> str:
    return ", ".join(f"--{name}" for name in sorted(names))


async def _inspect(client: Client, args: argparse.Namespace) -> int:
    state = await client.inspect(args.instance)
    children = await reads.fan_out(client.store, state)
    predecessor = await Queries(client.store).predecessor(state.instance_id)
    if args.json:
        document = instance_to_json(state)  # the digest's fields, and who started it
        if state.started_by:
            document["started_by"] = state.started_by
        if progress := children.to_json():
            document["children_progress"] = progress
        if predecessor:
            document["predecessor_id"] = predecessor
        print(json.dumps(document, indent=2, sort_keys=True))
    else:
        rows = await work_views.instance_work(client.store, state.instance_id)
        held = await holds.started_under_hold(client.store, state, rows)
        earlier = await _earlier_attempts(client.store, state)
        print(describe_instance(state, earlier, held, children, predecessor))
        await _print_standing(client, state, rows, held)
    return 0


EARLIER_ATTEMPTS_SHOWN = 10
"""At most this many events that ended a step's earlier attempts ``wayline inspect``
lists under the step, the newest (a step retried hundreds of times would bury the rest
of the state); a line before them says which attempts are not listed and the
``wayline history`` command that lists them."""
ENDINGS_OF_LATEST = 2
"""Events that may end a step's latest attempt (``unknown``, then ``resolved``), which
the read of its earlier attempts' endings skips."""


async def _earlier_attempts(store: Store, state: Instance) -> dict[str, tuple[Event, ...]]:
    """By activity on a later attempt than its first, the newest events that ended its
    earlier attempts, at most ``EARLIER_ATTEMPTS_SHOWN`` (one read of its history's end,
    filtered to them)."""
    kinds = list(ATTEMPT_ENDINGS)
    limit = EARLIER_ATTEMPTS_SHOWN + ENDINGS_OF_LATEST
    found = {}
    for p in state.activities.values():
        if p.attempt > 1:
            events = await reads.newest_events(
                store, state.instance_id, limit, kinds=kinds, step=p.step
            )
            earlier = [e for e in events if e.attempt < p.attempt]
            found[p.step] = tuple(earlier[-EARLIER_ATTEMPTS_SHOWN:])
    return found


async def _print_standing(
    client: Client, state: Instance, rows: list[WorkRow], held: HeldStarts
) -> None:
    """Its dead letters, each with the fence a retry takes, then where it stands now:
    stopped at a dead letter when no other work of it is to run, else what it waits for
    (and, with a dead letter beside, that it runs again only once resolved)."""
    letters = [row for row in rows if row.state is WorkState.DEAD_LETTERED]
    moving = any(row.state in MOVING for row in rows)
    for letter in letters:
        detail = f": {letter.failure_detail}" if letter.failure_detail else ""
        fence = f"(work {letter.work_id}, token {letter.token})"
        what = work_label(letter.kind, letter.step)
        resolved = "discarded " if letter.discarded else ""
        print(f"  {resolved}dead letter {what} {fence}: {letter.failure_code}{detail}")
    held_back = any(letter.unresolved for letter in letters) and not state.status.terminal
    if held_back and not moving:
        print(f"  now: {STOPPED_AT_DEAD_LETTER}")
        return
    if letters and not moving and not state.status.terminal:
        print(f"  now: {STOPPED_AT_DISCARDED}")
        return
    if waits := await _now(client, state, held):
        print(f"  now: {waits}")
    if held_back:
        print(f"  {DEAD_LETTERS_WAIT}")
    for line in await _held_by(client.store, state, rows):
        print(f"  {line}")
    for line in await unserved_lines(client.store, state, rows):
        print(f"  {line}")


async def _now(client: Client, state: Instance, held: HeldStarts) -> str:
    """What the instance waits for now: the engine's decision on its state, unless an
    attempt it records started is one an incident hold keeps from running (the decision,
    which reads history alone, would call it running)."""
    return held.position(state) or await client.awaiting(state)


async def _held_by(store: Store, state: Instance, rows: list[WorkRow]) -> list[str]:
    """The incident holds that park the instance's work (``rows``), a sentence each:
    without them, "ready" work that no worker takes would read as a stuck engine."""
    parked = [row for row in rows if row.state is WorkState.HELD]
    if not parked or state.status.terminal:
        return []
    return [
        f"held by hold {hold.hold_id} on {hold.scope.label} ({hold.actor}: {hold.reason}):"
        " no worker runs its work until the hold is released (wayline hold release)"
        for hold in await holds.instance_holds(store, parked[0].tenant_id, state.instance_id)
    ]


async def unserved_lines(store: Store, state: Instance, rows: list[WorkRow]) -> list[str]:
    """A sentence per target of the instance's open work that no running worker runs
    (``work_views.unserved``): without it, an instance whose old version's workers were
    stopped reads as waiting for its next step, which no worker will ever take."""
    if state.status.terminal:
        return []
    return [unserved_line(target) for target in await work_views.unserved_targets(store, rows)]


def unserved_line(target: str) -> str:
    """What ``inspect`` says of ``target``, which no running worker runs."""
    cure = "a worker whose app registers it starts (wayline worker --app MODULE:REGISTRY)"
    if any(target.startswith(prefix) for prefix in PREFIXES):
        cure += " or the instance is migrated to a version a running worker runs"
        cure += " (wayline instance migrate)"
    return f"no worker: no running worker runs {target}: its work waits until {cure}"


DEAD_LETTERS_WAIT = (
    "a dead letter runs again only once an operator resolves it: "
    "wayline dead-letter list / retry / discard, or the studio's Dead letters"
)
STOPPED_AT_DEAD_LETTER = f"stopped at a dead letter: {DEAD_LETTERS_WAIT}"
"""An instance with dead letters and no other work to run: it moves no further until
one is resolved (with other work still open, say so beside what it waits for)."""
STOPPED_AT_DISCARDED = (
    "stopped: its dead-lettered work was discarded and never runs; "
    "wayline command INSTANCE cancel|terminate ends the instance"
)
"""An instance whose only dead letters were discarded and that has no other work: no
operator is asked to resolve them again, since nothing would run."""
MOVING = (WorkState.AVAILABLE, WorkState.LEASED, WorkState.HELD)


async def _history(client: Client, args: argparse.Namespace) -> int:
    """One page of the history: the events after ``--after``, at most ``--limit`` (of
    ``--step`` only, when given), then, when more follow, a line with the command that
    prints the next page (on stderr with ``--json``, which keeps stdout to events). A
    position past the last event is refused, as the studio and the API refuse it."""
    store = client.store
    last = (await reads.get_instance(store, args.instance)).sequence
    if args.after > last:
        raise UsageError(
            f"argument --after: {args.after} is past the end of this history: "
            f"{args.instance} has {counted(last, 'event')}, so --after is from 0 "
            f"(from the first) to {last}"
        )
    page = await reads.history_page(store, args.instance, args.after, args.limit, step=args.step)
    for event in page.events:
        record = event_to_json(event)
        print(json.dumps(record, sort_keys=True) if args.json else history_line(record))
    if page.next_after is not None:
        print(_next_page(args, page.next_after, last), file=sys.stderr if args.json else None)
    elif not page.events and not args.json:
        print(f"no events after {args.after}" + (f" of step {args.step}" if args.step else ""))
    return 0


def _next_page(args: argparse.Namespace, after: int, last: int) -> str:
    """The line after a page that is not the last: where it stopped, and the command
    that prints the next page (the same options, from there)."""
    again = ["wayline", "history", args.instance, "--after", str(after)]
    if args.limit != MAX_HISTORY_PAGE_EVENTS:
        again += ["--limit", str(args.limit)]
    if args.step:
        again += ["--step", args.step]
    if args.json:
        again.append("--json")
    return f"more events after {after} (the last is {last}): {shlex.join(again)}"


def history_position(text: str) -> int:
    """argparse type for ``history --after``: a position, 0 or more (the events after
    it are printed; 0 prints from the first)."""
    rule = "must be a position in the history, a whole number of at least 0 (0: from the first)"
    return whole_number(text, 0, MAX_SEQUENCE, rule)


def history_limit(text: str) -> int:
    """argparse type for ``history --limit``: 1 to MAX_HISTORY_PAGE_EVENTS, as a page of
    the history holds in the studio and the API."""
    rule = f"must be a whole number from 1 to {MAX_HISTORY_PAGE_EVENTS} (MAX_HISTORY_PAGE_EVENTS)"
    return whole_number(text, 1, MAX_HISTORY_PAGE_EVENTS, rule)


def history_line(record: dict[str, Any]) -> str:
    """One event as ``wayline history`` prints it: position, time, kind, then what
    tells it apart (its step, attempt and code; the version a start or a migration
    pins, and who started it; who commanded what and why, for an operator's command)."""
    parts = [f"{record['sequence']:>6}", record["occurred_at"], record["kind"]]
    parts += [f"{k}={record[k]}" for k in ("step", "attempt", "code") if k in record]
    if pin := record.get("definition"):  # a start's, a migration's
        parts.append(f"definition={pin['name']}@{pin['version']}")
    if starter := record.get("started_by"):
        parts.append(f"by {starter}")
    if record["kind"] == EventKind.OPERATOR_COMMAND_RECORDED.label:
        audit = record["data"]
        parts.append(f"{audit['action']} by {audit['actor']}: {audit['reason']}")
    return " ".join(parts)


async def _refuse_changed_code(client: Client, registry: ActivityRegistry) -> None:
    """A worker does not run code that differs from the version published under its
    name (DefinitionConflict, in the words publishing uses); it warns about a workflow
    not published yet, whose runs cannot start until it is."""
    published = await client.registries.refresh()
    for flow in registry.workflows:
        pinned = published.get(flow.name, flow.version)
        if pinned is None:
            print(f"warning: {flow} is not published; publish it to start runs", file=sys.stderr)
        elif pinned.fingerprint != flow.fingerprint:
            raise DefinitionConflict(conflict_message(flow.definition, pinned.fingerprint))


def _traced(service: str) -> None:
    """Traces for this process as the ``OTEL_*`` variables ask (UsageError saying what
    to install when they ask without the optional packages)."""
    try:
        tracing.configure(service)
    except RuntimeError as missing:
        raise UsageError(str(missing)) from None


async def _serve_metrics(metrics: Metrics, port: int, worker: Worker) -> asyncio.Server:
    """The worker's metrics, /healthz and /readyz on ``port``; CommandFailed, before any
    work is claimed, when the port cannot be bound (another process has it, most often)."""
    try:
        return await metrics.serve(METRICS_HOST, port, functools.partial(worker_readiness, worker))
    except OSError as error:
        reason = os.strerror(error.errno) if error.errno else type(error).__name__
        raise CommandFailed(
            f"the metrics port {port} cannot be bound on {METRICS_HOST} ({reason})"
        ) from None


async def _run_worker(client: Client, args: argparse.Namespace) -> int:
    logs.use_format(args.log_format)
    registry = app_from(args.app)
    await _refuse_changed_code(client, registry)
    if args.worker_id is not None and not args.worker_id.strip():
        raise UsageError("--worker-id is empty: give the id this worker's leases carry")
    try:
        config = WorkerConfig(
            concurrency=args.concurrency,
            lease=args.lease_seconds,
            renew_every=args.lease_seconds / 3,
            poll_interval=args.poll_seconds,
            drain_timeout=args.drain_seconds,
            **({"worker_id": args.worker_id} if args.worker_id else {}),
        )
        config.check()
    except ValueError as bad:  # a concurrency or an id out of bounds: the command line's
        raise UsageError(str(bad)) from None
    metrics = Metrics()
    worker = Worker(client.store, registry, config, faults=Faults.from_env(), metrics=metrics)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    server = None
    if args.metrics_port:
        server = await _serve_metrics(metrics, args.metrics_port, worker)
    print(
        f"worker {config.worker_id} running {', '.join(registry.targets) or 'no targets'}",
        flush=True,
    )
    try:
        await worker.run(stop)
    finally:
        if server is not None:
            server.close()
    print(f"worker {config.worker_id} stopped", flush=True)
    return 0
