"""Moving running instances to another version from the command line (issue 21).

``wayline definition declare-edge NAME@FROM TO --actor A --reason R`` declares the edge
instances of ``NAME@FROM`` may be migrated along (``Client.declare_migration``).

``wayline instance migrate ID... --to VERSION --actor A --reason R`` is the studio's bulk
migrate (``engine.api.bulk_commands``): every instance is judged first (an unknown id
stops the command before anything happens), then each is paused if it runs, migrated
and resumed, judged again as it moves; it prints one line per instance (``done``,
``unchanged`` or ``refused`` and why) and exits 1 when any was refused. ``--dry-run``
prints the judgement alone, and exits 1 too when any would be refused; ``--bulk-id``
repeated after a crash acts on no instance twice. A code run's journal is replayed
against the target version's code, which ``--app MODULE:APP`` loads; without it a code
run is refused, and the line says to give it.
"""

from __future__ import annotations

import argparse
import uuid

from engine.api.bulk_commands import BulkCommand, BulkCommands
from engine.api.client import Client
from engine.cli.definitions import app_from
from engine.cli.options import (
    EXIT_FAILED,
    UsageError,
    actor,
    named_instance,
    reason,
    team,
    version,
)
from engine.cli.runtime import add_command, add_group
from engine.decide.bulk_actions import bulk_request
from engine.decide.operator_actions import Action
from engine.decide.previews import Preview, Verdict
from engine.model.errors import DefinitionNotFound
from engine.model.identifiers import name_problem
from engine.model.limits import MAX_BULK_INSTANCES
from engine.modes.code.replay_gate import NOT_LOADED
from engine.store import catalog

AUDITED = "recorded in the audit trail"


def register(commands: argparse._SubParsersAction) -> None:
    """``instance migrate``."""
    actions = add_group(commands, "instance", "act on running instances", "Act on instances.")
    move = add_command(
        actions,
        "migrate",
        "migrate instances to another version of their name along a declared edge",
        _migrate,
    )
    move.add_argument(
        "instances",
        nargs="+",
        metavar="ID",
        type=named_instance,
        help=f"at most {MAX_BULK_INSTANCES}",
    )
    move.add_argument("--to", required=True, metavar="VERSION", dest="to_version", type=version)
    move.add_argument("--actor", required=True, type=actor, help=f"who migrates them ({AUDITED})")
    move.add_argument(
        "--reason", required=True, type=reason, help=f"why ({AUDITED} with the fingerprints)"
    )
    move.add_argument("--team", default="", type=team, help="the team the bulk is recorded for")
    move.add_argument("--bulk-id", help="idempotency id of the whole migration (default: new)")
    move.add_argument(
        "--app",
        metavar="MODULE:APP",
        help="the app whose code workflows a code run's journal is replayed against",
    )
    move.add_argument("--dry-run", action="store_true", help="judge each instance, change nothing")


def register_edge(actions: argparse._SubParsersAction) -> None:
    """``definition declare-edge``, beside ``definition publish``."""
    edge = add_command(
        actions,
        "declare-edge",
        "declare that instances of NAME@FROM may be migrated to version TO",
        _declare_edge,
    )
    edge.add_argument("source", metavar="NAME@FROM")
    edge.add_argument("to_version", metavar="TO", type=version)
    edge.add_argument("--actor", required=True, type=actor, help=f"who declares it ({AUDITED})")
    edge.add_argument("--reason", required=True, type=reason, help=f"why they may move ({AUDITED})")


def register_deprecate(actions: argparse._SubParsersAction) -> None:
    """``definition deprecate``, beside ``definition publish``: the studio's and the API's
    deprecate, for a name published from the command line (team '', which no studio
    account belongs to) or by ``--team T``."""
    retire = add_command(
        actions,
        "deprecate",
        "refuse new instances of NAME@VERSION; instances already on it keep it",
        _deprecate,
    )
    retire.add_argument("pin", metavar="NAME@VERSION")
    retire.add_argument("--actor", required=True, type=actor, help="who deprecates it (kept)")
    retire.add_argument("--team", default="", type=team, help="the team that published it")


async def _deprecate(client: Client, args: argparse.Namespace) -> int:
    """Deprecate a version the team published; another team's is refused as if it were
    not published, as the studio refuses it."""
    name, at_version = edge_source(args.pin, "version to deprecate")
    if await catalog.name_owner(client.store, name) not in (args.team, None):
        raise DefinitionNotFound(f"{name}@{at_version} is not published")
    await client.deprecate(name, at_version, args.actor)
    print(
        f"deprecated {name}@{at_version} (by {args.actor}): new instances of it are refused;"
        " instances already on it keep it until they end or are migrated"
    )
    return 0


def edge_source(text: str, what_it_is: str = "edge's source") -> tuple[str, str]:
    """``NAME@FROM`` as (name, version); UsageError naming the expected shape, or what
    a name or version may be (``order@1 2`` is not published, ``order@x/y`` is no version)."""
    name, at, source = text.rpartition("@")
    if not at or not name or not source:
        raise UsageError(f"give the {what_it_is} as NAME@VERSION, not {text!r}")
    for what, value in (("definition name", name), ("version", source)):
        if problem := name_problem(value):
            raise UsageError(f"in the {what_it_is} {text!r}, the {what} {problem}")
    return name, source


async def _declare_edge(client: Client, args: argparse.Namespace) -> int:
    name, from_version = edge_source(args.source)
    created = await client.declare_migration(
        name, from_version, args.to_version, args.actor, args.reason
    )
    edge = f"{name}@{from_version} -> {name}@{args.to_version}"
    print(f"declared {edge}" if created else f"{edge} was declared before (that one is kept)")
    return 0


async def _migrate(client: Client, args: argparse.Namespace) -> int:
    request = bulk_request(Action.MIGRATE, arguments={"version": args.to_version})
    bulk = BulkCommands(client, app_from(args.app).workflows if args.app else ())
    previews = await bulk.preview(args.instances, request)  # every id exists, or stop here
    if args.dry_run:
        for preview in previews:
            print(_hinted(_judged(preview), args.app))
        return EXIT_FAILED if any(p.verdict is Verdict.REFUSED for p in previews) else 0
    asked = BulkCommand(
        args.bulk_id or uuid.uuid4().hex,
        args.team,
        request.action.value,
        "",
        dict(request.effect),
        args.actor,
        args.reason.strip(),
        tuple(dict.fromkeys(args.instances)),
    )
    outcome = await bulk.act(asked)
    for result in outcome.results:
        print(_hinted(f"{result.outcome} {result.instance_id}: {result.detail}", args.app))
    counts = {o: sum(r.outcome == o for r in outcome.results) for o in ("done", "unchanged")}
    refused = len(outcome.results) - sum(counts.values())
    print(
        f"bulk {outcome.bulk.bulk_id}: {counts['done']} migrated, "
        f"{counts['unchanged']} unchanged, {refused} refused"
    )
    return EXIT_FAILED if refused else 0


def _hinted(line: str, app: str | None) -> str:
    """``line``, saying after a code run's "not loaded here" what to do about it."""
    if app:
        hint = f"{NOT_LOADED} (--app {app} does not declare it with the published code)"
    else:
        hint = f"{NOT_LOADED} (give --app MODULE:APP)"
    return line.replace(NOT_LOADED, hint)


def _judged(preview: Preview) -> str:
    """``applies order-80: order@1 -> order@2`` or ``refused order-81: <why>``."""
    if preview.applies and preview.moves_to is not None:
        return f"applies {preview.instance_id}: {preview.definition} -> {preview.moves_to}"
    return f"{preview.verdict.value} {preview.instance_id}: {preview.reason}"
